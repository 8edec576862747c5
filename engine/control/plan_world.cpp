// The plan's world (plan.hpp): an embedded host's MPI, a lent communicator, the launcher's world
// joined on the plan's backend with the plan's deadline, and the run on it through a RecipeHost.
#include <csignal>
#include <cstdlib>

#include "backends.hpp"
#include "guardian.hpp"
#include "incidents.hpp"
#include "job.hpp"
#include "launch_env.hpp"
#include "plan.hpp"
#include "run_inputs.hpp"

namespace cs {

namespace {

bool g_we_initialised_mpi = false;

const char* level_name(int provided) {
  return provided == MPI_THREAD_MULTIPLE     ? "multiple"
         : provided == MPI_THREAD_SERIALIZED ? "serialized"
         : provided == MPI_THREAD_FUNNELED   ? "funneled"
                                             : "single";
}

// Embedded on MPI's world: the host's MPI_COMM_WORLD, as if attached; each run sets up the
// backend over it (cs_session_attach_comm).
void lend_host_world(Seat& seat) {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) throw PlanError(PlanFailure::mpi, 1, "cs_session_attach_world: MPI is not initialised");
  lend_comm(seat, MPI_COMM_WORLD, "cs_session_attach_world");
}

// Termination signals go to one thread, started before MPI's threads (which inherit the mask),
// so a rank that mpirun ends still saves what it measured.
void own_the_process(const PageRenderer& pages) {
  guardian::start(&pages);  // forks: before any thread (the signal thread, MPI's)
  incidents::start_signal_thread();
  // A peer that dies closes its sockets; Gloo's writev to it must fail with EPIPE (an error
  // the backend reports), not kill this rank with SIGPIPE (seen: a survivor of a dropped rank
  // gone with signal 13 mid-shrink). Embedded hosts keep their own disposition (docs).
  std::signal(SIGPIPE, SIG_IGN);
}

// The deadline a world is set up with: the plan's, or (no plan) the defaults' resolved alone.
double world_deadline(const PlanDefaults& d, const Plan* plan) {
  if (plan) return plan->session.timeout_s;
  try {
    return resolve_deadline(Config(), d.deadline_s, std::nullopt, "");
  } catch (const Error& e) {
    throw PlanError(PlanFailure::invalid, static_cast<int>(e.code()), e.what(), PlanPrint::launcher_root);
  }
}

// The launcher's world on `backend` (WorldError: the backend's own words).
void join_launcher_world(Seat& seat, const PlanDefaults& d, const std::string& backend, const LaunchEnv& launch,
                         double deadline_s, const RecipeLibrary& lib, int* argc, char*** argv) {
  check_launch(backend, launch);
  seat.launch = launch.to_json();
  if (d.own_process) own_the_process(lib.pages());
  if (backend != "self" && launch.kind == "mpi" && !d.own_process) return lend_host_world(seat);
  seat.world = launcher_world(backend, launch, deadline_s, argc, argv, &seat.world_mpi);
  if (!seat.world)
    throw PlanError(PlanFailure::internal, static_cast<int>(ExitCode::internal),
                    "cs_session_attach_world: no world for backend " + backend, PlanPrint::every);
  seat.world->set_verify(d.verify);
  if (seat.world_mpi) {
    MPI_Query_thread(&seat.thread_level);
    seat.initialized_by_host = 0;
  }
}

// A run on the launcher's world (join_world): the command line's run.
int run_on_world(Plan& plan, Seat& seat, const RecipeLibrary& lib) {
  Session& ss = plan.session;
  ss.world = seat.world;
  ss.launcher = seat.launch;
  if (ss.embedded)
    ss.host_mpi = {{"initialized_by", seat.initialized_by_host ? "host" : "commscript"},
                   {"thread_level", level_name(seat.thread_level)},
                   {"communicator", "launcher's world"}};
  int code;
  {  // the recipe's host (its Lua state) ends before the world is let go
    const std::unique_ptr<RecipeHost> host = lib.host(&ss);
    code = run::run_recipe(ss, *host, plan.recipe, plan.rargs, plan.info);
  }
  ss.world.reset();
  if (ss.embedded) job::clear_cancel();
  return code;
}

// A run over the host's communicator (lent, or its MPI_COMM_WORLD): the backend's world is set
// up over it for this run, with the plan's deadline.
int run_over_comm(Plan& plan, Seat& seat, const RecipeLibrary& lib) {
  Session& ss = plan.session;
  int init = 0;
  MPI_Initialized(&init);
  if (!init)
    throw PlanError(PlanFailure::state, 1,
                    "cs_run: MPI is not initialised: join the launcher's world (cs_session_attach_world)");
  const MPI_Comm comm = seat.lent != MPI_COMM_NULL ? seat.lent : MPI_COMM_WORLD;
  int provided = 0;
  MPI_Query_thread(&provided);
  ss.host_mpi = {{"initialized_by", seat.initialized_by_host ? "host" : "commscript"},
                 {"thread_level", level_name(provided)},
                 {"communicator", seat.lent != MPI_COMM_NULL ? "host" : "MPI_COMM_WORLD"}};
  job::attach(comm);
  struct Detach {  // however the run ends
    Session& ss;
    ~Detach() { ss.world.reset(), job::detach(), job::clear_cancel(); }
  } detach{ss};
  try {
    ss.world = world_over_comm(ss.backend, comm, ss.timeout_s);
  } catch (const Error& e) {
    throw PlanError(PlanFailure::backend, static_cast<int>(e.code()), e.what());
  }
  ss.world->set_verify(ss.verify);
  const std::unique_ptr<RecipeHost> host = lib.host(&ss);
  return run::run_recipe(ss, *host, plan.recipe, plan.rargs, plan.info);
}

}  // namespace

