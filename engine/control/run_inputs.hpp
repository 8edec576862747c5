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
#include "deadline.hpp"
#include "env_policy.hpp"

namespace cs {

// Checks a deadline in seconds: finite, 0 or within [kMinTimeoutS, kMaxTimeoutS]; InputError
// "WHAT must ...WHERE" otherwise. Returns it.
double check_timeout(double t, const std::string& what, const std::string& where);

struct RunSettings {
  double timeout_s = kDefaultTimeoutS;
  uint64_t seed = 0;
};

// The run's deadline, resolved once (docs/architecture.md): `given` (--timeout, checked), else a
// `replayed` report's, else the config's [run] timeout, else kDefaultTimeoutS (deadline.hpp).
double resolve_deadline(const Config& config, std::optional<double> given, std::optional<double> replayed,
                        const std::string& where);

// [run] (timeout, seed) checked, with the command line's values taking precedence (then a
// replayed report's deadline). `where` is appended to messages (" (in FILE)").
RunSettings run_settings(const Config& config, std::optional<double> timeout, std::optional<uint64_t> seed,
                         const std::string& where, std::optional<double> replayed_timeout = std::nullopt);

// The [[chaos]] plan of the config. Refuses kinds the backend cannot inject.
std::vector<ChaosRule> chaos_plan(const Config& config, const std::string& backend, const std::string& where);

// Every file the run reads as input (--replay, --baseline, --config) is a regular file of at
// most this many bytes, and JSON in it nests at most kMaxJsonDepth deep: a FIFO, a device
// (/dev/zero), a directory or a larger file is refused (InputError, exit 1) before it is read,
// and nesting beyond the depth before it is parsed (a report 100,000 arrays deep overflowed the
// stack of whatever walked it).
inline constexpr size_t kMaxReportBytes = size_t{1} << 30;  // 1 GiB: a report of thousands of ranks
inline constexpr size_t kMaxConfigBytes = size_t{16} << 20;
inline constexpr size_t kMaxJsonDepth = 128;
// The text of `path`, read as described above; messages start with `what`.
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes);
// InputError "WHAT: JSON nested deeper than kMaxJsonDepth ..." when `text` nests deeper
// (brackets outside strings; the text need not be valid JSON).
void check_json_depth(const std::string& text, const std::string& what);

// An earlier report.json to run again: a commscript report (schema /1 or /2) with the recipe's source, every
// field a replay reads of the right type (InputError naming the field otherwise).
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

// True for an [env] variable a replay must not apply from someone else's report without
// --trusted. The replay environment is an allow-list (replay_env_allow_list()): the families
// that tune NCCL, PyTorch's NCCL wrapper and UCX, and a few exact names (CUDA_VISIBLE_DEVICES,
// GLOO_SOCKET_IFNAME ...), less, inside them, what loads code, starts programs or names files
// (NCCL_NET_PLUGIN, *_PATH, NCCL_DEBUG_FILE ...). Everything else is dropped: the MPI library's
// (OMPI_MCA_*, PMIX_*, MPICH_*, I_MPI_*: OMPI_MCA_mpi_abort_delay=-1 made a failing replay loop
// forever), the loader's (LD_*), commscript's own, and any name not known.
bool env_var_unsafe_to_replay(const std::string& name);
// The allow-list in words, for messages ("NCCL_*, TORCH_NCCL_*, ...").
std::string replay_env_allow_list();

// --baseline: the text of an earlier commscript report (/1 or /2) (parsed again by the recipe side).
std::string load_baseline(const std::string& path);

// This process's variables with one of env_snapshot_prefixes() (env_policy.hpp, the one policy
// the Lua stdlib also reads through native.env_policy), credentials left out.
nlohmann::json env_snapshot();

}  // namespace cs
