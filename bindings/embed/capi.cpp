// libcommscript's C API (include/commscript/commscript.h): a host program's session, the
// communicator it lends (or the launcher's world it joins), and runs of recipes through the same
// run_recipe() the command line uses. The commscript command is itself a client of this API
// (bindings/cli, with own_process set); an embedded session (own_process 0) sets
// Session::embedded so that a failure ends the run and never the process.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends.hpp"
#include "commscript/commscript.h"
#include "commscript_version.hpp"
#include "digest.hpp"
#include "error.hpp"
#include "file_read.hpp"
#include "guardian.hpp"
#include "host_name.hpp"
#include "incidents.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "launch_env.hpp"
#include "recipe_run.hpp"
#include "run_inputs.hpp"
#include "session.hpp"

struct cs_session {
  cs_session_options opts{};
  std::string recipe_path, out_dir, backend = "mpi", launcher = "auto";
  bool backend_given = false;
  MPI_Comm comm = MPI_COMM_NULL;  // our duplicate of the host's communicator (null: the world)
  // cs_session_attach_world: the launcher's world on the session's backend.
  std::shared_ptr<cs::Communicator> world;
  nlohmann::json launch_json;  // LaunchEnv::to_json of that world
  bool world_mpi = false;      // own_process: attach_world initialised MPI (close finalizes it)
  int initialized_by_host = 1;
  int thread_level = MPI_THREAD_SINGLE;
  std::string error;
  int exit_code = 0;  // the command line's exit code for the last failure
};

struct cs_result {
  int exit_code = -1;
  std::string report, out_dir, error;
  // own_process rank 0: the report, serialised on the first cs_result_report_json (the command
  // line never asks: at 1024 ranks that text is 100 MB and seconds of work; docs/scale.md).
  std::unique_ptr<cs::Report> doc;
};

struct cs_plan {
  cs::Session ss;
  cs::RecipeSource recipe;
  std::vector<std::string> rargs;
  cs::RunInfo info;
  std::string name;  // for the default output directory
  bool help = false;
  bool used = false;
};

namespace {

// ---- handles (issue 30, class 6) ----
// What a host holds is not our pointer but a number: a slot of a table, the slot's generation and
// the kind of object. Closing or freeing bumps the slot's generation, so a handle closed twice, used
// after close, or of another kind (a plan given as a session) finds nothing and the call returns
// CS_E_HANDLE instead of freeing twice ("double free", the host aborted). NULL is CS_E_INVALID.
// Closing a handle while another thread is inside a call on it stays the host's mistake.
template <class T, unsigned Kind>
class Handles {
 public:
  T* add(std::unique_ptr<T> obj) {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<uint32_t>(slots_.size());
      if (i >= kMaxSlots) throw std::runtime_error("more than 16 million live handles");
      slots_.push_back({});
    }
    slots_[i].obj = obj.release();
    return reinterpret_cast<T*>(encode(i, slots_[i].gen));
  }
  // The object of a live handle; nullptr for NULL, a closed handle or another kind's.
  T* get(const T* h) {
    std::lock_guard<std::mutex> lock(mu_);
    const Slot* s = find(h);
    return s ? s->obj : nullptr;
  }
  // Takes the object out (the handle is dead from now on); nullptr as get.
  std::unique_ptr<T> take(const T* h) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* s = find(h);
    if (!s) return nullptr;
    std::unique_ptr<T> obj(s->obj);
    s->obj = nullptr;
    if (++s->gen == 0) s->gen = 1;
    free_.push_back(static_cast<uint32_t>(s - slots_.data()));
    return obj;
  }

 private:
  static_assert(sizeof(uintptr_t) >= 8, "handles need 64-bit pointers");
  static constexpr uint32_t kMaxSlots = 1u << 24;
  struct Slot {
    T* obj = nullptr;
    uint32_t gen = 1;
  };
  static uintptr_t encode(uint32_t i, uint32_t gen) {
    return (uintptr_t{gen} << 32) | (uintptr_t{Kind} << 24) | (i + 1);
  }
  Slot* find(const T* h) {
    const auto v = reinterpret_cast<uintptr_t>(h);
    const uint32_t i = static_cast<uint32_t>(v & (kMaxSlots - 1));
    if (i == 0 || ((v >> 24) & 0xff) != Kind || i > slots_.size()) return nullptr;
    Slot& s = slots_[i - 1];
    return s.obj && s.gen == static_cast<uint32_t>(v >> 32) ? &s : nullptr;
  }
  std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

