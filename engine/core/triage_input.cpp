#include "triage_input.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "error.hpp"
#include "file_read.hpp"

namespace cs::triage {

namespace {

// Inflates `in` into `out` (when given) or only counts its bytes: the size, or InputError for
// corrupt or truncated data and past `cap` bytes (checked at every 64 KiB, before more is kept).
size_t inflate_pass(const std::string& path, const std::string& in, size_t cap, char* out) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw InputError(path + ": cannot start zlib");
  std::unique_ptr<z_stream, int (*)(z_stream*)> end(&z, inflateEnd);
  char scratch[1 << 16];
  size_t total = 0;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(out ? out + total : scratch);
    z.avail_out = static_cast<uInt>(out ? std::min<size_t>(cap - total, 1u << 30) : sizeof scratch);
    const uInt room = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    total += room - z.avail_out;
    if (rc == Z_STREAM_END) break;
    if (total >= cap && z.avail_out == 0)
      throw InputError(path + ": inflates past " + std::to_string(cap >> 20) +
                       " MiB (a gzip bomb, or a dump too large to triage here)");
    if (z.avail_in == 0 && z.avail_out != 0) {  // no more input, and zlib wants more
      rc = Z_BUF_ERROR;
      break;
    }
  }
  if (rc != Z_STREAM_END)
    throw InputError(path + ": gzip data is " + (rc == Z_BUF_ERROR ? "truncated" : "corrupt") +
                     (z.msg ? std::string(" (") + z.msg + ")" : std::string()));
  return total;
}

std::string inflate_gzip(const std::string& path, const std::string& in, const ReadLimits& limits) {
  const size_t n = inflate_pass(path, in, limits.max_inflated, nullptr);
  std::string out(n + 1, '\0');  // one byte of room: zlib ends the stream only with room left
  if (inflate_pass(path, in, n + 1, out.data()) != n) throw InputError(path + ": gzip data changed while read");
  out.resize(n);
  return out;
}

std::string real(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return {};
  return buf;
}

// The bytes of the artifact at `path`: through the shared reader (file_read.hpp), so that a FIFO
// or device swapped in for the file between the checks is never opened blocking, and never more
// than limits.max_file bytes are read, whatever the size said (it was stat, then ifstream).
std::string read_file_bounded(const std::string& path, const ReadLimits& limits) {
  FileRead r = read_regular_file(path, limits.max_file);
  if (r.ok()) return std::move(r.text);
  const std::string mib = std::to_string(limits.max_file >> 20) + " MiB triage reads";
  switch (r.failure) {
    case ReadFailure::not_regular:
      throw InputError(path + ": not a regular file (" + r.kind + ")");
    case ReadFailure::too_large:
      if (static_cast<unsigned long long>(r.st.st_size) > limits.max_file)
        throw InputError(path + ": " + std::to_string(r.st.st_size) + " bytes, more than the " + mib);
      throw InputError(path + ": grew past the " + mib + " while read");
    case ReadFailure::open:
      throw InputError(path + ": " + std::strerror(r.error));
    default:
      throw InputError(path + ": " + r.why);
  }
}

}  // namespace

std::string path_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  if (S_ISDIR(st.st_mode)) return "directory";
  if (S_ISREG(st.st_mode)) return "file";
  return {};
}

std::string read_artifact(const std::string& path, const ReadLimits& limits) {
  std::string data = read_file_bounded(path, limits);
  auto starts = [&](const char* magic, size_t n) {
    return data.size() >= n && std::memcmp(data.data(), magic, n) == 0;
  };
  if (starts("\x1f\x8b", 2)) return inflate_gzip(path, data, limits);
  if (starts("BZh", 3)) throw InputError(path + ": bzip2-compressed; triage reads gzip only (bunzip2 it first)");
  if (starts("\xfd"
             "7zXZ",
             6))
    throw InputError(path + ": xz-compressed; triage reads gzip only (unxz it first)");
  if (starts("\x28\xb5\x2f\xfd", 4))
    throw InputError(path + ": zstd-compressed; triage reads gzip only (unzstd it first)");
  if (starts("PK\x03\x04", 4)) throw InputError(path + ": a zip archive; unzip it and pass the directory");
  return data;
}

