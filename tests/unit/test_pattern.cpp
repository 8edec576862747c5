// fill_pattern / count_wrong: N ranks simulated in one process. Every rank's send buffer is filled
// with fill_pattern, the collective's result is computed here with plain code (in the dtype's own
// arithmetic, integers wrapping, float16/bfloat16 rounding every step as NCCL does), and
// count_wrong must accept it, count corrupted elements one by one, and reject a receive buffer left
// at zero.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "collective.hpp"
#include "dtype.hpp"
#include "pattern.hpp"
#include "reduce_op.hpp"
#include "tensor.hpp"

namespace {

using cs::Collective;
using cs::DType;
using cs::ReduceOp;

constexpr int kRankCounts[] = {1, 2, 3, 4, 8, 37};  // 37: int8 sums wrap, prod wraps to 0
constexpr uint32_t kSalts[] = {0, 7};
constexpr size_t kCount = 10;  // per-call count; covers every residue of the pattern's period
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};

// a + b and a * b in T, wrapping for integers (computed on the unsigned type: no UB).
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

// A corruption count_wrong must see: one more for integers and float32/64; for float16 and
// bfloat16 twice the value plus one, beyond the n-ulp tolerance their check allows where rounding
// depends on the order of the steps (sums past the exact integers, avg).
template <class T>
T corrupt(T x) {
  if constexpr (cs::is_float16_v<T>)
    return T(2.0f * static_cast<float>(x) + 1.0f);
  else
    return add(x, static_cast<T>(1));
}

template <class T>
T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <class T>
T combine(ReduceOp op, T acc, T v) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return add(acc, v);
    case ReduceOp::prod:
      return mul(acc, v);
    case ReduceOp::min:
      return v < acc ? v : acc;
    case ReduceOp::max:
      return v > acc ? v : acc;
  }
  return acc;
}

template <class T>
using Buffers = std::vector<std::vector<T>>;

// Elementwise reduction of elements [offset, offset + c) of every rank's send buffer.
template <class T>
std::vector<T> reduce_ref(const Buffers<T>& send, size_t offset, size_t c, ReduceOp op) {
  std::vector<T> out(send[0].begin() + static_cast<std::ptrdiff_t>(offset),
                     send[0].begin() + static_cast<std::ptrdiff_t>(offset + c));
  for (size_t r = 1; r < send.size(); ++r)
    for (size_t i = 0; i < c; ++i) out[i] = combine(op, out[i], send[r][offset + i]);
  if (op == ReduceOp::avg)
    for (auto& x : out) x = x / static_cast<T>(send.size());
  return out;
}

template <class T>
void append(std::vector<T>& out, const std::vector<T>& src, size_t offset, size_t c) {
  out.insert(out.end(), src.begin() + static_cast<std::ptrdiff_t>(offset),
             src.begin() + static_cast<std::ptrdiff_t>(offset + c));
}

// Send-buffer length, in elements, of every rank (as the collective defines it).
size_t send_len(Collective coll, size_t c, size_t n) {
  switch (coll) {
    case Collective::reduce_scatter:
    case Collective::scatter:
    case Collective::alltoall:
      return c * n;
    default:
      return c;
  }
}

// What rank `me` holds after the collective; nullopt-like empty vector + false for ranks that
// receive nothing.
template <class T>
bool expected_recv(Collective coll, ReduceOp op, size_t me, size_t n, size_t root, size_t c, const Buffers<T>& send,
                   std::vector<T>& out) {
  out.clear();
  switch (coll) {
    case Collective::allreduce:
      out = reduce_ref(send, 0, c, op);
      return true;
    case Collective::reduce:
      if (me != root) return false;
      out = reduce_ref(send, 0, c, op);
      return true;
    case Collective::reduce_scatter:
      out = reduce_ref(send, me * c, c, op);
      return true;
    case Collective::broadcast:
      append(out, send[root], 0, c);
      return true;
    case Collective::allgather:
      for (size_t r = 0; r < n; ++r) append(out, send[r], 0, c);
      return true;
    case Collective::gather:
      if (me != root) return false;
      for (size_t r = 0; r < n; ++r) append(out, send[r], 0, c);
      return true;
    case Collective::scatter:
      append(out, send[root], me * c, c);
      return true;
    case Collective::alltoall:
      for (size_t src = 0; src < n; ++src) append(out, send[src], me * c, c);
      return true;
    case Collective::sendrecv:
      append(out, send[(me + n - 1) % n], 0, c);
      return true;
    default:
      FAIL("not a bench collective");
      return false;
  }
}

