#pragma once
// Reading a customer's artifacts for `triage` (stdlib/cs/triage.lua): whole files, bounded in
// size, gzip inflated (zlib), other compressions refused by their magic bytes; the files of a
// directory; and which paths the user named with --paths on commscript's command line (the only
// ones a recipe may read: a shared recipe cannot read what the user did not name).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace cs::triage {

struct ReadLimits {
  size_t max_file = 256u << 20;      // bytes on disk
  size_t max_inflated = 512u << 20;  // bytes after gunzip
};

// The contents of `path`, inflated when it is gzip. InputError (exit 1) with a clear message for
// a missing, unreadable, over-size or truncated file, or one compressed by something else.
// Memory: the file once; a gzip file is inflated twice, first only counting its bytes (refused
// past max_inflated with nothing kept: a gzip bomb costs no memory), then into one buffer of
// exactly that size.
std::string read_artifact(const std::string& path, const ReadLimits& limits = {});

// The regular files under `dir`, recursively (at most `max_depth` levels and `max_files` files;
// hidden entries skipped), sorted by path. InputError when `dir` cannot be read.
std::vector<std::string> list_files(const std::string& dir, int max_depth = 4, size_t max_files = 10000);

// "file", "directory", or "" when `path` does not exist (or is something else).
std::string path_kind(const std::string& path);

// The values of `option` on this process's command line (/proc/self/cmdline), `--paths A,B`
// or `--paths=A,B`, split at ','; and, when the recipe word is the bundled triage's (see
// is_triage_recipe), its positional words (`commscript triage LOG DUMPDIR`), each whole. Only
// these are readable: not the recipe, not --out, --config or any other word (so `--out .` does
// not make the working directory readable). `takes_value` tells which of commscript's own
// options take a value (they come before the recipe word).
std::vector<std::string> command_line_paths(const std::string& option = "--paths",
                                            const std::function<bool(const std::string&)>& takes_value = {});

// True for the words that name the bundled triage recipe: triage, triage.lua, recipes/triage.lua.
bool is_triage_recipe(const std::string& word);

// The words of a recipe's command line (RECIPE, then its options): for triage, the positional
// words (neither an option nor the value of one) and the values of --paths, moved into one
// `--paths=A,B,...` after the recipe word; any other recipe's words unchanged.
std::vector<std::string> recipe_words(const std::vector<std::string>& words);

// True when `path` is one of `named`, or lies under one of them that is a directory (compared
// after resolving both with realpath).
bool path_named(const std::string& path, const std::vector<std::string>& named);

}  // namespace cs::triage
