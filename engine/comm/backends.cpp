// The backend table (backends.hpp, backend_open.hpp): the only file that asks the build which
// backends it has. Each backend is a row of functions; a backend that was not built has a row
// with the reason and no functions.
#include "backends.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

#include "backend_open.hpp"
#include "job.hpp"
#include "mpi_communicator.hpp"
#include "self_communicator.hpp"
#ifdef COMMSCRIPT_HAVE_GLOO
#include "gloo_communicator.hpp"
#endif
#ifdef COMMSCRIPT_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cuda_support.hpp"
#include "gpu_libs.hpp"
#include "nccl_communicator.hpp"
#endif

namespace cs {

namespace {

using World = std::shared_ptr<Communicator>;

struct Backend {
  const char* name;
  const char* why_not;                   // nullptr: built
  nlohmann::json (*describe)();          // its libraries (--version)
  World (*over_comm)(MPI_Comm, double);  // a world over a host's communicator
  // The launcher's world: `ctl` is the Gloo world of a launch without MPI (null under MPI).
  World (*launcher)(std::unique_ptr<Communicator> ctl, const LaunchEnv&, double timeout_s);
  // Beside `world`, over the same ranks; `mpi_world`: world spans MPI_COMM_WORLD.
  std::unique_ptr<Communicator> (*beside)(Communicator& world, bool mpi_world, double timeout_s);
};

// ---- self
nlohmann::json self_describe() { return {{"library", "built-in"}}; }
World self_over(MPI_Comm, double) { return std::make_shared<SelfCommunicator>(); }

// ---- mpi
nlohmann::json mpi_describe() { return {{"library", mpi_library_version()}}; }
World mpi_over(MPI_Comm host, double) { return MpiCommunicator::of(host); }
World mpi_launcher(std::unique_ptr<Communicator>, const LaunchEnv&, double) { return MpiCommunicator::world(); }
std::unique_ptr<Communicator> mpi_beside(Communicator&, bool, double) { return MpiCommunicator::world(); }

// ---- gloo
#ifdef COMMSCRIPT_HAVE_GLOO
nlohmann::json gloo_describe() { return {{"library", "Gloo (TCP transport)"}, {"built", true}}; }
// Over the host's communicator: rank 0 serves the store, the host's MPI tells the others where,
// Gloo's TCP pairs move the data.
World gloo_over(MPI_Comm host, double timeout_s) {
  auto mpi = MpiCommunicator::of(host);
  return GlooCommunicator::over_mpi(*mpi, timeout_s);  // rank 0 draws the job's secret
}
World gloo_launcher(std::unique_ptr<Communicator> ctl, const LaunchEnv&, double timeout_s) {
  if (ctl) return ctl;  // no MPI: the Gloo world at MASTER_ADDR:MASTER_PORT is the world
  try {                 // MPI launches and tells the ranks where rank 0's store is; Gloo moves the data
    return GlooCommunicator::world_over_mpi(timeout_s);
  } catch (const Error& e) {
    job::abort(e.code(), "commscript: rank " + std::to_string(job::world_rank()) + ": --backend gloo: " + e.what());
  }
}
std::unique_ptr<Communicator> gloo_beside(Communicator& world, bool, double timeout_s) {
  // A Gloo world gives a fresh context over its own store (split keeps every rank in order);
  // otherwise rank 0 serves a new store and MPI says where.
  if (auto* g = dynamic_cast<GlooCommunicator*>(&world)) return g->split(0, g->rank());
  return GlooCommunicator::world_over_mpi(timeout_s);
}
constexpr Backend kGloo{"gloo", nullptr, gloo_describe, gloo_over, gloo_launcher, gloo_beside};
#else
constexpr Backend kGloo{"gloo", "built without Gloo (libgloo-dev)", nullptr, nullptr, nullptr, nullptr};
#endif

// ---- nccl
#ifdef COMMSCRIPT_HAVE_NCCL
nlohmann::json nccl_describe() {
  int nccl = 0;
  ncclGetVersion(&nccl);
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  const cudaError_t derr = cudaDriverGetVersion(&drv);
  nlohmann::json b = {
      {"header", std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH)},
      {"library", nccl_version_string(nccl)},
      {"cuda_runtime", cuda_version_text(rt)},
      {"cuda_driver", derr == cudaSuccess && drv > 0 ? cuda_version_text(drv) : std::string("none (no driver)")},
      {"built", true}};
  // The libraries are opened at run time: which ones, or why not; and whether they are the
  // test stand-in (a run on it measured no GPU).
  const GpuLib &rl = cudart_lib(), &nl = nccl_lib();
  if (!nl.loaded) b["library"] = "not loaded: " + nl.why;
  if (!rl.loaded) b["cuda_runtime"] = "not loaded: " + rl.why;
  b["library_path"] = nl.path;
  b["cuda_runtime_path"] = rl.path;
  b["fake"] = nl.fake || rl.fake;
  return b;
}
World nccl_over(MPI_Comm host, double timeout_s) {
  return NcclCommunicator::create(MpiCommunicator::of(host), "world", timeout_s);
}
// The GPU is chosen before MPI_Init (CUDA-aware MPI and NCCL start on it).
void nccl_choose_device() {
  bool print = false;
  if (const std::string refused = NcclCommunicator::choose_device_before_mpi(&print); !refused.empty()) {
    // Before MPI_Init a rank's non-zero exit makes mpirun end the others at once, and the
    // rank that says why (local rank 0) can be killed before its words reach the launcher:
    // the silent ranks leave a moment later.
    if (!print) std::this_thread::sleep_for(std::chrono::seconds(2));
    throw WorldError(true, ExitCode::bad_input, refused, print);
  }
}
World nccl_launcher(std::unique_ptr<Communicator> ctl, const LaunchEnv& launch, double timeout_s) {
  if (ctl) {  // no MPI: the Gloo world is the control plane (the unique id, agreements, gathering)
    try {     // every rank throws the same agreed error: rank 0 says it
      return NcclCommunicator::create(std::move(ctl), "world", timeout_s);
    } catch (const Error& e) {
      throw WorldError(false, e.code(), e.what(), launch.rank == 0);
    }
  }
  // MPI stays the launcher and the control plane (unique id, result gathering); NCCL moves the
  // data between the GPUs. The ranks agree on a failure before any of them throws, so every rank
  // ends here with the same error and rank 0 says it once.
  try {
    return NcclCommunicator::world(timeout_s);
  } catch (const Error& e) {
    if (job::world_rank() == 0) std::fprintf(stderr, "commscript: %s\n", e.what());
    job::finalize();
    throw WorldError(false, e.code(), e.what(), false);
  } catch (const std::exception& e) {  // not agreed on: end every rank
    job::abort(ExitCode::internal,
               "commscript: rank " + std::to_string(job::world_rank()) + ": --backend nccl: " + e.what());
  }
}
std::unique_ptr<Communicator> nccl_beside(Communicator& world, bool mpi_world, double timeout_s) {
  if (mpi_world) return NcclCommunicator::world(timeout_s);
  // the unique id travels over a Gloo context of the same ranks
  return NcclCommunicator::create(world.split(0, world.rank()), "nccl", timeout_s);
}
constexpr Backend kNccl{"nccl", nullptr, nccl_describe, nccl_over, nccl_launcher, nccl_beside};
#else
void nccl_choose_device() {}
constexpr Backend kNccl{"nccl", "built without CUDA/NCCL", nullptr, nullptr, nullptr, nullptr};
#endif

constexpr Backend kTable[] = {
    {"self", nullptr, self_describe, self_over, nullptr, nullptr},
    {"mpi", nullptr, mpi_describe, mpi_over, mpi_launcher, mpi_beside},
    kGloo,
    kNccl,
};

const Backend* find(const std::string& name) {
  for (const auto& b : kTable)
    if (name == b.name) return &b;
  return nullptr;
}

bool built(const char* name) {
  const Backend* b = find(name);
  return b && !b->why_not;
}

// The names of the rows, ", "-separated; `beside`: only those that open beside a world.
std::string names(bool beside) {
  std::string out;
  for (const auto& b : kTable)
    if (!beside || std::string(b.name) != "self") out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

// The long form of a row's reason (the command line's and the C API's messages).
std::string why_long(const Backend& b) { return std::string("this commscript was ") + b.why_not; }

bool mpi_world(const Communicator& world) {
  // Under mpirun the world spans MPI_COMM_WORLD; embedded in a host that lent a smaller
  // communicator it does not, and a collective over MPI_COMM_WORLD would wait for ranks that
  // never call it.
  return job::mpi_active() && world.size() == job::world_size();
}

}  // namespace

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& b : kTable) v.emplace_back(b.name);
    return v;
  }();
  return names;
}