Handles<cs_session, 0x5e>& sessions() {
  static auto* t = new Handles<cs_session, 0x5e>;  // never destroyed: a host may close at exit
  return *t;
}
Handles<cs_plan, 0x91>& plans() {
  static auto* t = new Handles<cs_plan, 0x91>;
  return *t;
}
Handles<cs_result, 0xe5>& results() {
  static auto* t = new Handles<cs_result, 0xe5>;
  return *t;
}

// The code for a handle that is not live: NULL is a bad argument, anything else a dead handle.
int bad_handle(const void* h) { return h ? CS_E_HANDLE : CS_E_INVALID; }
constexpr const char* kDeadSession = "not a live session handle: closed already, or not one cs_session_open gave";

thread_local std::string t_open_error;
thread_local int t_open_exit = 0;
bool g_we_initialised_mpi = false;
// The runs of this process, over all its sessions: it numbers their default output directories
// (a per-session count gave two sessions' first runs in one second the same directory, and the
// second run's report replaced the first's; commscript.run() in Python opens a session per call).
std::atomic<unsigned> g_runs{0};

// Which ranks print a failure when the host handed its process over (own_process): the
// launcher's rank 0 (input errors, read before MPI), every rank (its own environment), nobody.
enum class Print { none, launcher_root, every };

int fail(cs_session* s, int code, const std::string& msg, int exit_code = 1, Print print = Print::none) {
  if (s) {
    s->error = msg;
    s->exit_code = exit_code;
    if (s->opts.own_process &&
        (print == Print::every || (print == Print::launcher_root && cs::job::launcher_rank() <= 0)))
      std::fprintf(stderr, "commscript: %s\n", msg.c_str());
  }
  return code;
}

void clear(cs_session* s) {
  s->error.clear();
  s->exit_code = 0;
}

bool printer(const cs_session& s) { return s.opts.own_process && cs::job::launcher_rank() <= 0; }

// NAME in the session's search path, then what the command line finds (a file, a bundled name).
std::optional<cs::RecipeSource> locate(const cs_session& s, const std::string& name, std::string* why) {
  namespace fs = std::filesystem;
  if (name.find('/') == std::string::npos && !s.recipe_path.empty()) {
    const std::string file = name.size() > 4 && name.substr(name.size() - 4) == ".lua" ? name : name + ".lua";
    size_t start = 0;
    while (start <= s.recipe_path.size()) {
      const size_t end = std::min(s.recipe_path.find(':', start), s.recipe_path.size());
      const std::string dir = s.recipe_path.substr(start, end - start);
      std::error_code ec;
      if (!dir.empty() && fs::is_regular_file(fs::path(dir) / file, ec))
        return cs::find_recipe((fs::path(dir) / file).string(), why);
      start = end + 1;
    }
  }
  return cs::find_recipe(name, why);
}

std::string run_dir(cs_session& s, const std::string& recipe) {
  std::string base = std::filesystem::path(recipe).filename().string();
  if (base.size() > 4 && base.substr(base.size() - 4) == ".lua") base.resize(base.size() - 4);
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  // Several runs of one process in the same second must not share a directory.
  return (s.out_dir.empty() ? std::string("commscript-runs") : s.out_dir) + "/" + base + "-" + stamp + "-" +
         std::to_string(getpid()) + "-" + std::to_string(++g_runs);
}

// What differs between a recorded run and this one (printed by the launcher's rank 0): the run
// still uses the recorded recipe source, options, config and seed.
void replay_warnings(const nlohmann::json& rep, const cs::RecipeSource& src, const std::string& file) {
  if (cs::job::launcher_rank() > 0) return;
  auto warn = [&](const std::string& m) {
    std::fprintf(stderr, "commscript: replay %s: warning: %s\n", file.c_str(), m.c_str());
  };
  const std::string was = rep.value("commscript", nlohmann::json::object()).value("version", "?");
  if (was != COMMSCRIPT_VERSION) warn("recorded with commscript " + was + ", this is " + COMMSCRIPT_VERSION);
  const int ranks = rep.value("run", nlohmann::json::object()).value("ranks", 0);
  const int now = cs::job::launcher_size();
  if (ranks && ranks != now)
    warn("recorded on " + std::to_string(ranks) + " ranks, now running on " + std::to_string(now));
  const std::string sha = rep["recipe"].value("sha256", "");
  if (sha.empty())
    warn("the report records no sha256 of the recipe source");
  else if (sha != cs::sha256_hex(src.text))
    warn("the recorded source does not match its recorded sha256");
  if (!src.bundled) {  // a regular file there (file_read.hpp: not a FIFO a report names)
    const cs::FileRead now_there = cs::read_regular_file(src.name, size_t{64} << 20);
    if (now_there.ok() && cs::sha256_hex(now_there.text) != sha)
      warn(src.name + " has changed since the recorded run; replaying the recorded source");
  } else {
    if (auto b = cs::bundled_recipe(src.name); b && cs::sha256_hex(b->text) != sha)
      warn("the bundled " + src.name + " differs from the recorded one; replaying the recorded source");
  }
}

