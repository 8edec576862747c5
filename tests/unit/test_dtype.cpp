// The dtypes: names, sizes, parsing, and the 16-bit floating-point formats (float16, bfloat16)
// the host uses to fill and check NCCL's half-precision buffers: conversions against known bit
// patterns, element arithmetic as NCCL does it, tensors of them, and the #wrong check.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "collective.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "pattern.hpp"
#include "tensor.hpp"

using cs::BFloat16;
using cs::DType;
using cs::Half;
using cs::ReduceOp;

namespace {

uint16_t raw16(const cs::Tensor& t, size_t i) {
  uint16_t b;
  std::memcpy(&b, static_cast<const char*>(t.data()) + 2 * i, 2);
  return b;
}

}  // namespace

TEST_CASE("dtype: float16 and bfloat16 are 2-byte floating-point dtypes with names and aliases", "[dtype]") {
  CHECK(cs::dtype_size(DType::float16) == 2);
  CHECK(cs::dtype_size(DType::bfloat16) == 2);
  CHECK(cs::dtype_name(DType::float16) == "float16");
  CHECK(cs::dtype_name(DType::bfloat16) == "bfloat16");
  CHECK(cs::dtype_is_float(DType::float16));
  CHECK(cs::dtype_is_float(DType::bfloat16));
  CHECK(cs::dtype_is_16bit_float(DType::bfloat16));
  CHECK_FALSE(cs::dtype_is_16bit_float(DType::float32));
  CHECK_FALSE(cs::dtype_is_float(DType::int64));
  CHECK(cs::parse_dtype("float16") == DType::float16);
  CHECK(cs::parse_dtype("half") == DType::float16);  // nccl-tests' -d half
  CHECK(cs::parse_dtype("bfloat16") == DType::bfloat16);
  CHECK(cs::parse_dtype("bf16") == DType::bfloat16);
  CHECK_FALSE(cs::parse_dtype("float8").has_value());
  // Every listed dtype parses back to itself, and its size is its C++ type's.
  for (DType t : cs::kAllDTypes) {
    CHECK(cs::parse_dtype(cs::dtype_name(t)) == t);
    CHECK(cs::dtype_size(t) == cs::visit_dtype(t, []<class T>() { return sizeof(T); }));
  }
  try {
    cs::dtype_from_string("float8");
    FAIL("no error");
  } catch (const cs::InputError& e) {
    CHECK(std::string(e.what()) ==
          "unknown dtype 'float8' (expected one of int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, "
          "float32, float64)");
  }
  // avg is a floating-point reduction: allowed for the 16-bit ones.
  CHECK_NOTHROW(cs::check_reduce_op(ReduceOp::avg, DType::bfloat16));
  CHECK_THROWS_AS(cs::check_reduce_op(ReduceOp::avg, DType::int32), cs::InputError);
}

TEST_CASE("dtype: conversions from double round once (no double rounding through float)", "[dtype][half]") {
  // Just above a float16 tie: through float the 2^-40 is lost, the tie goes to even (down).
  const double above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(cs::float_to_half(static_cast<float>(above_tie)) == 0x3c00);
  CHECK(cs::double_to_half(above_tie) == 0x3c01);
  const double below_tie = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  CHECK(cs::double_to_half(below_tie) == 0x3c00);
  CHECK(cs::double_to_half(1.0 + std::ldexp(1.0, -11)) == 0x3c00);  // the tie itself: to even
  CHECK(cs::double_to_half(1.0 + std::ldexp(3.0, -11)) == 0x3c02);
  const double bf_above = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(cs::float_to_bfloat16(static_cast<float>(bf_above)) == 0x3f80);
  CHECK(cs::double_to_bfloat16(bf_above) == 0x3f81);
  CHECK(cs::double_to_bfloat16(1.0 + std::ldexp(1.0, -8)) == 0x3f80);
  // Range ends, subnormals, NaN.
  CHECK(cs::double_to_half(65504.0) == 0x7bff);
  CHECK(cs::double_to_half(65519.99) == 0x7bff);
  CHECK(cs::double_to_half(65520.0) == 0x7c00);
  CHECK(cs::double_to_half(1e300) == 0x7c00);
  CHECK(cs::double_to_half(-1e300) == 0xfc00);
  CHECK(cs::double_to_bfloat16(1e300) == 0x7f80);
  CHECK(cs::double_to_bfloat16(-std::numeric_limits<double>::infinity()) == 0xff80);
  CHECK(cs::double_to_half(std::ldexp(1.0, -24)) == 0x0001);
  CHECK(cs::double_to_half(std::ldexp(1.0, -25)) == 0x0000);                         // a tie: to 0
  CHECK(cs::double_to_half(std::ldexp(1.0, -25) + std::ldexp(1.0, -60)) == 0x0001);  // not a tie
  CHECK(cs::double_to_bfloat16(std::ldexp(1.0, -133)) == 0x0001);                    // bfloat16's smallest subnormal
  CHECK(cs::double_to_half(-0.0) == 0x8000);
  CHECK(std::isnan(cs::half_to_float(cs::double_to_half(std::nan("")))));
  CHECK(std::isnan(cs::bfloat16_to_float(cs::double_to_bfloat16(std::nan("")))));
  CHECK(cs::bfloat16_to_float(0x0001) == std::ldexp(1.0f, -133));
  CHECK(cs::bfloat16_to_float(0x7f7f) == std::ldexp(255.0f, 120));  // bfloat16's largest
}

