#pragma once
#include <cstddef>
#include <vector>

namespace cs {

struct Summary {
  size_t n = 0;
  double min = 0, mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0, stdev = 0;
  double cv() const { return mean > 0 ? stdev / mean : 0.0; }  // coefficient of variation
};

// Percentiles by the nearest rank (as nccl-tests -I): of n sorted values the ceil(p/100 x n)-th, a
// measured value; p50 is therefore not the median (the mean of the two middle values of an even
// n, stdlib/cs/stats.lua's median). Both defined in one place: docs/lua-api.md, "Median and
// percentiles". stdev is the sample deviation.
Summary summarize(std::vector<double> samples);
double percentile_sorted(const std::vector<double>& sorted, double p);

}  // namespace cs
