// The replay loader: any bytes as report.json end in a checked report or an InputError (never a
// crash, never an uncaught JSON exception); a report that loads also gives its settings and
// passes as a --baseline or fails as one cleanly.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "error.hpp"
#include "run_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/commscript-fuzz-replay-" + std::to_string(getpid()) + ".json";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    const nlohmann::json rep = cs::load_replay(path);
    cs::Replayed r = cs::replay_settings(rep, path);
    (void)r.config.drop_env(cs::env_var_unsafe_to_replay);
  } catch (const cs::Error&) {
  }
  try {
    (void)cs::load_baseline(path);
  } catch (const cs::Error&) {
  }
  return 0;
}