template <class T>
Buffers<T> filled_send_buffers(DType dt, size_t n, size_t len, ReduceOp op, uint32_t salt) {
  Buffers<T> send(n);
  for (size_t r = 0; r < n; ++r) {
    cs::Tensor t = cs::Tensor::host(dt, len);
    cs::fill_pattern(t, static_cast<int>(r), op, salt);
    const T* p = static_cast<const T*>(t.data());
    send[r].assign(p, p + len);
  }
  return send;
}

template <class T>
cs::Tensor to_tensor(DType dt, const std::vector<T>& v) {
  cs::Tensor t = cs::Tensor::host(dt, v.size());
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(T));
  return t;
}

template <class T>
void check_collective_typed(DType dt, Collective coll) {
  const bool is_float = std::is_floating_point_v<T> || cs::is_float16_v<T>;
  for (ReduceOp op : kOps) {
    if (op == ReduceOp::avg && !is_float) continue;
    for (int nranks : kRankCounts) {
      const size_t n = static_cast<size_t>(nranks);
      std::set<size_t> roots{0};
      if (cs::collective_has_root(coll)) roots = {0, n / 2, n - 1};
      for (uint32_t salt : kSalts) {
        const Buffers<T> send = filled_send_buffers<T>(dt, n, send_len(coll, kCount, n), op, salt);
        for (size_t root : roots) {
          for (size_t me = 0; me < n; ++me) {
            INFO(std::string(cs::collective_name(coll))
                 << " dtype=" << cs::dtype_name(dt) << " op=" << cs::reduce_op_name(op) << " nranks=" << nranks
                 << " root=" << root << " rank=" << me << " salt=" << salt);
            const cs::CheckSpec spec{coll, op, static_cast<int>(me), nranks, static_cast<int>(root), kCount, salt};
            std::vector<T> want;
            if (!expected_recv(coll, op, me, n, root, kCount, send, want)) {
              // Non-roots of reduce/gather receive nothing: whatever their buffer holds is fine.
              cs::Tensor junk = cs::Tensor::host(dt, kCount * n);
              CHECK(cs::count_wrong(spec, junk) == 0);
              continue;
            }
            // The exact result: nothing wrong.
            cs::Tensor recv = to_tensor(dt, want);
            CHECK(cs::count_wrong(spec, recv) == 0);

            // Corrupt exactly k elements (each off by one in T; see corrupt()): exactly k wrong.
            const size_t len = want.size();
            const size_t k = std::min<size_t>(3, len);
            std::vector<T> bad = want;
            for (size_t j = 0; j < k; ++j) {
              const size_t pos = j * len / k;
              bad[pos] = corrupt(bad[pos]);
            }
            CHECK(cs::count_wrong(spec, to_tensor(dt, bad)) == k);

            // Every element corrupted: all wrong.
            std::vector<T> all_bad = want;
            for (auto& x : all_bad) x = corrupt(x);
            CHECK(cs::count_wrong(spec, to_tensor(dt, all_bad)) == len);

            // A receive buffer left at zero (nothing arrived): every element whose true value
            // is not 0 is wrong; 0 is a legitimate result only after integer wrap (37 ranks).
            const size_t nonzero = static_cast<size_t>(
                std::count_if(want.begin(), want.end(), [](T x) { return x != static_cast<T>(0); }));
            if (nranks <= 8) CHECK(nonzero == len);
            CHECK(cs::count_wrong(spec, cs::Tensor::host(dt, len)) == nonzero);
          }
        }
      }
    }
  }
}

