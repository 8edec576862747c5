#include "backend_open.hpp"

#include "job.hpp"
#include "mpi_communicator.hpp"
#ifdef COMMSCRIPT_HAVE_GLOO
#include "gloo_communicator.hpp"
#endif
#ifdef COMMSCRIPT_HAVE_NCCL
#include "nccl_communicator.hpp"
#endif

namespace cs {

namespace {

bool mpi_world(const Communicator& world) {
  // Under mpirun the world spans MPI_COMM_WORLD; embedded in a host that lent a smaller
  // communicator it does not, and a collective over MPI_COMM_WORLD would wait for ranks that
  // never call it.
  return job::mpi_active() && world.size() == job::world_size();
}

}  // namespace

std::vector<std::string> backends_available(const Communicator& world) {
  std::vector<std::string> out;
  if (mpi_world(world)) out.emplace_back("mpi");
#ifdef COMMSCRIPT_HAVE_GLOO
  if (mpi_world(world) || world.backend() == "gloo") out.emplace_back("gloo");
#endif
#ifdef COMMSCRIPT_HAVE_NCCL
  if (mpi_world(world) || world.backend() == "gloo") out.emplace_back("nccl");
#endif
  return out;
}

std::unique_ptr<Communicator> open_backend(const std::string& name, Communicator& world, double timeout_s) {
  const auto avail = backends_available(world);
  bool known = false;
  for (const auto& b : avail) known = known || b == name;
  if (!known) {
    std::string why;
    if (name != "mpi" && name != "gloo" && name != "nccl")
      why = "not a backend (mpi, gloo, nccl)";
    else if (name == "gloo" || name == "nccl") {
#ifndef COMMSCRIPT_HAVE_GLOO
      if (name == "gloo") why = "this commscript was built without Gloo (libgloo-dev)";
#endif
#ifndef COMMSCRIPT_HAVE_NCCL
      if (name == "nccl") why = "this commscript was built without CUDA/NCCL";
#endif
      if (why.empty()) why = "the ranks were not started by mpirun and the world is not gloo";
    } else
      why = job::mpi_active() ? "the world communicator is not MPI_COMM_WORLD (an embedded run)"
                              : "the ranks were not started by mpirun (--launcher " + std::string("env/slurm)");
    throw InputError("opening backend '" + name + "' beside --backend " + world.backend() + ": " + why);
  }
  std::unique_ptr<Communicator> c;
  if (name == "mpi") {
    c = MpiCommunicator::world();
  }
#ifdef COMMSCRIPT_HAVE_GLOO
  else if (name == "gloo") {
    // A Gloo world gives a fresh context over its own store (split keeps every rank in order);
    // otherwise rank 0 serves a new store and MPI says where.
    if (auto* g = dynamic_cast<GlooCommunicator*>(&world))
      c = g->split(0, g->rank());
    else
      c = GlooCommunicator::world_over_mpi(timeout_s);
  }
#endif
#ifdef COMMSCRIPT_HAVE_NCCL
  else if (name == "nccl") {
    if (mpi_world(world))
      c = NcclCommunicator::world(timeout_s);
    else  // the unique id travels over a Gloo context of the same ranks
      c = NcclCommunicator::create(world.split(0, world.rank()), "nccl", timeout_s);
  }
#endif
  if (!c || c->size() != world.size() || c->rank() != world.rank())
    throw Error(ExitCode::internal, "opening backend '" + name + "': rank " + std::to_string(world.rank()) +
                                        " of the world became rank " + std::to_string(c ? c->rank() : -1) + " of " +
                                        std::to_string(c ? c->size() : 0));
  c->set_timeout(timeout_s);
  c->set_verify(world.verifying());
  return c;
}

}  // namespace cs
