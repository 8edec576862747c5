#pragma once
// The SHA-256 of a file (digest.hpp's sha256_file), hashed once per host and file version: a
// cache directory holds each version's hash, keyed by the file's identity (device, inode, size,
// mtime, ctime), so that the ranks of a host and later runs read what the first one computed
// (docs/scale.md; host/topology.cpp reports the executable's hash with it).
#include <string>

namespace cs {

// $COMMSCRIPT_HASH_CACHE ("off": none), else $TMPDIR (or /tmp)/commscript-<euid>-hashes.
std::string default_hash_cache_dir();

// A file's hash: sha256 (lower-case hex) and size, from = "computed" or "host cache"; why
// instead ("cannot open PATH", "cannot read PATH") when it cannot be read.
struct FileDigest {
  bool ok = false;
  std::string sha256, from, why;
  unsigned long long size = 0;
};

// With a cache_dir (created 0700 if missing; one others can write is not used), the processes of
// a host hash each version of a file once: they take the cache's lock for it in turn, the first
// hashes and stores, the others read. A hash is stored only when the file did not change while
// it was read and its ctime is at least min_age_s old. "" for cache_dir: hashed every time.
FileDigest sha256_file_cached(const std::string& path, const std::string& cache_dir, double min_age_s);

}  // namespace cs