void prepare_host_mpi(Seat& seat, const PlanDefaults& d, bool init_mpi) {
  int init = 0, finalized = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&finalized);
  if (finalized) throw PlanError(PlanFailure::mpi, 1, "MPI is already finalized");
  if (!init) {
    if (!init_mpi && d.backend == "gloo") {  // may join a world without MPI (join_world)
      seat.initialized_by_host = 0;
      return;
    }
    if (!init_mpi) throw PlanError(PlanFailure::mpi, 1, "MPI is not initialised (and init_mpi is 0)");
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (!g_we_initialised_mpi)
      std::atexit([] {  // finalized at exit unless the host did
        int done = 0;
        if (MPI_Finalized(&done) == MPI_SUCCESS && !done) MPI_Finalize();
      });
    g_we_initialised_mpi = true;
  }
  seat.initialized_by_host = g_we_initialised_mpi ? 0 : 1;
  MPI_Query_thread(&seat.thread_level);
}

void lend_comm(Seat& seat, MPI_Comm c, const char* who) {
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(c, &dup) != MPI_SUCCESS)
    throw PlanError(PlanFailure::mpi, 1, std::string(who) + ": MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (seat.lent != MPI_COMM_NULL) MPI_Comm_free(&seat.lent);
  seat.lent = dup;
}

void join_world(Seat& seat, const PlanDefaults& d, const Plan* plan, const RecipeLibrary& lib, int* argc,
                char*** argv) {
  // The plan's backend (a --replay'd report's) and deadline (the backend's setup deadline).
  const double deadline_s = world_deadline(d, plan);
  const std::string& backend = plan ? plan->session.backend : d.backend;
  LaunchEnv launch;
  try {
    launch = read_launch_env(d.launcher);
  } catch (const Error& e) {  // this process's own variables: it says so itself, whatever its rank
    throw PlanError(PlanFailure::invalid, static_cast<int>(e.code()), e.what(), PlanPrint::every);
  }
  try {
    join_launcher_world(seat, d, backend, launch, deadline_s, lib, argc, argv);
  } catch (const WorldError& e) {
    throw PlanError(e.input ? PlanFailure::invalid : PlanFailure::backend, static_cast<int>(e.code()), e.what(),
                    e.print_here ? PlanPrint::every : PlanPrint::none);
  }
}

int run_plan(Plan& plan, Seat& seat, const RecipeLibrary& lib) {
  Session& ss = plan.session;
  const int code = seat.world ? run_on_world(plan, seat, lib) : run_over_comm(plan, seat, lib);
  // Refused before anything ran (the recipe does not load, its options are wrong): bad input
  // to the API, not a run.
  if (!ss.report)
    throw PlanError(PlanFailure::invalid, code, ss.last_error.empty() ? "cs_run: bad input" : ss.last_error);
  return code;
}

void leave_seat(Seat& seat) {
  if (seat.world) {
    job::set_control(nullptr);
    seat.world.reset();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && seat.lent != MPI_COMM_NULL) MPI_Comm_free(&seat.lent);
  if (seat.world_mpi) job::finalize();
}

}  // namespace cs