// What a sandboxed replay applies of the report's config. Nor does it reach the loader or the MPI
// library: the recorded [env] is applied only for the allow-list (run_inputs.hpp), less what loads
// code or names files. Nor does it name rule files: cs.rules loads those of the config's [rules]
// files as given to the run (issue 30, class 20.7), and a report's are someone else's.
void sandbox_replayed_config(cs::Config* config, const char* file, bool print) {
  const std::vector<std::string> skipped = config->drop_env(cs::env_var_unsafe_to_replay);
  if (!skipped.empty() && print) {
    std::string names;
    for (const auto& n : skipped) names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr,
                 "commscript: replay %s: not applying %s from the report's [env] (dropped: a replay applies "
                 "only %s, less names that load code or name files; --trusted applies them all)\n",
                 file, names.c_str(), cs::replay_env_allow_list().c_str());
  }
  if (!config->data().contains("rules")) return;
  nlohmann::json data = config->data();
  data.erase("rules");
  *config = cs::Config::from_json(data, file);
  if (print)
    std::fprintf(stderr,
                 "commscript: replay %s: not applying the report's [rules] files (name your own with --config or "
                 "--set; --trusted applies them)\n",
                 file);
}

// The run's world (cs::Session reads rank and size from it).
void use_world(cs::Session& ss, std::shared_ptr<cs::Communicator> world) { ss.world = std::move(world); }

// Why run options `ro` cannot make a plan ("" when they can).
std::string refusal(const cs_run_options& ro, bool replay) {
  if (!replay && (!ro.recipe || !*ro.recipe)) return "cs_run: no recipe given";
  if (replay && ro.recipe && *ro.recipe)
    return std::string("--replay takes the recipe and its options from the report; remove '") + ro.recipe + "'";
  if (ro.argc < 0 || ro.nsets < 0 || ro.command_line_n < 0)
    return "cs_run: argc, nsets and command_line_n must not be negative";
  if ((ro.argc > 0 && !ro.argv) || (ro.nsets > 0 && !ro.sets) || (ro.command_line_n > 0 && !ro.command_line))
    return "cs_run: argv, sets or command_line is NULL";
  for (int i = 0; i < ro.argc; ++i)
    if (!ro.argv[i]) return "cs_run: argv[" + std::to_string(i) + "] is NULL";
  for (int i = 0; i < ro.nsets; ++i)
    if (!ro.sets[i]) return "cs_run: sets[" + std::to_string(i) + "] is NULL";
  for (int i = 0; i < ro.command_line_n; ++i)
    if (!ro.command_line[i]) return "cs_run: command_line[" + std::to_string(i) + "] is NULL";
  if (ro.fail_below != ro.fail_below || ro.fail_below > 100)
    return "cs_run: fail_below must be a number from 0 to 100 (or < 0: none)";
  return "";
}

// The session's duplicate of the host's communicator `c` (a collective over it).
int lend(cs_session* s, MPI_Comm c, const char* who) {
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(c, &dup) != MPI_SUCCESS) return fail(s, CS_E_MPI, std::string(who) + ": MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
  s->comm = dup;
  return CS_OK;
}

const char* level_name(int provided) {
  return provided == MPI_THREAD_MULTIPLE     ? "multiple"
         : provided == MPI_THREAD_SERIALIZED ? "serialized"
         : provided == MPI_THREAD_FUNNELED   ? "funneled"
                                             : "single";
}

}  // namespace

