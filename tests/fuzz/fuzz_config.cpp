// The TOML config, then --set assignments and the type check: any input ends in a Config or an
// InputError, never a crash. Input: TOML text, then lines "key=value" after a NUL byte.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config.hpp"
#include "error.hpp"
#include "run_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  try {
    cs::Config c = cs::Config::parse(in.substr(0, nul), "fuzz.toml");
    if (nul != std::string::npos) {
      size_t pos = nul + 1;
      while (pos <= in.size()) {
        const size_t nl = in.find('\n', pos);
        c.set(in.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
        if (nl == std::string::npos) break;
        pos = nl + 1;
      }
    }
    c.check();
    (void)c.env();
    (void)cs::run_settings(c, std::nullopt, std::nullopt, "");
    (void)cs::chaos_plan(c, "mpi", "");
  } catch (const cs::Error&) {
  }
  return 0;
}
