// The Flight Recorder pickle subset (engine/core/pickle_subset.hpp) and the JSON depth scan that
// triage runs before decoding: any bytes end as JSON text or an InputError; never a crash, a
// hang or unbounded memory (the limits are lowered so the fuzzer reaches them).
#include <cstddef>
#include <cstdint>
#include <string>

#include "error.hpp"
#include "pickle_subset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  cs::PickleLimits lim;
  lim.max_nodes = 100000;
  lim.max_output = 8u << 20;
  lim.max_string = 1u << 20;
  try {
    (void)cs::pickle_subset_to_json(in, lim);
  } catch (const cs::InputError&) {
  }
  (void)cs::json_nesting_depth(in, 65);
  return 0;
}