void check_collective(Collective coll) {
  for (DType dt : cs::kAllDTypes) cs::visit_dtype(dt, [&]<class T>() { check_collective_typed<T>(dt, coll); });
}

}  // namespace

TEST_CASE("fill_pattern writes pattern_value, small nonzero values, rank- and salt-dependent", "[pattern]") {
  for (DType dt : cs::kAllDTypes) {
    for (ReduceOp op : kOps) {
      INFO("dtype=" << cs::dtype_name(dt) << " op=" << cs::reduce_op_name(op));
      cs::Tensor a = cs::Tensor::host(dt, 64);
      cs::Tensor b = cs::Tensor::host(dt, 64);
      cs::Tensor c = cs::Tensor::host(dt, 64);
      cs::fill_pattern(a, 0, op, 0);
      cs::fill_pattern(b, 1, op, 0);
      cs::fill_pattern(c, 0, op, 3);
      bool rank_differs = false, salt_differs = false;
      for (size_t i = 0; i < 64; ++i) {
        const double v = a.get(i);
        CHECK(v == static_cast<double>(cs::pattern_value(0, i, op, 0)));
        CHECK(b.get(i) == static_cast<double>(cs::pattern_value(1, i, op, 0)));
        if (op == ReduceOp::prod)
          CHECK((v == 1.0 || v == 2.0));
        else
          CHECK((v >= 1.0 && v <= 9.0));
        rank_differs = rank_differs || a.get(i) != b.get(i);
        salt_differs = salt_differs || a.get(i) != c.get(i);
      }
      CHECK(rank_differs);
      CHECK(salt_differs);
    }
  }
}

TEST_CASE("fill_pattern of a slice starts the pattern at the slice's first element", "[pattern]") {
  cs::Tensor whole = cs::Tensor::host(DType::int32, 20);
  cs::Tensor part = whole.slice(5, 10);
  cs::fill_pattern(part, 2, ReduceOp::sum, 0);
  for (size_t i = 0; i < 5; ++i) CHECK(whole.get(i) == 0.0);
  for (size_t i = 0; i < 10; ++i)
    CHECK(whole.get(5 + i) == static_cast<double>(cs::pattern_value(2, i, ReduceOp::sum, 0)));
  for (size_t i = 15; i < 20; ++i) CHECK(whole.get(i) == 0.0);
}

TEST_CASE("count_wrong: allreduce", "[pattern]") { check_collective(Collective::allreduce); }
TEST_CASE("count_wrong: reduce (root only)", "[pattern]") { check_collective(Collective::reduce); }
TEST_CASE("count_wrong: reduce_scatter", "[pattern]") { check_collective(Collective::reduce_scatter); }
TEST_CASE("count_wrong: broadcast", "[pattern]") { check_collective(Collective::broadcast); }
TEST_CASE("count_wrong: allgather", "[pattern]") { check_collective(Collective::allgather); }
TEST_CASE("count_wrong: gather (root only)", "[pattern]") { check_collective(Collective::gather); }
TEST_CASE("count_wrong: scatter", "[pattern]") { check_collective(Collective::scatter); }
TEST_CASE("count_wrong: alltoall", "[pattern]") { check_collective(Collective::alltoall); }
TEST_CASE("count_wrong: sendrecv ring (rank r receives from r-1)", "[pattern]") {
  check_collective(Collective::sendrecv);
}

