#include "size.hpp"

#include <cctype>
#include <limits>

namespace cs {

std::optional<uint64_t> parse_size(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  std::string_view suf = s.substr(i);
  unsigned shift = 0;
  if (!suf.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suf.front()))) {
      case 'B':
        shift = 0;
        break;
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        return std::nullopt;
    }
    suf.remove_prefix(1);
    // Accept 64K, 64KB, 64KiB (all binary, as nccl-tests does).
    if (shift && (suf == "B" || suf == "b" || suf == "iB" || suf == "ib")) suf = {};
    if (!suf.empty()) return std::nullopt;
  }
  if (shift && v > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
  return v << shift;
}

std::string format_size(uint64_t b) {
  static const char* suffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++i;
  }
  return std::to_string(b) + suffix[i];
}

}  // namespace cs