bool backend_built(const std::string& name, std::string* why) {
  const Backend* b = find(name);
  if (!b) return *why = "backend '" + name + "' is none of " + names(false), false;
  if (b->why_not) return *why = "backend " + name + ": " + why_long(*b), false;
  return true;
}

std::string resolve_backend(const std::optional<std::string>& given, const std::optional<std::string>& replayed,
                            const std::string& replay_file) {
  const std::string name = given ? *given : replayed ? *replayed : "mpi";
  if (std::string why; !backend_built(name, &why))
    throw InputError(given || !replayed ? why : "replay " + replay_file + ": " + why);
  return name;
}

nlohmann::json backend_versions() {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& b : kTable)
    j[b.name] = b.why_not ? nlohmann::json{{"built", false}, {"why", b.why_not}} : b.describe();
  return j;
}

void check_launch(const std::string& b, const LaunchEnv& launch) {
  if (launch.kind == "mpi") return;
  const bool print = job::launcher_rank() <= 0;
  if (b != "gloo" && b != "nccl" && !(b == "self" && launch.size == 1))
    throw WorldError(true, ExitCode::bad_input,
                     "--launcher " + launch.kind +
                         " starts ranks without MPI: only --backend gloo runs that way, and --backend nccl over "
                         "Gloo (got --backend " +
                         b + ")",
                     print);
  if (b == "nccl" && !built("gloo"))
    throw WorldError(true, ExitCode::bad_input,
                     "--backend nccl --launcher " + launch.kind +
                         ": without MPI the NCCL backend's control plane is Gloo, and this commscript was built "
                         "without it (libgloo-dev)",
                     print);
}