TEST_CASE("count_wrong sees plausible but misrouted data", "[pattern]") {
  using T = int32_t;
  const DType dt = DType::int32;
  const int nranks = 4;
  const size_t n = 4, c = kCount;

  SECTION("sendrecv in the wrong direction (from r+1)") {
    const auto send = filled_send_buffers<T>(dt, n, c, ReduceOp::sum, 0);
    for (size_t me = 0; me < n; ++me) {
      const cs::CheckSpec spec{Collective::sendrecv, ReduceOp::sum, static_cast<int>(me), nranks, 0, c, 0};
      CHECK(cs::count_wrong(spec, to_tensor(dt, send[(me + 1) % n])) > 0);
    }
  }
  SECTION("broadcast from the wrong root") {
    const auto send = filled_send_buffers<T>(dt, n, c, ReduceOp::sum, 0);
    const cs::CheckSpec spec{Collective::broadcast, ReduceOp::sum, 2, nranks, 1, c, 0};
    CHECK(cs::count_wrong(spec, to_tensor(dt, send[1])) == 0);
    CHECK(cs::count_wrong(spec, to_tensor(dt, send[0])) > 0);
  }
  SECTION("allgather with two blocks swapped") {
    const auto send = filled_send_buffers<T>(dt, n, c, ReduceOp::sum, 0);
    std::vector<T> got;
    for (size_t r : {size_t{1}, size_t{0}, size_t{2}, size_t{3}}) append(got, send[r], 0, c);
    const cs::CheckSpec spec{Collective::allgather, ReduceOp::sum, 0, nranks, 0, c, 0};
    CHECK(cs::count_wrong(spec, to_tensor(dt, got)) > 0);
  }
  SECTION("a result computed with another salt") {
    const auto send = filled_send_buffers<T>(dt, n, c, ReduceOp::sum, 1);
    const cs::CheckSpec spec{Collective::allreduce, ReduceOp::sum, 0, nranks, 0, c, 0};
    CHECK(cs::count_wrong(spec, to_tensor(dt, reduce_ref(send, 0, c, ReduceOp::sum))) > 0);
  }
  SECTION("a sum where a max was asked for") {
    const auto send = filled_send_buffers<T>(dt, n, c, ReduceOp::max, 0);
    const cs::CheckSpec spec{Collective::allreduce, ReduceOp::max, 0, nranks, 0, c, 0};
    CHECK(cs::count_wrong(spec, to_tensor(dt, reduce_ref(send, 0, c, ReduceOp::max))) == 0);
    CHECK(cs::count_wrong(spec, to_tensor(dt, reduce_ref(send, 0, c, ReduceOp::sum))) == c);
  }
}

TEST_CASE("count_wrong: a receive buffer shorter than the result is entirely wrong", "[pattern]") {
  const cs::CheckSpec ar{Collective::allreduce, ReduceOp::sum, 0, 4, 0, 16, 0};
  CHECK(cs::count_wrong(ar, cs::Tensor::host(DType::float32, 15)) == 16);
  const cs::CheckSpec ag{Collective::allgather, ReduceOp::sum, 1, 4, 0, 16, 0};
  CHECK(cs::count_wrong(ag, cs::Tensor::host(DType::float32, 63)) == 64);
  const cs::CheckSpec a2a{Collective::alltoall, ReduceOp::sum, 1, 3, 0, 5, 0};
  CHECK(cs::count_wrong(a2a, cs::Tensor::host(DType::int8, 14)) == 15);
}

TEST_CASE("count_wrong: avg tolerates rounding but not a wrong value", "[pattern]") {
  // 3 ranks: averages like 13/3 are not representable; a correctly rounded division must pass.
  const size_t n = 3, c = kCount;
  const auto send = filled_send_buffers<float>(DType::float32, n, c, ReduceOp::avg, 0);
  std::vector<float> want = reduce_ref(send, 0, c, ReduceOp::avg);
  // The same average computed as a premultiplied sum (what some backends do): within 2 ulp.
  std::vector<float> premul(c, 0.0f);
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < c; ++i) premul[i] += send[r][i] * (1.0f / 3.0f);
  const cs::CheckSpec spec{Collective::allreduce, ReduceOp::avg, 0, 3, 0, c, 0};
  CHECK(cs::count_wrong(spec, to_tensor(DType::float32, want)) == 0);
  CHECK(cs::count_wrong(spec, to_tensor(DType::float32, premul)) == 0);
  std::vector<float> sum = reduce_ref(send, 0, c, ReduceOp::sum);
  CHECK(cs::count_wrong(spec, to_tensor(DType::float32, sum)) == c);
}
