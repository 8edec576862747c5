// bench()'s fast fill and check (engine/measure/bench_check.hpp) against the per-element originals
// (engine/core/pattern.hpp): the pattern's period, the same filled elements, and the same count
// of wrong elements on a correct result and on results corrupted in the checked head, in a
// compared chunk, in the last element and in a later block, for every collective.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "bench_check.hpp"
#include "collective.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "pattern.hpp"
#include "tensor.hpp"

namespace {

using cs::Collective;
using cs::DType;
using cs::ReduceOp;
using cs::Tensor;

constexpr size_t kTile = cs::kPatternPeriod * 4096;  // bench_check.cpp's tile

double value(int r, size_t i, ReduceOp op, uint32_t salt) {
  return static_cast<double>(cs::pattern_value(r, i, op, salt));
}

// The exact reduction of element i over n ranks (sum, prod, min, max of small integers and
// powers of two: exact in double and in the dtypes used below).
double reduced(int n, size_t i, ReduceOp op, uint32_t salt) {
  double acc = value(0, i, op, salt);
  for (int r = 1; r < n; ++r) {
    const double v = value(r, i, op, salt);
    if (op == ReduceOp::prod)
      acc *= v;
    else if (op == ReduceOp::min)
      acc = std::min(acc, v);
    else if (op == ReduceOp::max)
      acc = std::max(acc, v);
    else
      acc += v;
  }
  return acc;
}

// The correct receive buffer of `me` for the collective, written here element by element.
Tensor correct(const cs::CheckSpec& s, DType dt) {
  const size_t c = s.count, me = static_cast<size_t>(s.rank);
  const size_t n = cs::collective_counts(s.coll, c, s.nranks).recv;
  Tensor t = Tensor::host(dt, n);
  const bool receives = !((s.coll == Collective::reduce || s.coll == Collective::gather) && s.rank != s.root);
  if (!receives) return t;
  cs::visit_dtype(dt, [&]<class T>() {
    T* p = static_cast<T*>(t.data());
    for (size_t k = 0; k < n; ++k) {
      double v = 0;
      switch (s.coll) {
        case Collective::allreduce:
        case Collective::reduce:
          v = reduced(s.nranks, k, s.op, s.salt);
          break;
        case Collective::reduce_scatter:
          v = reduced(s.nranks, me * c + k, s.op, s.salt);
          break;
        case Collective::broadcast:
          v = value(s.root, k, s.op, s.salt);
          break;
        case Collective::allgather:
        case Collective::gather:
          v = value(static_cast<int>(k / c), k % c, s.op, s.salt);
          break;
        case Collective::scatter:
          v = value(s.root, me * c + k, s.op, s.salt);
          break;
        case Collective::alltoall:
          v = value(static_cast<int>(k / c), me * c + k % c, s.op, s.salt);
          break;
        case Collective::sendrecv:
          v = value((s.rank - 1 + s.nranks) % s.nranks, k, s.op, s.salt);
          break;
        default:
          break;
      }
      p[k] = static_cast<T>(v);
    }
  });
  return t;
}

}  // namespace

TEST_CASE("bench check: the pattern repeats every kPatternPeriod elements") {
  size_t differ = 0;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg})
    for (uint32_t salt : {0u, 1u, 99u})
      for (int r = 0; r < 40; ++r)
        for (size_t i = 0; i < 3 * cs::kPatternPeriod; ++i)
          differ += cs::pattern_value(r, i + cs::kPatternPeriod, op, salt) != cs::pattern_value(r, i, op, salt);
  CHECK(differ == 0);
}

TEST_CASE("bench check: fill_pattern_fast writes fill_pattern's elements") {
  for (DType dt : {DType::int8, DType::float16, DType::float32, DType::float64}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{35}, size_t{37}, kTile - 1, kTile, kTile + 1, 3 * kTile + 5}) {
      Tensor fast = Tensor::host(dt, n), slow = Tensor::host(dt, n);
      cs::fill_pattern_fast(fast, 3, ReduceOp::sum, 1);
      cs::fill_pattern(slow, 3, ReduceOp::sum, 1);
      INFO("dtype " << cs::dtype_name(dt) << ", " << n << " elements");
      CHECK(std::memcmp(fast.data(), slow.data(), slow.bytes()) == 0);
    }
  }
  // A view that starts inside a buffer: the pattern starts at the view's first element.
  Tensor whole = Tensor::host(DType::int32, 2 * kTile + 77);
  Tensor view = whole.slice(77, 2 * kTile);
  cs::fill_pattern_fast(view, 1, ReduceOp::prod, 0);
  Tensor slow = Tensor::host(DType::int32, 2 * kTile);
  cs::fill_pattern(slow, 1, ReduceOp::prod, 0);
  CHECK(std::memcmp(view.data(), slow.data(), slow.bytes()) == 0);
  CHECK(whole.get(76) == 0);
}

