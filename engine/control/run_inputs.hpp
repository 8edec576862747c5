#pragma once
// The Lua-free inputs of a run, each checked where it is read, before anything communicates:
// the [run] section, the chaos plan, an earlier report to replay or compare against, and the
// environment snapshot that goes into report.json. Every failure is an InputError (exit 1)
// whose message names the file and the field.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chaos.hpp"
#include "config.hpp"

namespace cs {

// The default deadline of each operation, in seconds, when neither --timeout nor [run] says.
inline constexpr double kDefaultTimeoutS = 300;

struct RunSettings {
  double timeout_s = kDefaultTimeoutS;
  uint64_t seed = 0;
};

// [run] (timeout, seed) with the command line's values taking precedence. `where` is appended
// to messages (" (in FILE)").
RunSettings run_settings(const Config& config, std::optional<double> timeout, std::optional<uint64_t> seed,
                         const std::string& where);

// The [[chaos]] plan of the config. Refuses kinds the backend cannot inject.
std::vector<ChaosRule> chaos_plan(const Config& config, const std::string& backend, const std::string& where);

// An earlier report.json to run again: must be a commscript.report/1 with the recipe's source.
nlohmann::json load_replay(const std::string& path);

// What a replay takes from the report besides the recipe: the config, and the seed, timeout and
// backend unless the command line gave them.
struct Replayed {
  Config config;
  std::optional<uint64_t> seed;
  std::optional<double> timeout_s;
  std::optional<std::string> backend;
  bool was_trusted = false;
};
Replayed replay_settings(const nlohmann::json& report, const std::string& path);

// --baseline: the text of an earlier commscript.report/1 (parsed again by the recipe side).
std::string load_baseline(const std::string& path);

// NCCL_*, UCX_*, OMPI_*, TORCH_NCCL_*, CUDA_*, COMMSCRIPT_*, MPICH_*, PMIX_MCA_* variables of
// this process, without credentials (names containing SECRET, TOKEN, PASSWORD, or the launcher's
// precondition_transports key).
nlohmann::json env_snapshot();

}  // namespace cs
