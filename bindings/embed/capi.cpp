// libcommscript's C API (include/commscript/commscript.h): C types in, C codes out. A host
// program's session, the communicator it lends (or the launcher's world it joins), and runs of
// recipes: each call turns its C arguments into the engine's plan (engine/control/plan.hpp,
// where every input of a run is resolved) and the plan's errors into CS_E_* codes and messages.
// The commscript command is itself a client of this API (bindings/cli, with own_process set); an
// embedded session (own_process 0) sets Session::embedded so that a failure ends the run and
// never the process. The handle tables are handles.hpp's; the build's facts capi_info.cpp's.
#include <mpi.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "backends.hpp"
#include "commscript/commscript.h"
#include "commscript_version.hpp"
#include "handles.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "launch_env.hpp"
#include "marshal.hpp"
#include "plan.hpp"
#include "recipe_run.hpp"

struct cs_session {
  cs_session_options opts{};
  cs::PlanDefaults defaults;  // the options, resolved (backend, launcher, deadline ...)
  cs::Seat seat;              // the launcher's world it joined or the communicator lent
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
  std::unique_ptr<cs::Plan> plan;
};

namespace {

using cs::embed::Handles;
using cs::embed::read_defaults;
using cs::embed::refusal;
using cs::embed::request;

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

// The recipes' side (bindings/lua) as the plan reaches it.
class LuaLibrary final : public cs::RecipeLibrary {
 public:
  std::optional<cs::RecipeSource> find(const std::string& name, std::string* why) const override {
    return cs::find_recipe(name, why);
  }
  std::optional<cs::RecipeSource> bundled(const std::string& path) const override { return cs::bundled_recipe(path); }
  std::unique_ptr<cs::RecipeHost> host(cs::Session* s) const override { return cs::make_recipe_host(s); }
  const cs::PageRenderer& pages() const override { return cs::sandboxed_pages(); }
};
const LuaLibrary kLibrary;

// Which ranks print a failure when the host handed its process over (own_process): the
// launcher's rank 0 (input errors, read before MPI), every rank (its own environment), nobody.
using Print = cs::PlanPrint;

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

int code_of(cs::PlanFailure k) {
  switch (k) {
    case cs::PlanFailure::invalid:
      return CS_E_INVALID;
    case cs::PlanFailure::not_found:
      return CS_E_NOT_FOUND;
    case cs::PlanFailure::state:
      return CS_E_STATE;
    case cs::PlanFailure::mpi:
      return CS_E_MPI;
    case cs::PlanFailure::backend:
      return CS_E_BACKEND;
    default:
      return CS_E_INTERNAL;
  }
}

// A step of the plan refused: its code, message, exit code and printer.
int fail(cs_session* s, const cs::PlanError& e) {
  return fail(s, code_of(e.kind), e.what(), static_cast<int>(e.code()), e.print);
}

// Something inside commscript failed: CS_E_INTERNAL, exit 70, said on every rank.
int internal(cs_session* s, const char* call, const std::exception& e) {
  return fail(s, CS_E_INTERNAL, std::string(call) + ": " + e.what(), static_cast<int>(cs::ExitCode::internal),
              Print::every);
}

void clear(cs_session* s) {
  s->error.clear();
  s->exit_code = 0;
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
    try {
      read_defaults(s->opts, s->defaults);
    } catch (const cs::InputError& e) {  // the command line's process says it as the command line
      if (!s->defaults.own_process) return refuse(CS_E_INVALID, e.what());
      return t_open_error = std::string("--") + e.what(), CS_E_INVALID;
    }
    if (std::string why; !cs::launcher_known(s->defaults.launcher, &why)) return refuse(CS_E_INVALID, why);
    // The command line's process: MPI starts (or not: --launcher env) in cs_session_attach_world,
    // after the config's [env] is applied.
    if (s->defaults.own_process) return opened();
    try {
      cs::prepare_host_mpi(s->seat, s->defaults, s->opts.init_mpi != 0);
    } catch (const cs::PlanError& e) {
      return refuse(CS_E_MPI, e.what());
    }
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
  if (s->seat.world) return fail(s, CS_E_STATE, "cs_session_attach_comm: the session has joined the launcher's world");
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
  try {
    cs::lend_comm(s->seat, c, "cs_session_attach_comm");
    return CS_OK;
  } catch (const cs::PlanError& e) {
    return fail(s, e);
  }
}

int cs_session_attach_world(cs_session* h, const cs_plan* plan_h, int* argc, char*** argv) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  if (s->seat.world) return fail(s, CS_E_STATE, "cs_session_attach_world: the session has joined its world already");
  if (s->seat.lent != MPI_COMM_NULL)
    return fail(s, CS_E_STATE, "cs_session_attach_world: the session has a communicator attached");
  const cs_plan* plan = plans().get(plan_h);
  if (plan_h && !plan) return fail(s, CS_E_HANDLE, "cs_session_attach_world: not a live plan handle");
  try {
    cs::join_world(s->seat, s->defaults, plan ? plan->plan.get() : nullptr, kLibrary, argc, argv);
    return CS_OK;
  } catch (const cs::PlanError& e) {
    return fail(s, e);
  } catch (const std::exception& e) {
    return internal(s, "cs_session_attach_world", e);
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
  if (by_host) *by_host = s->seat.initialized_by_host;
  if (level) *level = s->seat.thread_level;
  return CS_OK;
}

void cs_run_options_init(cs_run_options* o) {
  if (!o) return;
  *o = cs_run_options{};
  o->struct_size = sizeof(cs_run_options);
  o->fail_below = -1;
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
  if (const std::string bad = refusal(full, full.replay && *full.replay); !bad.empty())
    return fail(s, CS_E_INVALID, bad);
  try {
    auto p = std::make_unique<cs_plan>();
    p->plan = cs::open_plan(s->defaults, request(full), kLibrary);
    *out = plans().add(std::move(p));
    return CS_OK;
  } catch (const cs::PlanError& e) {
    return fail(s, e);
  } catch (const std::exception& e) {
    return internal(s, "cs_plan_open", e);
  }
}

int cs_plan_wants_help(const cs_plan* h) {
  const cs_plan* p = plans().get(h);
  return p && p->plan->help ? 1 : 0;
}

int cs_plan_check(cs_session* h, cs_plan* ph, int print, int* exit_code) {
  cs_session* s = sessions().get(h);
  if (!s) return bad_handle(h);
  clear(s);
  cs_plan* p = plans().get(ph);
  if (ph && !p) return fail(s, CS_E_HANDLE, "cs_plan_check: not a live plan handle (freed already?)");
  if (!p || !exit_code) return fail(s, CS_E_INVALID, "cs_plan_check: plan or exit_code is NULL");
  try {
    cs::Plan& plan = *p->plan;
    *exit_code = cs::answer_without_ranks(plan.session, plan.recipe, plan.rargs, plan.help, print != 0);
    return CS_OK;
  } catch (const std::exception& e) {
    return internal(s, "cs_plan_check", e);
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
  cs::Plan& plan = *p->plan;
  if (plan.used) return fail(s, CS_E_STATE, "cs_run: this plan has run already (a plan runs once)");
  if (plan.help) return fail(s, CS_E_INVALID, "cs_run: --help is answered by cs_plan_check");
  plan.used = true;
  const bool own = s->defaults.own_process;
  if (own && !s->seat.world)
    return fail(s, CS_E_STATE, "cs_run: own_process: call cs_session_attach_world first", 1, Print::every);
  if (!own || s->seat.world_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return fail(s, CS_E_MPI, "cs_run: MPI is finalized");
  }
  try {
    auto res = std::make_unique<cs_result>();
    res->exit_code = cs::run_plan(plan, s->seat, kLibrary);
    cs::Session& ss = plan.session;
    res->report = ss.report_json;
    if (!ss.embedded && ss.rank() == 0 && s->seat.world) res->doc = std::move(ss.report);
    res->out_dir = ss.out_dir;
    res->error = ss.last_error;
    if (!ss.last_error.empty()) s->error = ss.last_error;
    *result = results().add(std::move(res));
    return CS_OK;
  } catch (const cs::PlanError& e) {
    return fail(s, e);
  } catch (const std::exception& e) {
    return internal(s, "cs_run", e);
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
  cs::leave_seat(s->seat);
  return CS_OK;
}

}  // extern "C"
