#pragma once
// Message sizes as users write them: 8, 64K, 1M, 2G (binary multiples, like nccl-tests -b/-e).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cs {

// nullopt when the text is not a size (empty, junk after the suffix, negative, overflow).
std::optional<uint64_t> parse_size(std::string_view text);
// 8 -> "8", 65536 -> "64K", 3145728 -> "3M"; exact multiples only, otherwise plain bytes.
std::string format_size(uint64_t bytes);

}  // namespace cs