TEST_CASE("dtype: Half/BFloat16 elements round every arithmetic step as NCCL does", "[dtype][half]") {
  CHECK(Half(1.0f).bits == 0x3c00);
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(Half(3).bits == 0x4200);
  CHECK(static_cast<float>(Half::from_bits(0x7bff)) == 65504.0f);
  CHECK((Half(2048) + Half(1)).bits == Half(2048).bits);  // 2049 is a tie: to the even 2048
  CHECK((Half(2048) + Half(3)).bits == Half(2052).bits);  // 2051: to the even 2052
  CHECK((BFloat16(256) + BFloat16(1)).bits == BFloat16(256).bits);
  CHECK(static_cast<float>(BFloat16(255) + BFloat16(1)) == 256.0f);
  CHECK(static_cast<float>(Half(13) / Half(3)) == cs::half_to_float(cs::float_to_half(13.0f / 3.0f)));
  CHECK(Half(60000) * Half(2) == Half(std::numeric_limits<float>::infinity()));
  CHECK(Half(-0.0f) == Half(0.0f));  // by value
  CHECK_FALSE(Half(std::nanf("")) == Half(std::nanf("")));
  CHECK(std::min(BFloat16(3), BFloat16(-2)) == BFloat16(-2));
}

TEST_CASE("dtype: float16/bfloat16 tensors get, set and fill through the bit patterns", "[dtype][tensor]") {
  cs::Tensor h = cs::Tensor::host(DType::float16, 4);
  CHECK(h.bytes() == 8);
  h.set(0, 1.0);
  h.set(1, 0.1);  // not representable: rounded to nearest
  h.set(2, 65504.0);
  h.set(3, -2.5);
  CHECK(raw16(h, 0) == 0x3c00);
  CHECK(raw16(h, 1) == 0x2e66);
  CHECK(raw16(h, 2) == 0x7bff);
  CHECK(raw16(h, 3) == 0xc100);
  CHECK(h.get(0) == 1.0);
  CHECK(h.get(1) == 0.0999755859375);
  CHECK(h.get(2) == 65504.0);
  CHECK(h.get(3) == -2.5);
  cs::Tensor b = cs::Tensor::host(DType::bfloat16, 3);
  b.set(0, 1.0);
  b.set(1, 0.1);
  b.set(2, 3.0e38);
  CHECK(raw16(b, 0) == 0x3f80);
  CHECK(raw16(b, 1) == 0x3dcd);
  CHECK(b.get(1) == 0.10009765625);
  CHECK(b.get(2) == static_cast<double>(cs::bfloat16_to_float(cs::double_to_bfloat16(3.0e38))));
  b.fill(-1.0);
  for (size_t i = 0; i < 3; ++i) CHECK(raw16(b, i) == 0xbf80);
  cs::fill_pattern(h, 1, ReduceOp::sum, 0);
  for (size_t i = 0; i < 4; ++i) CHECK(h.get(i) == static_cast<double>(cs::pattern_value(1, i, ReduceOp::sum, 0)));
}

