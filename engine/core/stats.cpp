#include "stats.hpp"

#include <algorithm>
#include <cmath>

namespace cs {

double percentile_sorted(const std::vector<double>& s, double p) {
  if (s.empty()) return 0.0;
  p = std::clamp(p, 0.0, 100.0);
  const double rank = std::ceil(p / 100.0 * static_cast<double>(s.size()));
  const size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return s[std::min(idx, s.size() - 1)];
}

Summary summarize(std::vector<double> v) {
  Summary out;
  out.n = v.size();
  if (v.empty()) return out;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  out.min = v.front();
  out.max = v.back();
  // A sum of equal samples can round above their value: the mean never leaves [min, max].
  out.mean = std::clamp(sum / static_cast<double>(v.size()), out.min, out.max);
  double ss = 0;
  for (double x : v) ss += (x - out.mean) * (x - out.mean);
  out.stdev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0;
  out.p50 = percentile_sorted(v, 50);
  out.p95 = percentile_sorted(v, 95);
  out.p99 = percentile_sorted(v, 99);
  return out;
}

}  // namespace cs