extern "C" {

int cs_api_version(void) { return COMMSCRIPT_API_VERSION; }

const char* cs_version(void) { return COMMSCRIPT_VERSION; }

void cs_session_options_init(cs_session_options* o) {
  if (!o) return;
  *o = cs_session_options{};
  o->struct_size = sizeof(cs_session_options);
  o->deadline_s = -1;
  o->init_mpi = 1;
  o->verify = 1;
}

int cs_session_open(const cs_session_options* opts, cs_session** out) {
  t_open_error.clear();
  t_open_exit = 1;
  auto refuse = [](int code, const std::string& msg) { return t_open_error = "cs_session_open: " + msg, code; };
  if (!out) return refuse(CS_E_INVALID, "out is NULL");
  *out = nullptr;
  try {
    auto s = std::make_unique<cs_session>();
    auto opened = [&] { return *out = sessions().add(std::move(s)), t_open_exit = 0, CS_OK; };
    cs_session_options_init(&s->opts);
    if (opts) {
      // 1.0's struct ends at init_mpi: its callers' options are read up to there, the rest keeps
      // its defaults.
      constexpr int v10 = static_cast<int>(offsetof(cs_session_options, backend));
      constexpr int now = static_cast<int>(sizeof(cs_session_options));
      if (opts->struct_size != v10 && opts->struct_size != now)
        return refuse(CS_E_INVALID,
                      "opts->struct_size is not sizeof(cs_session_options) (call cs_session_options_init)");
      std::memcpy(static_cast<void*>(&s->opts), opts, static_cast<size_t>(opts->struct_size));
      s->opts.struct_size = now;
    }
    if (s->opts.deadline_s != s->opts.deadline_s) return refuse(CS_E_INVALID, "deadline_s is not a number");  // NaN
    if (s->opts.recipe_path) s->recipe_path = s->opts.recipe_path;
    if (s->opts.out_dir) s->out_dir = s->opts.out_dir;
    if (s->opts.backend) s->backend = s->opts.backend, s->backend_given = true;
    if (s->opts.launcher) s->launcher = s->opts.launcher;
    s->opts.recipe_path = s->opts.out_dir = s->opts.backend = s->opts.launcher = nullptr;  // owned copies above
    if (std::string why; !cs::backend_built(s->backend, &why)) return refuse(CS_E_INVALID, why);
    if (s->launcher != "auto" && s->launcher != "mpi" && s->launcher != "env" && s->launcher != "slurm")
      return refuse(CS_E_INVALID, "launcher '" + s->launcher + "' is none of auto, mpi, env, slurm");
    // The command line's process: MPI starts (or not: --launcher env) in cs_session_attach_world,
    // after the config's [env] is applied.
    if (s->opts.own_process) return opened();
    int init = 0, finalized = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&finalized);
    if (finalized) return refuse(CS_E_MPI, "MPI is already finalized");
    if (!init) {
      if (!s->opts.init_mpi && s->backend == "gloo") {  // may join a world without MPI (attach_world)
        s->initialized_by_host = 0;
        return opened();
      }
      if (!s->opts.init_mpi) return refuse(CS_E_MPI, "MPI is not initialised (and init_mpi is 0)");
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (!g_we_initialised_mpi)
        std::atexit([] {  // finalized at exit unless the host did
          int done = 0;
          if (MPI_Finalized(&done) == MPI_SUCCESS && !done) MPI_Finalize();
        });
      g_we_initialised_mpi = true;
    }
    s->initialized_by_host = g_we_initialised_mpi ? 0 : 1;
    MPI_Query_thread(&s->thread_level);
    return opened();
  } catch (const std::exception& e) {
    t_open_exit = static_cast<int>(cs::ExitCode::internal);
    return refuse(CS_E_INTERNAL, e.what());
  }
}

int cs_session_attach_comm_f(cs_session* h, int64_t fortran_comm) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  if (s->world) return fail(s, CS_E_STATE, "cs_session_attach_comm: the session has joined the launcher's world");
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return fail(s, CS_E_MPI, "cs_session_attach_comm: MPI is not initialised");
  MPI_Comm c = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm));
  if (c == MPI_COMM_NULL) return fail(s, CS_E_MPI, "cs_session_attach_comm: the communicator is MPI_COMM_NULL");
#ifdef OPEN_MPI
  // Open MPI's MPI_Comm_f2c gives a null pointer for a handle that is no live communicator's (a
  // freed one, a wrong number); MPI_Comm_test_inter on it raised MPI_ERR_COMM on MPI_COMM_WORLD,
  // whose default handler aborted the host.
  if (c == nullptr)
    return fail(s, CS_E_MPI,
                "cs_session_attach_comm: " + std::to_string(fortran_comm) + " is no live communicator's handle");
