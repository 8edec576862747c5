#pragma once
// Fill patterns that make every collective's result exactly predictable, and the check that
// counts wrong elements (nccl-tests' #wrong). Values are small integers, so sums, products,
// minima and maxima are exact in every dtype (integer overflow wraps the same way on both sides),
// float16 and bfloat16 as long as a sum stays within the integers they hold exactly (2048 and
// 256: 227 and 28 ranks); beyond that, and for avg, the check allows (n+1)/2 ulps (see pattern.cpp).
#include <cstddef>
#include <cstdint>

#include "collective.hpp"
#include "reduce_op.hpp"
#include "tensor.hpp"

namespace cs {

// The value element `index` of `rank`'s send buffer holds for reduction `op` and `salt`.
int64_t pattern_value(int rank, size_t index, ReduceOp op, uint32_t salt);

// Fills t with rank's pattern (index 0 is t's first element).
void fill_pattern(Tensor& t, int rank, ReduceOp op, uint32_t salt);

struct CheckSpec {
  Collective coll;
  ReduceOp op = ReduceOp::sum;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  size_t count = 0;  // the per-call count
  uint32_t salt = 0;
};

// Number of elements of `recv` (the receive buffer of spec.rank after the collective, every rank
// having filled its send buffer with fill_pattern) that differ from the exact expected result.
// Ranks that receive nothing (non-roots of reduce and gather) return 0.
uint64_t count_wrong(const CheckSpec& spec, const Tensor& recv);

}  // namespace cs
