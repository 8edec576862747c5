#include "pattern.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cs {

int64_t pattern_value(int rank, size_t index, ReduceOp op, uint32_t salt) {
  const uint64_t r = static_cast<uint64_t>(rank), s = salt;
  if (op == ReduceOp::prod)  // mostly 1, sometimes 2: products stay exact powers of two
    return ((r + index + s) % 4 == 0) ? 2 : 1;
  return static_cast<int64_t>(1 + (r * 13 + index * 7 + s * 5) % 9);
}

void fill_pattern(Tensor& t, int rank, ReduceOp op, uint32_t salt) {
  visit_dtype(t.dtype(), [&]<class T>() {
    T* p = static_cast<T*>(t.data());
    for (size_t i = 0; i < t.count(); ++i) p[i] = static_cast<T>(pattern_value(rank, i, op, salt));
  });
}

namespace {

// The largest magnitude below which every integer is exact, and the machine epsilon.
template <class T>
constexpr float float16_exact_limit() {
  return std::is_same_v<T, Half> ? 2048.0f : 256.0f;
}
template <class T>
constexpr float float16_epsilon() {
  return std::is_same_v<T, Half> ? 0x1p-10f : 0x1p-7f;
}

// The nranks contributions to element `index` folded in Acc, step by step as the reduction does.
template <class Acc>
Acc fold_contributions(const CheckSpec& s, size_t index) {
  Acc acc = static_cast<Acc>(pattern_value(0, index, s.op, s.salt));
  for (int r = 1; r < s.nranks; ++r) {
    const Acc v = static_cast<Acc>(pattern_value(r, index, s.op, s.salt));
    switch (s.op) {
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  if (s.op == ReduceOp::avg) acc /= static_cast<Acc>(s.nranks);
  return acc;
}

// Combines the nranks contributions to element `index` the way the reduction does, in T.
template <class T>
T reduce_expected(const CheckSpec& s, size_t index) {
  if constexpr (std::is_integral_v<T>) {
    // Modular arithmetic in 64 bits, then the same wrap to T the device/MPI applies.
    uint64_t acc = static_cast<uint64_t>(pattern_value(0, index, s.op, s.salt));
    int64_t mn = static_cast<int64_t>(static_cast<T>(acc)), mx = mn;
    for (int r = 1; r < s.nranks; ++r) {
      const int64_t v = pattern_value(r, index, s.op, s.salt);
      if (s.op == ReduceOp::prod)
        acc *= static_cast<uint64_t>(v);
      else
        acc += static_cast<uint64_t>(v);
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    if (s.op == ReduceOp::min) return static_cast<T>(mn);
    if (s.op == ReduceOp::max) return static_cast<T>(mx);
    return static_cast<T>(acc);
  } else if constexpr (is_float16_v<T>) {
    // The exact result (sums of small integers and products of powers of two are exact in
    // double), rounded once to T. The device rounds every step; with the patterns' values the
    // steps are exact while the result stays within float16_exact_limit (see same()).
    return T(fold_contributions<double>(s, index));
  } else {
    return fold_contributions<T>(s, index);
  }
}

template <class T>
bool same(T got, T want, ReduceOp op, int nranks) {
  if constexpr (std::is_floating_point_v<T>) {
    // avg may be computed as a premultiplied sum by other backends (nccl-tests allows 2 ulp).
    if (op == ReduceOp::avg) return std::fabs(got - want) <= 2 * std::numeric_limits<T>::epsilon() * std::fabs(want);
  } else if constexpr (is_float16_v<T>) {
    // Exact while every partial result is an integer the format holds exactly (|x| <= 2048 for
    // float16, 256 for bfloat16: the fill values are 1..9, so sum is exact up to 227 and 28
    // ranks); min, max and prod (powers of two) are always exact. Beyond that, and for avg
    // (NCCL computes it as a sum premultiplied by 1/n, rounding each term), the rounding depends
    // on the order of the steps. Each of the n - 1 steps rounds by at most half an ulp of a
    // partial result no larger than the result (the values are positive), and avg adds the
    // rounding of 1/n and of each product: allowed are (n + 1) / 2 x epsilon x |want|.
    const float g = static_cast<float>(got), w = static_cast<float>(want);
    const bool exact = op == ReduceOp::min || op == ReduceOp::max || op == ReduceOp::prod ||
                       (op == ReduceOp::sum && std::fabs(w) <= float16_exact_limit<T>());
    if (exact) return g == w;
    return std::fabs(g - w) <= 0.5f * static_cast<float>(nranks + 1) * float16_epsilon<T>() * std::fabs(w);
  }
  return got == want;
}

template <class T>
uint64_t count_wrong_t(const CheckSpec& s, const T* got) {
  const size_t c = s.count;
  const size_t me = static_cast<size_t>(s.rank);
  uint64_t wrong = 0;
  auto expect = [&](size_t k, T want) { wrong += !same(got[k], want, s.op, s.nranks); };
  auto value = [&](int r, size_t i) { return static_cast<T>(pattern_value(r, i, s.op, s.salt)); };
  switch (s.coll) {
    case Collective::allreduce:
      for (size_t i = 0; i < c; ++i) expect(i, reduce_expected<T>(s, i));
      break;
    case Collective::reduce:
      if (s.rank == s.root)
        for (size_t i = 0; i < c; ++i) expect(i, reduce_expected<T>(s, i));
      break;
    case Collective::reduce_scatter:
      for (size_t j = 0; j < c; ++j) expect(j, reduce_expected<T>(s, me * c + j));
      break;
    case Collective::broadcast:
      for (size_t i = 0; i < c; ++i) expect(i, value(s.root, i));
      break;
    case Collective::allgather:
      for (int r = 0; r < s.nranks; ++r)
        for (size_t j = 0; j < c; ++j) expect(static_cast<size_t>(r) * c + j, value(r, j));
      break;
    case Collective::gather:
      if (s.rank == s.root)
        for (int r = 0; r < s.nranks; ++r)
          for (size_t j = 0; j < c; ++j) expect(static_cast<size_t>(r) * c + j, value(r, j));
      break;
    case Collective::scatter:
      for (size_t j = 0; j < c; ++j) expect(j, value(s.root, me * c + j));
      break;
    case Collective::alltoall:
      for (int src = 0; src < s.nranks; ++src)
        for (size_t j = 0; j < c; ++j) expect(static_cast<size_t>(src) * c + j, value(src, me * c + j));
      break;
    case Collective::sendrecv: {
      const int prev = (s.rank - 1 + s.nranks) % s.nranks;
      for (size_t i = 0; i < c; ++i) expect(i, value(prev, i));
      break;
    }
    default:
      break;
  }
  return wrong;
}

}  // namespace

uint64_t count_wrong(const CheckSpec& spec, const Tensor& recv) {
  const Counts n = collective_counts(spec.coll, spec.count, spec.nranks);
  const bool receives =
      !((spec.coll == Collective::reduce || spec.coll == Collective::gather) && spec.rank != spec.root);
  if (receives && recv.count() < n.recv) return n.recv;  // nothing of the result can be trusted
  return visit_dtype(recv.dtype(),
                     [&]<class T>() { return count_wrong_t<T>(spec, static_cast<const T*>(recv.data())); });
}

}  // namespace cs