#endif
  int inter = 0;
  if (MPI_Comm_test_inter(c, &inter) != MPI_SUCCESS)
    return fail(s, CS_E_MPI, "cs_session_attach_comm: not a valid communicator");
  if (inter) return fail(s, CS_E_MPI, "cs_session_attach_comm: intercommunicators are not supported");
  return lend(s, c, "cs_session_attach_comm");
}

}  // extern "C"

namespace {

// Embedded on MPI's world: the host's MPI_COMM_WORLD, as if attached; each run sets up the
// backend over it (cs_session_attach_comm).
int attach_host_world(cs_session* s) {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return fail(s, CS_E_MPI, "cs_session_attach_world: MPI is not initialised");
  return lend(s, MPI_COMM_WORLD, "cs_session_attach_world");
}

// Termination signals go to one thread, started before MPI's threads (which inherit the mask),
// so a rank that mpirun ends still saves what it measured.
void own_the_process() {
  cs::guardian::start(&cs::sandboxed_pages());  // forks: before any thread (the signal thread, MPI's)
  cs::incidents::start_signal_thread();
  // A peer that dies closes its sockets; Gloo's writev to it must fail with EPIPE (an error
  // the backend reports), not kill this rank with SIGPIPE (seen: a survivor of a dropped rank
  // gone with signal 13 mid-shrink). Embedded hosts keep their own disposition (docs).
  std::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

extern "C" {

int cs_session_attach_world(cs_session* h, const cs_plan* plan_h, int* argc, char*** argv) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  if (s->world) return fail(s, CS_E_STATE, "cs_session_attach_world: the session has joined its world already");
  if (s->comm != MPI_COMM_NULL)
    return fail(s, CS_E_STATE, "cs_session_attach_world: the session has a communicator attached");
  const cs_plan* plan = plans().get(plan_h);
  if (plan_h && !plan) return fail(s, CS_E_HANDLE, "cs_session_attach_world: not a live plan handle");
  // The plan's backend (a --replay'd report's) and timeout (the backend's setup deadline).
  const double timeout_s = plan ? plan->ss.timeout_s : s->opts.deadline_s >= 0 ? s->opts.deadline_s : 300;
  const std::string& b = plan ? plan->ss.backend : s->backend;
  cs::LaunchEnv launch;
  const bool own = s->opts.own_process != 0;
  try {
    try {
      launch = cs::read_launch_env(s->launcher);
    } catch (const cs::Error& e) {  // this process's own variables: it says so itself, whatever its rank
      return fail(s, CS_E_INVALID, e.what(), static_cast<int>(e.code()), Print::every);
    }
    cs::check_launch(b, launch);
    s->launch_json = launch.to_json();
    if (own) own_the_process();
    if (b != "self" && launch.kind == "mpi" && !own) return attach_host_world(s);
    s->world = cs::launcher_world(b, launch, timeout_s, argc, argv, &s->world_mpi);
    if (!s->world)
      return fail(s, CS_E_INTERNAL, "cs_session_attach_world: no world for backend " + b,
                  static_cast<int>(cs::ExitCode::internal), Print::every);
    s->world->set_verify(s->opts.verify != 0);
    if (s->world_mpi) {
      MPI_Query_thread(&s->thread_level);
      s->initialized_by_host = 0;
    }
    return CS_OK;
  } catch (const cs::WorldError& e) {
    return fail(s, e.input ? CS_E_INVALID : CS_E_BACKEND, e.what(), static_cast<int>(e.code()),
                e.print_here ? Print::every : Print::none);
  } catch (const std::exception& e) {
    return fail(s, CS_E_INTERNAL, std::string("cs_session_attach_world: ") + e.what(),
                static_cast<int>(cs::ExitCode::internal), Print::every);
  }
}

const char* cs_last_error(const cs_session* h) {
  if (!h) return t_open_error.c_str();
  const cs_session* s = sessions().get(h);
  return s ? s->error.c_str() : kDeadSession;
}

int cs_last_exit_code(const cs_session* h) {
  if (!h) return t_open_exit;
  const cs_session* s = sessions().get(h);
  return s ? s->exit_code : -1;
}

int cs_session_mpi_info(const cs_session* h, int* by_host, int* level) {
  const cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  if (by_host) *by_host = s->initialized_by_host;
  if (level) *level = s->thread_level;
  return CS_OK;
}

void cs_run_options_init(cs_run_options* o) {
  if (!o) return;
  *o = cs_run_options{};
  o->struct_size = sizeof(cs_run_options);
  o->fail_below = -1;
}

// --metrics FILE and --metrics-listen ADDRESS:PORT onto the plan; an address that is garbage is
// refused before anything runs. CS_OK or the error code.
static int metrics_options(cs_session* s, const cs_run_options& ro, cs::RunInfo& info) {
  if (ro.metrics_file) info.metrics_file = ro.metrics_file;
  if (ro.metrics_listen && *ro.metrics_listen) {
    try {
      (void)cs::parse_listen_address(ro.metrics_listen);
    } catch (const cs::Error& e) {
      return fail(s, CS_E_INVALID, e.what(), 1, Print::launcher_root);
    }
    info.metrics_listen = ro.metrics_listen;
  }
  return CS_OK;
}

int cs_plan_open(cs_session* h, const cs_run_options* ro, cs_plan** out) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  if (!out) return fail(s, CS_E_INVALID, "cs_plan_open: out is NULL");
  *out = nullptr;
  if (!ro) return fail(s, CS_E_INVALID, "cs_plan_open: opts is NULL");
  // A caller built against 2.0 passes the struct without the metrics fields (NULL here).
  const int v20 = static_cast<int>(offsetof(cs_run_options, metrics_file));
  if (ro->struct_size != static_cast<int>(sizeof(cs_run_options)) && ro->struct_size != v20)
    return fail(s, CS_E_INVALID,
                "cs_plan_open: opts->struct_size is not sizeof(cs_run_options) (call cs_run_options_init)");
  cs_run_options full;
  cs_run_options_init(&full);
  std::memcpy(static_cast<void*>(&full), ro, static_cast<size_t>(ro->struct_size));
  ro = &full;
  const bool replay = ro->replay && *ro->replay;
  if (const std::string bad = refusal(*ro, replay); !bad.empty()) return fail(s, CS_E_INVALID, bad);
  try {
    auto p = std::make_unique<cs_plan>();
    cs::Session& ss = p->ss;
    ss.embedded = !s->opts.own_process;
    ss.backend = s->backend;
    ss.trusted = s->opts.trusted != 0;
    ss.verify = s->opts.verify != 0;
    ss.fail_below = ro->fail_below;
    if (ro->command_line) {
      ss.argv.assign(ro->command_line, ro->command_line + ro->command_line_n);
    } else {
      ss.argv = {"libcommscript", replay ? std::string("--replay=") + ro->replay : std::string(ro->recipe)};
      for (int i = 0; i < ro->argc; ++i) ss.argv.emplace_back(ro->argv[i]);
    }
    std::optional<double> timeout = s->opts.deadline_s >= 0 ? std::optional<double>(s->opts.deadline_s) : std::nullopt;
    std::optional<uint64_t> seed = s->opts.seed_given ? std::optional<uint64_t>(s->opts.seed) : std::nullopt;
    const std::string where = ro->config ? std::string(" (in ") + ro->config + ")" : "";
    nlohmann::json replayed;
    try {
      if (ro->baseline && *ro->baseline) ss.baseline = cs::load_baseline(ro->baseline);
      if (replay) {
        replayed = cs::load_replay(ro->replay);
        cs::Replayed r = cs::replay_settings(replayed, ro->replay);
        ss.config = std::move(r.config);
        if (!seed) seed = r.seed;
        if (!timeout) timeout = r.timeout_s;
        if (!s->backend_given && r.backend) {
          std::string why;
          if (!cs::backend_built(*r.backend, &why))
            throw cs::InputError("replay " + std::string(ro->replay) + ": " + why);
          ss.backend = *r.backend;  // what cs_session_attach_world sets up when given this plan
        }
        if (!ss.trusted) sandbox_replayed_config(&ss.config, ro->replay, printer(*s));
        // A report is data from someone else: it never lifts the sandbox by itself.
        if (r.was_trusted && !ss.trusted && printer(*s))
          std::fprintf(stderr,
                       "commscript: replay %s: warning: the recorded run was --trusted; this one is sandboxed "
                       "unless you pass --trusted\n",
                       ro->replay);
      }
      if (ro->config) ss.config = cs::Config::load(ro->config);
      for (int i = 0; i < ro->nsets; ++i) ss.config.set(ro->sets[i]);
      ss.config.check();  // again after the sets, before [env] is applied or anything is measured
      ss.config.apply_env();
      p->info.chaos = cs::chaos_plan(ss.config, ss.backend, where);
      const cs::RunSettings rs = cs::run_settings(ss.config, timeout, seed, where);
      ss.timeout_s = rs.timeout_s;
      ss.seed = rs.seed;
    } catch (const cs::Error& e) {
      return fail(s, CS_E_INVALID, e.what(), static_cast<int>(e.code()), Print::launcher_root);
    }
    p->info.replay_of = replay ? ro->replay : "";
    if (!replayed.is_null()) {
      const auto& rec = replayed["recipe"];
      p->recipe = cs::RecipeSource{rec.value("file", "replayed.lua"), rec["source"].get<std::string>(),
                                   rec.value("bundled", false)};
      for (const auto& x : rec.value("args", nlohmann::json::array())) p->rargs.push_back(x.get<std::string>());
      if (s->opts.own_process) replay_warnings(replayed, p->recipe, ro->replay);
      p->name = p->recipe.name;
    } else {
      std::string why;
      auto src = locate(*s, ro->recipe, &why);
      if (!src) return fail(s, CS_E_NOT_FOUND, why, 1, Print::launcher_root);
      p->recipe = std::move(*src);
      for (int i = 0; i < ro->argc; ++i) p->rargs.emplace_back(ro->argv[i]);
      p->name = ro->recipe;
    }
    for (const auto& x : p->rargs)
      if (x == "--help" || x == "-h") p->help = true;
    // The output directory: the one asked for; the command line's default (open_report names it);
    // or a new one under the session's out_dir.
    if (ro->out_dir && *ro->out_dir)
      p->info.out = ro->out_dir;
    else if (!s->opts.own_process || !s->out_dir.empty())
      p->info.out = run_dir(*s, p->name);
    if (const int rc = metrics_options(s, *ro, p->info)) return rc;
    *out = plans().add(std::move(p));
    return CS_OK;
  } catch (const std::exception& e) {
    return fail(s, CS_E_INTERNAL, std::string("cs_plan_open: ") + e.what(), static_cast<int>(cs::ExitCode::internal),
                Print::every);
  }
}

int cs_plan_wants_help(const cs_plan* h) {
  const cs_plan* p = plans().get(h);
  return p && p->help ? 1 : 0;
}

int cs_plan_check(cs_session* h, cs_plan* ph, int print, int* exit_code) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  cs_plan* p = plans().get(ph);
  if (ph && !p) return fail(s, CS_E_HANDLE, "cs_plan_check: not a live plan handle (freed already?)");
  if (!p || !exit_code) return fail(s, CS_E_INVALID, "cs_plan_check: plan or exit_code is NULL");
  try {
    *exit_code = cs::answer_without_ranks(p->ss, p->recipe, p->rargs, p->help, print != 0);
    return CS_OK;
  } catch (const std::exception& e) {
    return fail(s, CS_E_INTERNAL, std::string("cs_plan_check: ") + e.what(), static_cast<int>(cs::ExitCode::internal),
                Print::every);
  }
}

