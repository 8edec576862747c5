#pragma once
// Engine errors carry the exit code of the contract (docs/reference.md, "Exit codes").
#include <stdexcept>
#include <string>
#include <vector>

namespace cs {

enum class ExitCode : int {
  ok = 0,
  bad_input = 1,   // usage, config, recipe load, version range, option values
  runtime = 2,     // a recipe error on any rank
  health = 3,      // an error-severity finding or score below --fail-below
  corruption = 4,  // wrong elements in a checked result
  // The ranks stopped moving together: a hang (an operation past its deadline, a rank missing or
  // stuck) or a desync (ranks calling different operations or sizes, so that they would hang).
  hang_or_desync = 5,  // a hang (a deadline passed: missing or stuck ranks) or a desync
  output = 6,          // the outputs could not be written (disk full, directory gone, unwritable)
  internal = 70,       // a failure inside commscript
};

// Every code with its name, for the Lua side (cs.exit is built from this list, so the two cannot
// drift apart: cs.exit once lacked `output`). `timeout` is the Lua name recipes used before
// `hang_or_desync` (recipe API: kept, the same code). The C header and the Python module get the
// codes from the enum above at build time (cmake/exit_codes.cmake).
inline constexpr struct {
  const char* name;
  ExitCode code;
} kExitCodes[] = {{"ok", ExitCode::ok},
                  {"bad_input", ExitCode::bad_input},
                  {"runtime", ExitCode::runtime},
                  {"health", ExitCode::health},
                  {"corruption", ExitCode::corruption},
                  {"hang_or_desync", ExitCode::hang_or_desync},
                  {"timeout", ExitCode::hang_or_desync},
                  {"output", ExitCode::output},
                  {"internal", ExitCode::internal}};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Bad input from the user: exit 1.
struct InputError : Error {
  explicit InputError(const std::string& what) : Error(ExitCode::bad_input, what) {}
};

// An engine API called with arguments that cannot work (buffer too small, index out of range,
// root not a rank): a bug in the recipe, so a runtime error (exit 2), not bad input.
struct UsageError : Error {
  explicit UsageError(const std::string& what) : Error(ExitCode::runtime, what) {}
};

// An operation failed because peers are gone (their process died or their connection closed):
// what a recipe that survives drops catches (exit 2 when it does not). `gone` holds the
// communicator's ranks known to be gone (empty when the backend could not tell yet).
struct RanksLostError : Error {
  RanksLostError(const std::string& what, std::vector<int> lost)
      : Error(ExitCode::runtime, what), gone(std::move(lost)) {}
  std::vector<int> gone;
};

}  // namespace cs
