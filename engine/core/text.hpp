#pragma once
// Small text helpers shared by the engine's parsers (one copy each).
#include <string_view>

namespace cs {

// `s` without leading and trailing white space (space, \t, \n, \v, \f, \r: isspace in the C
// locale). A view into `s`: copy it (std::string(trim(s))) to keep it past `s`.
inline std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

}  // namespace cs
