#include "int_list.hpp"

#include <algorithm>

#include "text.hpp"

namespace cs {

namespace {

constexpr int kMaxValue = 1 << 20;

// A decimal number below kMaxValue, the whole of `s`.
bool number(std::string_view s, int* out) {
  if (s.empty() || s.size() > 7) return false;
  long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v >= kMaxValue) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

std::string format_int_ranges(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(values[i]);
    if (j > i) out += '-' + std::to_string(values[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_int_ranges(std::string_view text, bool strict) {
  std::vector<int> out;
  text = trim(text);
  if (text.empty()) return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view part = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    const size_t dash = part.find('-');
    int a = 0, b = 0;
    const bool ok = dash == std::string_view::npos
                        ? number(part, &a) && (b = a, true)
                        : number(trim(part.substr(0, dash)), &a) && number(trim(part.substr(dash + 1)), &b) && a <= b;
    if (!ok) {
      if (strict) return {};
      continue;
    }
    for (int v = a; v <= b; ++v) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace cs