std::shared_ptr<Communicator> launcher_world(const std::string& name, const LaunchEnv& launch, double timeout_s,
                                             int* argc, char*** argv, bool* mpi_started) {
  *mpi_started = false;
  const Backend* b = find(name);
  if (!b || b->why_not) throw Error(ExitCode::internal, "no world for backend " + name);
  if (name == "self") return std::make_shared<SelfCommunicator>();
  std::unique_ptr<Communicator> ctl;
  if (launch.kind != "mpi") {
#ifdef COMMSCRIPT_HAVE_GLOO
    // No MPI at all: rank 0 serves the store at MASTER_ADDR:MASTER_PORT, the others dial it.
    // Under nccl, that Gloo communicator is the control plane and survives a dropped rank with it.
    try {
      ctl = GlooCommunicator::world_at(launch.master_addr, launch.master_port, launch.rank, launch.size, timeout_s,
                                       launch.token);  // the job token: docs/security.md
    } catch (const Error& e) {
      throw WorldError(false, e.code(),
                       "rank " + std::to_string(launch.rank) + ": --backend " + name + " --launcher " + launch.kind +
                           ": " + e.what(),
                       true);
    }
#endif
    if (name == "nccl") nccl_choose_device();
  } else {
    if (name == "nccl") nccl_choose_device();  // before MPI_Init: CUDA-aware MPI and NCCL start on it
    job::init_mpi(argc, argv);
    *mpi_started = true;
  }
  const bool plane = ctl != nullptr;
  World w;
  try {
    w = b->launcher(std::move(ctl), launch, timeout_s);
  } catch (const WorldError&) {  // the backend ended MPI before it threw
    *mpi_started = false;
    throw;
  }
  if (plane) job::set_control(w.get());
  return w;
}

std::shared_ptr<Communicator> world_over_comm(const std::string& name, MPI_Comm host, double timeout_s) {
  const Backend* b = find(name);
  if (!b || b->why_not) return MpiCommunicator::of(host);
  return b->over_comm(host, timeout_s);
}

// ---- backend_open.hpp: a world beside another

std::vector<std::string> backends_available(const Communicator& world) {
  std::vector<std::string> out;
  const bool on_mpi = mpi_world(world);
  for (const auto& b : kTable) {
    if (!b.beside || b.why_not) continue;
    if (std::string(b.name) == "mpi" ? on_mpi : on_mpi || world.backend() == "gloo") out.emplace_back(b.name);
  }
  return out;
}

std::unique_ptr<Communicator> open_backend(const std::string& name, Communicator& world, double timeout_s) {
  const auto avail = backends_available(world);
  bool known = false;
  for (const auto& b : avail) known = known || b == name;
  if (!known) {
    const Backend* b = find(name);
    std::string why;
    if (!b || name == "self")
      why = "not a backend (" + names(true) + ")";
    else if (b->why_not)
      why = why_long(*b);
    else if (name != "mpi")
      why = "the ranks were not started by mpirun and the world is not gloo";
    else
      why = job::mpi_active() ? "the world communicator is not MPI_COMM_WORLD (an embedded run)"
                              : "the ranks were not started by mpirun (--launcher " + std::string("env/slurm)");
    throw InputError("opening backend '" + name + "' beside --backend " + world.backend() + ": " + why);
  }
  std::unique_ptr<Communicator> c = find(name)->beside(world, mpi_world(world), timeout_s);
  if (!c || c->size() != world.size() || c->rank() != world.rank())
    throw Error(ExitCode::internal, "opening backend '" + name + "': rank " + std::to_string(world.rank()) +
                                        " of the world became rank " + std::to_string(c ? c->rank() : -1) + " of " +
                                        std::to_string(c ? c->size() : 0));
  c->set_timeout(timeout_s);
  c->set_verify(world.verifying());
  return c;
}

}  // namespace cs