int cs_plan_free(cs_plan* p) { return plans().take(p) ? CS_OK : bad_handle(p); }

int cs_plan_run(cs_session* h, cs_plan* ph, cs_result** result) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  if (!result) return fail(s, CS_E_INVALID, "cs_run: result is NULL");
  *result = nullptr;
  cs_plan* p = plans().get(ph);
  if (ph && !p) return fail(s, CS_E_HANDLE, "cs_run: not a live plan handle (freed already?)");
  if (!p) return fail(s, CS_E_INVALID, "cs_run: plan is NULL");
  if (p->used) return fail(s, CS_E_STATE, "cs_run: this plan has run already (a plan runs once)");
  if (p->help) return fail(s, CS_E_INVALID, "cs_run: --help is answered by cs_plan_check");
  p->used = true;
  cs::Session& ss = p->ss;
  const bool own = s->opts.own_process != 0;
  if (own && !s->world)
    return fail(s, CS_E_STATE, "cs_run: own_process: call cs_session_attach_world first", 1, Print::every);
  if (!own || s->world_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return fail(s, CS_E_MPI, "cs_run: MPI is finalized");
  }
  try {
    auto res = std::make_unique<cs_result>();
    if (s->world) {
      // The launcher's world (cs_session_attach_world): the command line's run.
      use_world(ss, s->world);
      ss.launcher = s->launch_json;
      if (ss.embedded)
        ss.host_mpi = {{"initialized_by", s->initialized_by_host ? "host" : "commscript"},
                       {"thread_level", level_name(s->thread_level)},
                       {"communicator", "launcher's world"}};
      res->exit_code = cs::run_recipe(ss, p->recipe, p->rargs, p->info);
      ss.world.reset();
      if (ss.embedded) cs::job::clear_cancel();
    } else {
      int init = 0;
      MPI_Initialized(&init);
      if (!init)
        return fail(s, CS_E_STATE,
                    "cs_run: MPI is not initialised: join the launcher's world (cs_session_attach_world)");
      const MPI_Comm host = s->comm != MPI_COMM_NULL ? s->comm : MPI_COMM_WORLD;
      int provided = 0;
      MPI_Query_thread(&provided);
      ss.host_mpi = {{"initialized_by", s->initialized_by_host ? "host" : "commscript"},
                     {"thread_level", level_name(provided)},
                     {"communicator", s->comm != MPI_COMM_NULL ? "host" : "MPI_COMM_WORLD"}};
      cs::job::attach(host);
      struct Detach {  // however the run ends
        cs::Session& ss;
        ~Detach() { ss.world.reset(), cs::job::detach(), cs::job::clear_cancel(); }
      } detach{ss};
      try {
        use_world(ss, cs::world_over_comm(ss.backend, host, ss.timeout_s));
      } catch (const cs::Error& e) {
        return fail(s, CS_E_BACKEND, e.what(), static_cast<int>(e.code()));
      }
      ss.world->set_verify(ss.verify);
      res->exit_code = cs::run_recipe(ss, p->recipe, p->rargs, p->info);
    }
    // Refused before anything ran (the recipe does not load, its options are wrong): bad input
    // to the API, not a run.
    if (!ss.report)
      return fail(s, CS_E_INVALID, ss.last_error.empty() ? "cs_run: bad input" : ss.last_error, res->exit_code);
    res->report = ss.report_json;
    if (!ss.embedded && ss.rank() == 0 && s->world) res->doc = std::move(ss.report);
    res->out_dir = ss.out_dir;
    res->error = ss.last_error;
    if (!ss.last_error.empty()) s->error = ss.last_error;
    *result = results().add(std::move(res));
    return CS_OK;
  } catch (const std::exception& e) {
    return fail(s, CS_E_INTERNAL, std::string("cs_run: ") + e.what(), static_cast<int>(cs::ExitCode::internal),
                Print::every);
  }
}

