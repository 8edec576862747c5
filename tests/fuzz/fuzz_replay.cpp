// The replay loader: any bytes as report.json end in a checked report or an InputError (never a
// crash, never an uncaught JSON exception); a report that loads also gives its settings and
// passes as a --baseline or fails as one cleanly. Seeds include reports nested 100,000 deep
// (refused by the depth limit), and special files are tried once per process.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "error.hpp"
#include "run_inputs.hpp"

namespace {

// Special files as --replay/--baseline, once per process: refused by type (an InputError), never
// read (/dev/zero without bound) and never waited on (a FIFO nobody writes).
bool special_files_refused() {
  const std::string fifo = "/tmp/commscript-fuzz-fifo-" + std::to_string(getpid());
  ::mkfifo(fifo.c_str(), 0600);
  for (const std::string& p : {std::string("/dev/zero"), fifo, std::string("/tmp")}) {
    for (int which = 0; which < 2; ++which) {
      try {
        if (which == 0)
          (void)cs::load_replay(p);
        else
          (void)cs::load_baseline(p);
        __builtin_trap();  // a special file was read as a report
      } catch (const cs::InputError&) {
      }
    }
  }
  ::unlink(fifo.c_str());
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool special = special_files_refused();
  (void)special;
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
