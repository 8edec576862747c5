#pragma once
// bench()'s result check, at memory speed (issue 22, item 5). The check pattern
// (engine/core/pattern.hpp) is periodic in the element index: pattern_value(r, i + kPatternPeriod)
// == pattern_value(r, i) for every rank, reduction and salt (tests/unit/test_pattern.cpp pins it).
// So is every collective's expected result within each block of the receive buffer. Hence:
//  - fill_pattern_fast: one period-aligned tile filled by fill_pattern, copied to the start of the
//    buffer, then the filled prefix doubled with copies (on a device: device-to-device copies,
//    no host staging of the whole buffer and no pageable host-to-device copy of it);
//  - count_wrong_fast: count_wrong (the exact per-element check) on a small buffer made of each
//    block's first elements, laid out so that its expectation is the real one; once those are
//    right, every later period-aligned chunk of the block must be bit-identical to the block's
//    first chunk (same expected values, and a value bit-identical to a checked one is as right),
//    compared with memcmp in a staging buffer of a few MiB. Any difference (or a wrong element
//    among the first ones) sends the whole buffer to count_wrong: the counts of wrong elements are
//    count_wrong's exactly, corrupted or not; only a clean result takes the fast path.
// Both work on host and device tensors alike; nothing here runs inside a timed region.
#include <cstddef>
#include <cstdint>

#include "pattern.hpp"
#include "tensor.hpp"

namespace cs {

// A multiple of every period of pattern_value in the index (9 for sum/min/max/avg, 4 for prod).
constexpr size_t kPatternPeriod = 36;

// fill_pattern(t, rank, op, salt), the same elements, written tile by tile (see above).
void fill_pattern_fast(Tensor& t, int rank, ReduceOp op, uint32_t salt);

// count_wrong(spec, recv) for a receive buffer anywhere (host or device): the same count.
// `compared` (optional) is set to whether the result was decided by the tile comparison (false:
// by count_wrong over the whole buffer: small buffers, and any result not bit-identical to its
// checked head).
uint64_t count_wrong_fast(const CheckSpec& spec, const Tensor& recv, bool* compared = nullptr);

}  // namespace cs
