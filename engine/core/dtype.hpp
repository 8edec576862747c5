#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cs {

enum class DType : uint8_t { int8, uint8, int32, uint32, int64, uint64, float32, float64 };

inline constexpr DType kAllDTypes[] = {DType::int8,  DType::uint8,  DType::int32,   DType::uint32,
                                       DType::int64, DType::uint64, DType::float32, DType::float64};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
bool dtype_is_float(DType t);
// Accepts the canonical names and the nccl-tests aliases (float, double, int, ...).
std::optional<DType> parse_dtype(std::string_view name);
// Throws InputError naming the accepted values.
DType dtype_from_string(std::string_view name);

// Calls f.template operator()<T>() with the C++ type of t.
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
  }
  return f.template operator()<uint8_t>();
}

}  // namespace cs