TEST_CASE("bench check: count_wrong_fast counts what count_wrong counts") {
  const Collective colls[] = {Collective::allreduce, Collective::reduce,    Collective::reduce_scatter,
                              Collective::broadcast, Collective::allgather, Collective::gather,
                              Collective::scatter,   Collective::alltoall,  Collective::sendrecv};
  // 10: below the fast path's threshold (count_wrong alone); 2 x kTile + 100 (sum) and
  // 2 x kTile + 7 (prod): the head and compared chunks, with count = 28 and 7 modulo the period
  // (reduce_scatter, scatter and alltoall index from rank x count).
  for (size_t small : {size_t{10}, size_t{0}}) {
    for (Collective coll : colls) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod}) {
        const size_t c = small ? small : 2 * kTile + (op == ReduceOp::sum ? 100 : 7);
        const DType dt = op == ReduceOp::sum ? DType::int32 : DType::float64;
        for (int me : {0, 2}) {
          const cs::CheckSpec s{coll, op, me, 3, 2, c, 1};
          INFO(cs::collective_name(coll) << " " << cs::reduce_op_name(op) << " count " << c << " rank " << me);
          Tensor got = correct(s, dt);
          REQUIRE(cs::count_wrong(s, got) == 0);
          bool compared = false;
          CHECK(cs::count_wrong_fast(s, got, &compared) == 0);
          // Large results that receive are decided by the tile comparison, not by count_wrong.
          const bool receives = coll != Collective::gather && coll != Collective::reduce;
          if (!small && (receives || me == 2)) CHECK(compared);
          const size_t n = got.count();
          if (n == 0 || cs::count_wrong(s, Tensor::host(dt, n)) == 0) continue;  // receives nothing
          // Planted: the first element (the checked head), one in the first compared chunk, the
          // last element, and the middle of the last block.
          for (size_t k : {size_t{0}, std::min(n - 1, kTile + 3), n - 1, n - c / 2}) {
            const double was = got.get(k);
            got.set(k, was + 1);
            const uint64_t want = cs::count_wrong(s, got);
            CHECK(want == 1);
            CHECK(cs::count_wrong_fast(s, got) == want);
            got.set(k, was);
          }
          Tensor zero = Tensor::host(dt, n);
          CHECK(cs::count_wrong_fast(s, zero) == cs::count_wrong(s, zero));
          CHECK(cs::count_wrong_fast(s, zero.slice(0, n - 1)) == cs::count_wrong(s, zero.slice(0, n - 1)));
        }
      }
    }
  }
}

#ifdef COMMSCRIPT_HAVE_NCCL
TEST_CASE("GPU: the fast fill and check on a device buffer", "[.gpu]") {
  Tensor d;
  try {
    d = Tensor::on_device(DType::float32, 3 * kTile + 7, 0);
  } catch (const cs::InputError& e) {
    WARN(std::string("no GPU: skipped: ") + e.what());
    return;
  }
  cs::fill_pattern_fast(d, 1, ReduceOp::sum, 5);
  Tensor slow = Tensor::host(DType::float32, d.count());
  cs::fill_pattern(slow, 1, ReduceOp::sum, 5);
  CHECK(std::memcmp(d.to_host().data(), slow.data(), slow.bytes()) == 0);
  // As the receive buffer of a one-rank broadcast from rank 1 of 2: correct, then one element off.
  const cs::CheckSpec s{Collective::broadcast, ReduceOp::sum, 0, 2, 1, d.count(), 5};
  bool compared = false;
  CHECK(cs::count_wrong_fast(s, d, &compared) == 0);
  CHECK(compared);
  d.set(2 * kTile + 1, 0);
  CHECK(cs::count_wrong_fast(s, d) == 1);
}
#endif
