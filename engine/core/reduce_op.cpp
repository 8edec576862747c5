#include "reduce_op.hpp"

#include <string>

#include "error.hpp"

namespace cs {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::avg:
      return "avg";
  }
  return "?";
}

ReduceOp reduce_op_from_string(std::string_view n) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg})
    if (n == reduce_op_name(op)) return op;
  throw InputError("unknown reduction '" + std::string(n) + "' (expected sum, prod, min, max or avg)");
}

void check_reduce_op(ReduceOp op, DType t) {
  if (op == ReduceOp::avg && !dtype_is_float(t))
    throw InputError(
        "reduction 'avg' is defined for floating-point dtypes only (float16, bfloat16, float32, "
        "float64), not " +
        std::string(dtype_name(t)));
}

}  // namespace cs
