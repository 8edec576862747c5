#include "semver.hpp"

#include <cctype>

#include "error.hpp"
#include "text.hpp"

namespace cs {

std::string Version::str() const {
  return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

std::optional<Version> parse_version(std::string_view s) {
  s = trim(s);
  Version out;
  int part = 0;
  size_t i = 0;
  while (true) {
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
    long n = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      n = n * 10 + (s[i++] - '0');
      if (n > 1000000) return std::nullopt;
    }
    out.v[static_cast<size_t>(part++)] = static_cast<int>(n);
    if (i == s.size()) return out;
    if (s[i] != '.' || part == 3) return std::nullopt;
    ++i;
  }
}

bool version_satisfies(const Version& v, std::string_view range) {
  bool ok = true;
  bool any = false;
  while (true) {
    const size_t comma = range.find(',');
    std::string_view term = trim(range.substr(0, comma));
    const std::string bad = "malformed version range '" + std::string(range) + "'";
    if (term.empty()) throw InputError(bad + " (empty term)");
    std::string_view opr;
    for (std::string_view o : {">=", "<=", "==", ">", "<", "="}) {
      if (term.substr(0, o.size()) == o) {
        opr = o;
        break;
      }
    }
    auto want = parse_version(term.substr(opr.size()));
    if (!want) throw InputError(bad + " ('" + std::string(term) + "' is not a comparison)");
    if (opr == ">=")
      ok = ok && v >= *want;
    else if (opr == "<=")
      ok = ok && v <= *want;
    else if (opr == ">")
      ok = ok && v > *want;
    else if (opr == "<")
      ok = ok && v < *want;
    else
      ok = ok && v == *want;
    any = true;
    if (comma == std::string_view::npos) break;
    range = range.substr(comma + 1);
  }
  return any && ok;
}

}  // namespace cs
