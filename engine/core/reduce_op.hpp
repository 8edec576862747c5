#pragma once
#include <cstdint>
#include <string_view>

#include "dtype.hpp"

namespace cs {

enum class ReduceOp : uint8_t { sum, prod, min, max, avg };

std::string_view reduce_op_name(ReduceOp op);
// Throws InputError naming the accepted values.
ReduceOp reduce_op_from_string(std::string_view name);
// avg is defined for floating-point dtypes only (an integer average would truncate).
void check_reduce_op(ReduceOp op, DType t);

}  // namespace cs
