// Summaries of timing samples: nearest-rank percentiles (as nccl-tests -I), sample stdev, cv.
#define CATCH_CONFIG_MAIN
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "stats.hpp"

TEST_CASE("summarize: 1..100 in any order", "[stats]") {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  std::mt19937 rng(12345);
  std::shuffle(v.begin(), v.end(), rng);
  const cs::Summary s = cs::summarize(v);
  CHECK(s.n == 100);
  CHECK(s.min == 1.0);
  CHECK(s.max == 100.0);
  CHECK(s.mean == Approx(50.5).epsilon(1e-12));
  CHECK(s.p50 == 50.0);
  CHECK(s.p95 == 95.0);
  CHECK(s.p99 == 99.0);
  // Sample variance of 1..n is n(n+1)/12.
  CHECK(s.stdev == Approx(std::sqrt(100.0 * 101.0 / 12.0)).epsilon(1e-12));
  CHECK(s.cv() == Approx(std::sqrt(100.0 * 101.0 / 12.0) / 50.5).epsilon(1e-12));
}

TEST_CASE("summarize: sample standard deviation and cv", "[stats]") {
  const cs::Summary s = cs::summarize({2, 4, 4, 4, 5, 5, 7, 9});
  CHECK(s.n == 8);
  CHECK(s.mean == 5.0);
  CHECK(s.stdev == Approx(std::sqrt(32.0 / 7.0)).epsilon(1e-12));  // 2.13809...
  CHECK(s.stdev == Approx(2.138089935).epsilon(1e-9));
  CHECK(s.cv() == Approx(std::sqrt(32.0 / 7.0) / 5.0).epsilon(1e-12));
  CHECK(s.min == 2.0);
  CHECK(s.max == 9.0);
  CHECK(s.p50 == 4.0);  // nearest rank: ceil(0.5 * 8) = 4th smallest
  CHECK(s.p95 == 9.0);
  CHECK(s.p99 == 9.0);
}

TEST_CASE("summarize: empty and single-sample input", "[stats]") {
  const cs::Summary e = cs::summarize({});
  CHECK(e.n == 0);
  CHECK(e.min == 0.0);
  CHECK(e.max == 0.0);
  CHECK(e.mean == 0.0);
  CHECK(e.p50 == 0.0);
  CHECK(e.p99 == 0.0);
  CHECK(e.stdev == 0.0);
  CHECK(e.cv() == 0.0);

  const cs::Summary one = cs::summarize({3.25});
  CHECK(one.n == 1);
  CHECK(one.min == 3.25);
  CHECK(one.max == 3.25);
  CHECK(one.mean == 3.25);
  CHECK(one.p50 == 3.25);
  CHECK(one.p95 == 3.25);
  CHECK(one.p99 == 3.25);
  CHECK(one.stdev == 0.0);
  CHECK(one.cv() == 0.0);
}

TEST_CASE("summarize: constant samples and a zero mean", "[stats]") {
  const cs::Summary c = cs::summarize(std::vector<double>(10, 7.5));
  CHECK(c.stdev == Approx(0.0).margin(1e-12));
  CHECK(c.cv() == Approx(0.0).margin(1e-12));
  const cs::Summary z = cs::summarize({0, 0, 0});
  CHECK(z.cv() == 0.0);  // no division by zero
}

TEST_CASE("percentile_sorted: nearest rank", "[stats]") {
  const std::vector<double> v{10, 20, 30, 40, 50};
  CHECK(cs::percentile_sorted(v, 0) == 10);
  CHECK(cs::percentile_sorted(v, 20) == 10);  // ceil(1.0) = 1st
  CHECK(cs::percentile_sorted(v, 21) == 20);  // ceil(1.05) = 2nd
  CHECK(cs::percentile_sorted(v, 50) == 30);  // ceil(2.5) = 3rd
  CHECK(cs::percentile_sorted(v, 80) == 40);
  CHECK(cs::percentile_sorted(v, 81) == 50);
  CHECK(cs::percentile_sorted(v, 100) == 50);
  CHECK(cs::percentile_sorted(v, 150) == 50);  // clamped
  CHECK(cs::percentile_sorted(v, -5) == 10);
  CHECK(cs::percentile_sorted({}, 50) == 0.0);

  // Against a direct definition: the smallest value with at least p% of samples <= it.
  std::vector<double> w;
  for (int i = 0; i < 37; ++i) w.push_back(i * 1.5);
  for (double p = 0.5; p <= 100.0; p += 0.5) {
    INFO("p=" << p);
    const double got = cs::percentile_sorted(w, p);
    double want = w.back();
    for (double x : w) {
      const double below = static_cast<double>(std::count_if(w.begin(), w.end(), [&](double y) { return y <= x; }));
      if (below * 100.0 >= p * static_cast<double>(w.size()) - 1e-9) {
        want = x;
        break;
      }
    }
    CHECK(got == want);
  }
}
