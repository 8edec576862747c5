#pragma once
// The one did-you-mean distance of commscript: optimal string alignment (Levenshtein plus swaps
// of neighbours), byte by byte. The command line suggests its own options with it (cli.cpp); the
// stdlib reads it as commscript.native.edit_distance (cs.text.distance: recipe options,
// environment variable names).
#include <algorithm>
#include <string_view>
#include <vector>

namespace cs {

inline size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t lb = b.size();
  std::vector<size_t> prev2(lb + 1), prev(lb + 1), cur(lb + 1);  // rows i-2, i-1, i
  for (size_t j = 0; j <= lb; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[lb];
}

}  // namespace cs
