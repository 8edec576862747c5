#pragma once
// The backends of this build, in one table (backends.cpp): per backend whether it was built and
// why not, what its libraries are (--version), the launcher's world on it, a world over a host
// program's MPI_Comm (embedding), and a communicator of it beside another world (backend_open.hpp).
// Nothing outside backends.cpp asks the build which backends it has.
#include <mpi.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "communicator.hpp"
#include "error.hpp"
#include "launch_env.hpp"

namespace cs {

// Every backend commscript knows, built or not, in the order self, mpi, gloo, nccl.
const std::vector<std::string>& backend_names();

// Whether `name` is a backend of this build; otherwise false and *why ("backend nccl: this
// commscript was built without CUDA/NCCL", "backend 'x' is none of mpi, gloo, nccl, self").
bool backend_built(const std::string& name, std::string* why);

// The run's backend, resolved once: the one the host gave, else a replayed report's, else mpi.
// InputError when it is not built ("backend nccl: this commscript was built without CUDA/NCCL";
// a replayed report's prefixed "replay FILE: ").
std::string resolve_backend(const std::optional<std::string>& given, const std::optional<std::string>& replayed,
                            const std::string& replay_file);

// Per backend: {"library": ... and the backend's own facts}, or {"built": false, "why": ...}.
nlohmann::json backend_versions();

// A world that could not be set up: the exit code, the message, whether this rank prints it, and
// whether it was the caller's input (CS_E_INVALID) or the backend failing (CS_E_BACKEND).
class WorldError : public Error {
 public:
  WorldError(bool is_input, ExitCode code, const std::string& msg, bool prints)
      : Error(code, msg), input(is_input), print_here(prints) {}
  bool input, print_here;
};

// Refuses, before anything starts, a backend that cannot run under `launch` (a WorldError with
// input set, printed by the launcher's rank 0).
void check_launch(const std::string& backend, const LaunchEnv& launch);

// The launcher's world on `backend` for a process that owns itself (the command line) or, without
// MPI (--launcher env/slurm, self), for any caller: initialises MPI when the backend needs it
// (*mpi_started then true: the caller finalizes it). Throws WorldError (after MPI started: MPI
// has been finalized again and *mpi_started is false), or ends the job where the ranks cannot
// agree on the failure.
std::shared_ptr<Communicator> launcher_world(const std::string& backend, const LaunchEnv& launch, double timeout_s,
                                             int* argc, char*** argv, bool* mpi_started);

// The world of an embedded run over the host's communicator, on `backend` (Error on a failure).
std::shared_ptr<Communicator> world_over_comm(const std::string& backend, MPI_Comm host, double timeout_s);

}  // namespace cs
