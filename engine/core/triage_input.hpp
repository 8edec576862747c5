#pragma once
// Reading a customer's artifacts for `triage` (stdlib/cs/triage.lua): whole files, bounded in
// size, gzip inflated (zlib), other compressions refused by their magic bytes; the files of a
// directory; and which paths the user named with --paths on commscript's command line (the only
// ones a recipe may read: a shared recipe cannot read what the user did not name).
#include <cstddef>
#include <string>
#include <vector>

namespace cs::triage {

struct ReadLimits {
  size_t max_file = 256u << 20;      // bytes on disk
  size_t max_inflated = 512u << 20;  // bytes after gunzip
};

// The contents of `path`, inflated when it is gzip. InputError (exit 1) with a clear message for
// a missing, unreadable, over-size or truncated file, or one compressed by something else.
std::string read_artifact(const std::string& path, const ReadLimits& limits = {});

// The regular files under `dir`, recursively (at most `max_depth` levels and `max_files` files;
// hidden entries skipped), sorted by path. InputError when `dir` cannot be read.
std::vector<std::string> list_files(const std::string& dir, int max_depth = 4, size_t max_files = 10000);

// "file", "directory", or "" when `path` does not exist (or is something else).
std::string path_kind(const std::string& path);

// The values of `option` on this process's command line (/proc/self/cmdline), `--paths A,B`
// or `--paths=A,B`, split at ','. Only these are readable: not the recipe, not --out, --config
// or any other word (so `--out .` does not make the working directory readable).
std::vector<std::string> command_line_paths(const std::string& option = "--paths");

// True when `path` is one of `named`, or lies under one of them that is a directory (compared
// after resolving both with realpath).
bool path_named(const std::string& path, const std::vector<std::string>& named);

}  // namespace cs::triage
