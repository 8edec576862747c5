#pragma once
// The stdlib and the bundled recipes, compiled into the binary (see cmake/embed_lua.cmake).
#include <cstddef>
#include <string_view>

namespace cs::embedded {

struct File {
  const char* path;  // relative to the repository: "stdlib/cs/stats.lua", "recipes/bw_sweep.lua"
  const char* data;
  size_t size;
};
extern const File kFiles[];  // ends with {nullptr, nullptr, 0}

// The embedded file at `path`, or nullptr.
const File* find(std::string_view path);

}  // namespace cs::embedded
