#pragma once
// Lists of small non-negative integers written as ranges, "0-3,8,10-11": the kernel's CPU lists
// (sysfs cpulist, affinity) and rank lists in messages. One home for reading and writing them.
#include <string>
#include <string_view>
#include <vector>

namespace cs {

// Sorted, without duplicates, consecutive runs as "a-b": {5, 0, 1, 2, 7, 8} -> "0-2,5,7-8".
std::string format_int_ranges(std::vector<int> values);

// The values of "0-3,8" (spaces and a trailing newline allowed), sorted, without duplicates;
// each value below 2^20. strict: any malformed part makes the whole list empty (a sysfs file we
// rely on); lenient: malformed parts are skipped (a best-effort display).
std::vector<int> parse_int_ranges(std::string_view text, bool strict);

}  // namespace cs
