#pragma once
// Versions "x.y.z" and the ranges recipes declare in `requires` (">=0.3, <1.0").
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace cs {

struct Version {
  std::array<int, 3> v{0, 0, 0};
  auto operator<=>(const Version&) const = default;
  std::string str() const;
};

std::optional<Version> parse_version(std::string_view text);  // "1", "1.2", "1.2.3"

// True when `v` is inside `range`: comma-separated comparisons (>=, >, <=, <, =, ==) or a bare
// version (meaning =). Throws InputError when the range itself is malformed.
bool version_satisfies(const Version& v, std::string_view range);

}  // namespace cs
