#pragma once
// The run's plan: every input of a run resolved once, here, before anything communicates, and
// the three steps a host takes with it: open the plan, join the world, run it through a
// RecipeHost. The C API (bindings/embed) only turns C types into these and these into C codes;
// the command line (bindings/cli) is one client of that API. docs/architecture.md walks
// --timeout and --backend down the layers through the functions named below:
//
//   the deadline:  resolve_deadline (run_inputs.hpp): --timeout, a replayed report's, [run], 300 s
//   the backend:   resolve_backend (backends.hpp): the one given, a replayed report's, mpi
//   the launcher:  check_launcher (launch_env.hpp)
//   replay policy: open_plan (plan_replay.cpp: what a replay applies of someone else's report)
//   output dir:    plan_out_dir (below)
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "error.hpp"
#include "run.hpp"
#include "run_host.hpp"
#include "session.hpp"

namespace cs {

// What a host says once for all its runs (cs_session_options), each checked when it is given.
struct PlanDefaults {
  std::string backend = "mpi";  // resolve_backend'd
  bool backend_given = false;   // not given: mpi, or what a replayed report recorded
  std::string launcher = "auto";
  std::optional<double> deadline_s;  // --timeout
  std::optional<uint64_t> seed;
  bool trusted = false, verify = true;
  // The command line's process (own_process): messages on stderr, signals handled, MPI started
  // by join_world; otherwise embedded (a failure ends the run, never the process).
  bool own_process = false;
  std::string recipe_path;  // ':'-separated directories searched for NAME.lua first
  std::string out_dir;      // parent of each run's output directory ("": commscript-runs)
};

// One run as a host asks for it (cs_run_options); absent strings are empty.
struct PlanRequest {
  std::string recipe, replay, config, baseline, out_dir, metrics_file, metrics_listen;
  bool has_config = false;
  std::vector<std::string> args, sets;
  std::optional<std::vector<std::string>> command_line;  // recorded in report.json; none: "libcommscript" RECIPE ARGS
  double fail_below = -1;
};

// Where recipes come from and what runs them (bindings/lua: files, the bundled recipes, a Lua
// state per run): the engine reaches the recipe's side only through this and RecipeHost.
class RecipeLibrary {
 public:
  virtual ~RecipeLibrary() = default;
  // A file path, or a bundled recipe by name; nullopt and *why when there is none.
  virtual std::optional<RecipeSource> find(const std::string& name, std::string* why) const = 0;
  // The bundled recipe at `path` ("recipes/x.lua"), if any.
  virtual std::optional<RecipeSource> bundled(const std::string& path) const = 0;
  // A fresh host for one run's recipe, over `s`.
  virtual std::unique_ptr<RecipeHost> host(Session* s) const = 0;
  // report.html without a recipe's state (rank 0's guardian renders with it).
  virtual const PageRenderer& pages() const = 0;
};

// A step of the plan refused: what kind of failure (the C API's return code), the command
// line's exit code, and who prints the message when the process is commscript's.
enum class PlanFailure { invalid, not_found, state, mpi, backend, internal };
enum class PlanPrint { none, launcher_root, every };
class PlanError : public Error {
 public:
  PlanError(PlanFailure k, int exit_code, const std::string& msg, PlanPrint p = PlanPrint::none)
      : Error(static_cast<ExitCode>(exit_code), msg), kind(k), print(p) {}
  PlanFailure kind;
  PlanPrint print;
};

// One run's inputs, read, resolved and checked; not yet run. The session holds the resolved
// backend (session.backend) and deadline (session.timeout_s) that join_world and run_plan use.
struct Plan {
  Session session;
  RecipeSource recipe;
  std::vector<std::string> rargs;
  RunInfo info;
  bool help = false;  // the recipe's options ask for its help (--help, -h)
  bool used = false;  // a plan runs once
};

// Reads and checks everything the run needs (no collective): the replayed report or the recipe,
// --baseline, the config and --set (its [env] applied to this process), [run], the chaos plan,
// the metrics' address, the output directory. Throws PlanError.
std::unique_ptr<Plan> open_plan(const PlanDefaults& d, const PlanRequest& r, const RecipeLibrary& lib);

// Where a session's runs run: the launcher's world it joined, or a host's communicator it lent.
struct Seat {
  std::shared_ptr<Communicator> world;  // join_world: the launcher's world
  nlohmann::json launch;                // LaunchEnv::to_json of that world
  bool world_mpi = false;               // join_world initialised MPI (leave_seat finalizes it)
  MPI_Comm lent = MPI_COMM_NULL;        // our duplicate of the host's communicator (null: its world)
  int initialized_by_host = 1;
  int thread_level = MPI_THREAD_SINGLE;
};

// An embedded session's MPI when it opens: initialised if the host has not and init_mpi says so
// (finalized at exit); a Gloo session may go without. Throws PlanError (mpi).
void prepare_host_mpi(Seat& seat, const PlanDefaults& d, bool init_mpi);

// The seat's duplicate of the host's communicator `c` (a collective over it); `who` names the
// call in messages. Throws PlanError (mpi).
void lend_comm(Seat& seat, MPI_Comm c, const char* who);

// Joins the world the launcher started, on the plan's backend with the plan's deadline (plan
// null: the defaults' backend and deadline, resolved the same way). Embedded under an MPI
// launcher: the host's MPI_COMM_WORLD is lent instead. The process's own (own_process): the
// guardian (rendering with lib.pages()) and the signal thread start first. Throws PlanError.
void join_world(Seat& seat, const PlanDefaults& d, const Plan* plan, const RecipeLibrary& lib, int* argc, char*** argv);

// Runs the plan once through a RecipeHost of `lib` on every rank of the seat's world (or over its lent
// communicator): the agreed exit code. PlanError when it cannot start, or when its input was
// refused before anything ran (then session.report is null).
int run_plan(Plan& plan, Seat& seat, const RecipeLibrary& lib);

// Frees the seat's world and duplicate; MPI finalized when join_world started it.
void leave_seat(Seat& seat);

// The output directory of a run of `name` (a recipe's file or name): `given`, else for the
// command line's process "" (the run names it from the recipe's declared name), else a new
// directory under the defaults' out_dir (commscript-runs), unique within the process.
std::string plan_out_dir(const PlanDefaults& d, const std::string& given, const std::string& name);

}  // namespace cs