int cs_run(cs_session* h, const char* recipe, const char* const* argv, int argc, const char* const* sets, int nsets,
           const char* config, const char* out_dir, cs_result** result) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  if (!result) return fail(s, CS_E_INVALID, "cs_run: result is NULL");
  *result = nullptr;
  cs_run_options o;
  cs_run_options_init(&o);
  o.recipe = recipe;
  o.argv = argv;
  o.argc = argc;
  o.sets = sets;
  o.nsets = nsets;
  o.config = config;
  o.out_dir = out_dir;
  cs_plan* p = nullptr;
  int rc = cs_plan_open(h, &o, &p);
  if (rc != CS_OK) return rc;
  if (cs_plan_wants_help(p)) {
    cs_plan_free(p);
    return fail(s, CS_E_INVALID, "cs_run: --help is for the command line");
  }
  rc = cs_plan_run(h, p, result);
  cs_plan_free(p);
  return rc;
}

int cs_result_exit_code(const cs_result* h) {
  const cs_result* r = results().get(h);
  return r ? r->exit_code : -1;
}
const char* cs_result_report_json(const cs_result* h) {
  cs_result* r = results().get(h);
  if (!r) return "";
  if (r->doc) {  // made once; the result is not shared between threads (commscript.h)
    r->report = cs::json_text(r->doc->doc());
    r->doc.reset();
  }
  return r->report.c_str();
}
const char* cs_result_out_dir(const cs_result* h) {
  const cs_result* r = results().get(h);
  return r ? r->out_dir.c_str() : "";
}
const char* cs_result_error(const cs_result* h) {
  const cs_result* r = results().get(h);
  return r ? r->error.c_str() : "";
}
int cs_result_free(cs_result* h) { return results().take(h) ? CS_OK : bad_handle(h); }

int cs_session_close(cs_session* h) {
  const std::unique_ptr<cs_session> s = sessions().take(h);
  if (!s) return bad_handle(h);
  if (s->world) {
    cs::job::set_control(nullptr);
    s->world.reset();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
  if (s->world_mpi) cs::job::finalize();
  return CS_OK;
}

}  // extern "C"
