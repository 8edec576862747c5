#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace cs {

// float16 is IEEE binary16 (NCCL's ncclFloat16, CUDA's __half); bfloat16 is the upper half of a
// float32 (ncclBfloat16, __nv_bfloat16). Enumerators are appended, never reordered: the number
// is written to progress files.
enum class DType : uint8_t { int8, uint8, int32, uint32, int64, uint64, float32, float64, float16, bfloat16 };

// In the order they are listed to users (cs.dtypes, option choices, error messages).
inline constexpr DType kAllDTypes[] = {DType::int8,   DType::uint8,   DType::int32,    DType::uint32,  DType::int64,
                                       DType::uint64, DType::float16, DType::bfloat16, DType::float32, DType::float64};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
bool dtype_is_float(DType t);  // every floating-point dtype, the 16-bit ones included
bool dtype_is_16bit_float(DType t);
// Accepts the canonical names and the nccl-tests aliases (float, double, int, half, bf16, ...).
std::optional<DType> parse_dtype(std::string_view name);
// Throws InputError naming the accepted values.
DType dtype_from_string(std::string_view name);

// ---- 16-bit floating point on the host ----
// Conversions between float/double and the bit patterns: round to nearest, ties to even;
// overflow to infinity; subnormals kept; NaN stays a (quiet) NaN with its sign.
uint16_t float_to_half(float f);
uint16_t double_to_half(double d);  // rounded once (no double rounding through float)
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
uint16_t double_to_bfloat16(double d);
float bfloat16_to_float(uint16_t b);

// An element of a 16-bit floating-point buffer: the stored bit pattern. Arithmetic converts both
// operands to float, computes there and rounds the result back to nearest even, which is what
// NCCL's half and bfloat16 reductions do per step. Comparison is by value (-0 == +0, NaN != NaN).
template <uint16_t (*FromFloat)(float), uint16_t (*FromDouble)(double), float (*ToFloat)(uint16_t)>
struct Float16Bits {
  uint16_t bits = 0;

  Float16Bits() = default;
  explicit Float16Bits(float f) : bits(FromFloat(f)) {}
  // Integers pass through double: exact for |v| < 2^53, then rounded once.
  template <class A>
  requires(std::is_arithmetic_v<A> && !std::is_same_v<A, float>) explicit Float16Bits(A v)
      : bits(FromDouble(static_cast<double>(v))) {}
  static Float16Bits from_bits(uint16_t b) {
    Float16Bits h;
    h.bits = b;
    return h;
  }

  explicit operator float() const { return ToFloat(bits); }
  explicit operator double() const { return ToFloat(bits); }
  float value() const { return ToFloat(bits); }

  friend Float16Bits operator+(Float16Bits a, Float16Bits b) { return Float16Bits(a.value() + b.value()); }
  friend Float16Bits operator-(Float16Bits a, Float16Bits b) { return Float16Bits(a.value() - b.value()); }
  friend Float16Bits operator*(Float16Bits a, Float16Bits b) { return Float16Bits(a.value() * b.value()); }
  friend Float16Bits operator/(Float16Bits a, Float16Bits b) { return Float16Bits(a.value() / b.value()); }
  Float16Bits& operator+=(Float16Bits b) { return *this = *this + b; }
  Float16Bits& operator*=(Float16Bits b) { return *this = *this * b; }
  Float16Bits& operator/=(Float16Bits b) { return *this = *this / b; }
  friend bool operator<(Float16Bits a, Float16Bits b) { return a.value() < b.value(); }
  friend bool operator>(Float16Bits a, Float16Bits b) { return a.value() > b.value(); }
  friend bool operator==(Float16Bits a, Float16Bits b) { return a.value() == b.value(); }
};

using Half = Float16Bits<float_to_half, double_to_half, half_to_float>;
using BFloat16 = Float16Bits<float_to_bfloat16, double_to_bfloat16, bfloat16_to_float>;
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2 && std::is_trivially_copyable_v<Half>);

template <class T>
inline constexpr bool is_float16_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Calls f.template operator()<T>() with the C++ type of t (Half and BFloat16 for the 16-bit
// floating-point dtypes).
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::int8:
      return f.template operator()<int8_t>();
    case DType::uint8:
      return f.template operator()<uint8_t>();
    case DType::int32:
      return f.template operator()<int32_t>();
    case DType::uint32:
      return f.template operator()<uint32_t>();
    case DType::int64:
      return f.template operator()<int64_t>();
    case DType::uint64:
      return f.template operator()<uint64_t>();
    case DType::float32:
      return f.template operator()<float>();
    case DType::float64:
      return f.template operator()<double>();
    case DType::float16:
      return f.template operator()<Half>();
    case DType::bfloat16:
      return f.template operator()<BFloat16>();
  }
  return f.template operator()<uint8_t>();
}

}  // namespace cs
