#pragma once
#include <cstddef>
#include <vector>

namespace cs {

struct Summary {
  size_t n = 0;
  double min = 0, mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0, stdev = 0;
  double cv() const { return mean > 0 ? stdev / mean : 0.0; }  // coefficient of variation
};

// Percentiles by the nearest-rank method (as nccl-tests -I); stdev is the sample deviation.
Summary summarize(std::vector<double> samples);
double percentile_sorted(const std::vector<double>& sorted, double p);

}  // namespace cs
