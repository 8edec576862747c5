#include "dtype.hpp"

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
  }
  return "?";
}

bool dtype_is_float(DType t) { return t == DType::float32 || t == DType::float64; }

std::optional<DType> parse_dtype(std::string_view n) {
  for (DType t : kAllDTypes)
    if (n == dtype_name(t)) return t;
  if (n == "float" || n == "f32") return DType::float32;
  if (n == "double" || n == "f64") return DType::float64;
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

}  // namespace cs
