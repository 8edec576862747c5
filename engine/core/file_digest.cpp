// A file's SHA-256 with a host's cache of it (file_digest.hpp): the cache's lock, the file's
// identity, and when an answer may be stored.
#include "file_digest.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "digest.hpp"
#include "file_read.hpp"

namespace cs {

namespace {

namespace fs = std::filesystem;

// What identifies one version of a file on this host: device, inode, size, mtime and ctime in
// nanoseconds (ctime cannot be set back: a file rewritten in place, even with its mtime
// restored, gets a new one). Empty when it cannot be stat'ed.
std::string file_identity(const std::string& path, struct stat* st) {
  if (::stat(path.c_str(), st) != 0 || !S_ISREG(st->st_mode)) return "";
  char b[160];
  std::snprintf(b, sizeof b, "%llx-%llx-%llx-%llx.%09ld-%llx.%09ld", static_cast<unsigned long long>(st->st_dev),
                static_cast<unsigned long long>(st->st_ino), static_cast<unsigned long long>(st->st_size),
                static_cast<unsigned long long>(st->st_mtim.tv_sec), st->st_mtim.tv_nsec,
                static_cast<unsigned long long>(st->st_ctim.tv_sec), st->st_ctim.tv_nsec);
  return b;
}

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The cache directory when it is usable: created 0700 if missing, ours, not writable by others.
bool usable_cache_dir(const std::string& dir) {
  if (dir.empty()) return false;
  ::mkdir(dir.c_str(), 0700);  // an existing one is checked below
  struct stat st {};
  return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// The hash a cache entry holds (written as "<hex>\n"): its 64 hex digits, white space around
// them allowed; "" for anything else.
std::string cached_sha256(const std::string& text) {
  const char* ws = " \t\r\n";
  const size_t b = text.find_first_not_of(ws);
  if (b == std::string::npos || text.find_first_not_of(ws, b + 64) != std::string::npos) return "";
  const std::string hex = text.substr(b, 64);
  return is_sha256_hex(hex) ? hex : "";
}

// Stores `hex` as the hash of the version `id` of `path` (read as `size` bytes), unless the file
// changed while it was read or is younger than min_age_s: a file rewritten within the clock's
// granularity of the hash would keep its identity (the "racy" case git's index has).
void store_in_cache(const std::string& path, const std::string& cache_dir, const std::string& id,
                    const std::string& hex, unsigned long long size, double min_age_s) {
  struct stat after {};
  const std::string id_after = file_identity(path, &after);
  const double age = static_cast<double>(std::time(nullptr) - after.st_ctim.tv_sec);
  if (id_after != id || static_cast<unsigned long long>(after.st_size) != size || age < min_age_s) return;
  const std::string tmp = cache_dir + "/" + id + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << hex << "\n";
  }
  std::error_code rec;
  fs::rename(tmp, cache_dir + "/" + id, rec);
  if (rec) fs::remove(tmp, rec);
}

}  // namespace

std::string default_hash_cache_dir() {
  if (const char* e = std::getenv("COMMSCRIPT_HASH_CACHE")) return std::string(e) == "off" ? std::string() : e;
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp && *tmp ? tmp : "/tmp";
  return base + "/commscript-" + std::to_string(::geteuid()) + "-hashes";
}

FileDigest sha256_file_cached(const std::string& path, const std::string& cache_dir, double min_age_s) {
  FileDigest d;
  // Hashed once per host and file version: the ranks of a host take the cache's lock in turn,
  // the first hashes, the others read its answer. Ranks running different binaries (or a binary
  // replaced meanwhile) have different identities, so each is hashed and a mismatch is seen.
  struct stat st {};
  const std::string id = usable_cache_dir(cache_dir) ? file_identity(path, &st) : std::string();
  int lock = -1;
  if (!id.empty()) {
    lock = ::open((cache_dir + "/" + id + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock >= 0) {
      while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
      }
      const std::string cached = cached_sha256(read_regular_file(cache_dir + "/" + id, 4096).text);
      if (!cached.empty()) {
        d.ok = true;
        d.size = static_cast<unsigned long long>(st.st_size);
        d.sha256 = cached;
        d.from = "host cache";
        ::close(lock);  // releases the lock
        return d;
      }
    }
  }
  d.ok = sha256_file(path, &d.sha256, &d.size, &d.why);
  if (d.ok && lock >= 0) store_in_cache(path, cache_dir, id, d.sha256, d.size, min_age_s);
  if (lock >= 0) ::close(lock);
  if (d.ok) d.from = "computed";
  return d;
}

}  // namespace cs