namespace {

// The allreduce result of `n` ranks' patterns, reduced in T with rounding at every step (rank
// order), as a tensor.
template <class T>
cs::Tensor device_like_allreduce(DType dt, int n, size_t count, ReduceOp op) {
  cs::Tensor out = cs::Tensor::host(dt, count);
  T* o = static_cast<T*>(out.data());
  for (size_t i = 0; i < count; ++i) {
    T acc(cs::pattern_value(0, i, op, 0));
    for (int r = 1; r < n; ++r) {
      const T v(cs::pattern_value(r, i, op, 0));
      if (op == ReduceOp::prod)
        acc = acc * v;
      else if (op == ReduceOp::min)
        acc = std::min(acc, v);
      else if (op == ReduceOp::max)
        acc = std::max(acc, v);
      else
        acc = acc + v;
    }
    if (op == ReduceOp::avg) acc = acc / T(n);
    o[i] = acc;
  }
  return out;
}

// avg as NCCL computes it for half types: a sum of x * (1/n), every product and sum rounded.
template <class T>
cs::Tensor premul_avg(DType dt, int n, size_t count) {
  cs::Tensor out = cs::Tensor::host(dt, count);
  T* o = static_cast<T*>(out.data());
  const T inv(1.0f / static_cast<float>(n));
  for (size_t i = 0; i < count; ++i) {
    T acc = T(cs::pattern_value(0, i, ReduceOp::avg, 0)) * inv;
    for (int r = 1; r < n; ++r) acc = acc + T(cs::pattern_value(r, i, ReduceOp::avg, 0)) * inv;
    o[i] = acc;
  }
  return out;
}

template <class T>
void check_16bit_wrong(DType dt) {
  const size_t c = 64;
  for (int n : {1, 2, 3, 4, 8}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
      INFO("dtype=" << cs::dtype_name(dt) << " n=" << n << " op=" << cs::reduce_op_name(op));
      const cs::CheckSpec spec{cs::Collective::allreduce, op, 0, n, 0, c, 0};
      cs::Tensor got = device_like_allreduce<T>(dt, n, c, op);
      CHECK(cs::count_wrong(spec, got) == 0);
      if (op == ReduceOp::avg) CHECK(cs::count_wrong(spec, premul_avg<T>(dt, n, c)) == 0);
      // One element one ulp off (its bit pattern + 1): exact reductions see it; avg allows
      // (n + 1) / 2 ulps.
      T* p = static_cast<T*>(got.data());
      const uint16_t keep = p[5].bits;
      p[5].bits = static_cast<uint16_t>(keep + 1);
      CHECK(cs::count_wrong(spec, got) == (op == ReduceOp::avg ? 0u : 1u));
      // One element off by more than the tolerance: exactly one wrong, whatever the op.
      p[5] = T(static_cast<float>(T::from_bits(keep)) * 1.5f + 1.0f);
      CHECK(cs::count_wrong(spec, got) == 1);
      p[5].bits = keep;
      p[9] = T(-static_cast<float>(p[9]));  // a sign flipped
      CHECK(cs::count_wrong(spec, got) == 1);
    }
  }
}

}  // namespace

TEST_CASE("count_wrong: float16/bfloat16 results, exact, and within (n+1)/2 ulps for avg; one corruption is 1 wrong",
          "[dtype][pattern]") {
  check_16bit_wrong<Half>(DType::float16);
  check_16bit_wrong<BFloat16>(DType::bfloat16);
}

TEST_CASE("count_wrong: float16/bfloat16 sums past the exact integers are checked within (n+1)/2 ulps",
          "[dtype][pattern]") {
  // bfloat16 holds integers exactly up to 256; 64 ranks of values 1..9 sum to ~320: rounding then
  // depends on the order (ring vs rank order), which the check must tolerate...
  const int n = 64;
  const size_t c = 32;
  const cs::CheckSpec spec{cs::Collective::allreduce, ReduceOp::sum, 0, n, 0, c, 0};
  cs::Tensor fwd = device_like_allreduce<BFloat16>(DType::bfloat16, n, c, ReduceOp::sum);
  // The same sum in reverse rank order.
  cs::Tensor rev = cs::Tensor::host(DType::bfloat16, c);
  bool orders_differ = false;
  for (size_t i = 0; i < c; ++i) {
    BFloat16 acc(cs::pattern_value(n - 1, i, ReduceOp::sum, 0));
    for (int r = n - 2; r >= 0; --r) acc = acc + BFloat16(cs::pattern_value(r, i, ReduceOp::sum, 0));
    static_cast<BFloat16*>(rev.data())[i] = acc;
    orders_differ = orders_differ || !(acc == static_cast<const BFloat16*>(fwd.data())[i]);
  }
  CHECK(orders_differ);  // otherwise this test shows nothing
  CHECK(cs::count_wrong(spec, fwd) == 0);
  CHECK(cs::count_wrong(spec, rev) == 0);
  // ...but not a wrong value: every element 30% too small (the tolerance at 64 ranks is 65/2 ulps:
  // 25%; the largest order-dependent difference seen here is printed below).
  float worst = 0;
  for (size_t i = 0; i < c; ++i) {
    const float a = static_cast<float>(static_cast<const BFloat16*>(fwd.data())[i]);
    const float b = static_cast<float>(static_cast<const BFloat16*>(rev.data())[i]);
    worst = std::max(worst, std::fabs(a - b) / a);
  }
  INFO("largest relative difference between the two orders: " << worst);
  CHECK(worst < 0.25f);
  BFloat16* p = static_cast<BFloat16*>(rev.data());
  for (size_t i = 0; i < c; ++i) p[i] = BFloat16(static_cast<float>(p[i]) * 0.7f);
  CHECK(cs::count_wrong(spec, rev) == c);
}