std::vector<std::string> list_files(const std::string& dir, int max_depth, size_t max_files) {
  std::vector<std::string> out;
  std::vector<std::pair<std::string, int>> todo{{dir, 0}};
  bool first = true;
  while (!todo.empty()) {
    auto [d, depth] = todo.back();
    todo.pop_back();
    std::unique_ptr<DIR, int (*)(DIR*)> h(::opendir(d.c_str()), ::closedir);
    if (!h) {
      if (first) throw InputError(dir + ": cannot read the directory: " + std::strerror(errno));
      continue;
    }
    first = false;
    while (dirent* e = ::readdir(h.get())) {
      if (e->d_name[0] == '.') continue;
      std::string p = d + (d.empty() || d.back() == '/' ? "" : "/") + e->d_name;
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        if (depth + 1 < max_depth) todo.emplace_back(p, depth + 1);
      } else if (S_ISREG(st.st_mode)) {
        if (out.size() >= max_files)
          throw InputError(dir + ": more than " + std::to_string(max_files) + " files; name the ones to triage");
        out.push_back(p);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Words of `args` from `first` on, as the triage recipe reads them: calls f(word, is_option_value)
// for each word that is a value (of `option`, when is_option_value) or positional.
void triage_words(const std::vector<std::string>& args, size_t first, const std::string& option,
                  const std::function<void(const std::string&, bool)>& f) {
  const std::string with_eq = option + "=";
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.compare(0, 2, "--") != 0) {
      f(a, false);  // positional
    } else if (a.compare(0, with_eq.size(), with_eq) == 0) {
      f(a.substr(with_eq.size()), true);
    } else if (a == option && i + 1 < args.size()) {
      f(args[++i], true);
    } else if (a.find('=') == std::string::npos && a != "--help") {
      ++i;  // every option of triage takes a value
    }
  }
}

void split_at_commas(const std::string& v, std::vector<std::string>& out) {
  size_t s = 0;
  for (size_t j = 0; j <= v.size(); ++j) {
    if (j < v.size() && v[j] != ',') continue;
    if (j > s) out.push_back(v.substr(s, j - s));
    s = j + 1;
  }
}

// The index of the recipe word in commscript's command line (after its own options), or 0.
size_t recipe_index(const std::vector<std::string>& args, const std::function<bool(const std::string&)>& takes_value) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') return i;
    if (a.find('=') == std::string::npos && takes_value && takes_value(a)) ++i;
  }
  return 0;
}

}  // namespace

bool is_triage_recipe(const std::string& word) {
  return word == "triage" || word == "triage.lua" || word == "recipes/triage.lua";
}

std::vector<std::string> recipe_words(const std::vector<std::string>& words) {
  if (words.empty() || !is_triage_recipe(words[0])) return words;
  std::vector<std::string> out{words[0]};
  std::string paths;
  bool any = false;
  triage_words(words, 1, "--paths", [&](const std::string& w, bool) {
    paths += (any ? "," : "") + w;
    any = true;
  });
  // the other options, in their order
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& a = words[i];
    if (a.compare(0, 2, "--") != 0 || a.compare(0, 8, "--paths=") == 0) continue;
    if (a == "--paths") {
      ++i;
      continue;
    }
    out.push_back(a);
    if (a.find('=') == std::string::npos && a != "--help" && i + 1 < words.size()) out.push_back(words[++i]);
  }
  if (any) out.push_back("--paths=" + paths);
  return out;
}

std::vector<std::string> command_line_paths(const std::string& option,
                                            const std::function<bool(const std::string&)>& takes_value) {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] != '\0') continue;
    args.push_back(all.substr(start, i - start));
    start = i + 1;
  }
  if (start < all.size()) args.push_back(all.substr(start));
  std::vector<std::string> paths;
  const std::string with_eq = option + "=";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == option && i + 1 < args.size())
      split_at_commas(args[i + 1], paths);
    else if (args[i].compare(0, with_eq.size(), with_eq) == 0)
      split_at_commas(args[i].substr(with_eq.size()), paths);
  }
  // `commscript [options] triage LOG DUMPDIR ...`: the positional words, each a path
  const size_t r = recipe_index(args, takes_value);
  if (r > 0 && is_triage_recipe(args[r]))
    triage_words(args, r + 1, option, [&](const std::string& w, bool value) {
      if (!value) paths.push_back(w);
    });
  return paths;
}

bool path_named(const std::string& path, const std::vector<std::string>& named) {
  const std::string p = real(path);
  if (p.empty()) return false;
  for (const auto& n : named) {
    const std::string r = real(n);
    if (r.empty()) continue;
    if (p == r) return true;
    if (path_kind(r) == "directory" && p.size() > r.size() && p.compare(0, r.size(), r) == 0 &&
        (r == "/" || p[r.size()] == '/'))
      return true;
  }
  return false;
}

}  // namespace cs::triage
