// Size strings ("64K", "1M", "2G"): parse, and format what parsed; never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "error.hpp"
#include "size.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  try {
    if (auto n = cs::parse_size(in)) (void)cs::format_size(*n);
  } catch (const cs::Error&) {
  }
  return 0;
}
