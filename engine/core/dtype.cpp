#include "dtype.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "error.hpp"

namespace cs {

size_t dtype_size(DType t) {
  return visit_dtype(t, []<class T>() { return sizeof(T); });
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::int8:
      return "int8";
    case DType::uint8:
      return "uint8";
    case DType::int32:
      return "int32";
    case DType::uint32:
      return "uint32";
    case DType::int64:
      return "int64";
    case DType::uint64:
      return "uint64";
    case DType::float32:
      return "float32";
    case DType::float64:
      return "float64";
    case DType::float16:
      return "float16";
    case DType::bfloat16:
      return "bfloat16";
  }
  return "?";
}

bool dtype_is_float(DType t) { return t == DType::float32 || t == DType::float64 || dtype_is_16bit_float(t); }

bool dtype_is_16bit_float(DType t) { return t == DType::float16 || t == DType::bfloat16; }

std::optional<DType> parse_dtype(std::string_view n) {
  for (DType t : kAllDTypes)
    if (n == dtype_name(t)) return t;
  if (n == "float" || n == "f32") return DType::float32;
  if (n == "double" || n == "f64") return DType::float64;
  if (n == "half" || n == "f16" || n == "fp16") return DType::float16;
  if (n == "bf16") return DType::bfloat16;
  if (n == "int" || n == "i32") return DType::int32;
  if (n == "char") return DType::int8;
  return std::nullopt;
}

DType dtype_from_string(std::string_view n) {
  if (auto t = parse_dtype(n)) return *t;
  std::string all;
  for (DType t : kAllDTypes) all += (all.empty() ? "" : ", ") + std::string(dtype_name(t));
  throw InputError("unknown dtype '" + std::string(n) + "' (expected one of " + all + ")");
}

// ---- 16-bit floating point ----

namespace {

// d rounded to float with "round to odd" (truncate, then set the last bit when inexact). Rounding
// that to nearest even in 16 bits gives the correctly rounded result: float keeps at least two
// more bits than either 16-bit format, so no tie can be created by the first rounding.
float round_to_odd_float(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  x |= 1u;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

}  // namespace

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff)  // infinity, or NaN (kept a quiet NaN)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: infinity
  if (e <= 0) {
    // Subnormal half (or zero): shift the mantissa with its implicit 1 into place, round to even.
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const unsigned shift = static_cast<unsigned>(14 - e);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))  // NaN: keep it a quiet NaN
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t double_to_half(double d) { return float_to_half(round_to_odd_float(d)); }

uint16_t double_to_bfloat16(double d) { return float_to_bfloat16(round_to_odd_float(d)); }

}  // namespace cs
