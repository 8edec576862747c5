#pragma once
// The process-level side of a run: MPI start and end, which rank this is before MPI exists,
// agreement between ranks on an outcome, and bringing the whole job down with one message.
#include <mpi.h>

#include <string>
#include <vector>

#include "error.hpp"

namespace cs {
class Communicator;
}

namespace cs::job {

// MPI_Init_thread (single: only the main thread calls MPI). After this, world_rank/world_size are MPI's.
void init_mpi(int* argc, char*** argv);
bool mpi_active();
int world_rank();
int world_size();
void finalize();

// Embedding (libcommscript): the host started MPI; the job's control traffic (agreement, the
// report's broadcast) runs on a duplicate of `comm`, the communicator the host lent. detach()
// frees that duplicate and leaves MPI as the host had it.
void attach(MPI_Comm comm);
void detach();
// Rank and size within the control communicator (the world, or the host's communicator).
int ctrl_rank();
int ctrl_size();
// Rank 0's string on every rank of the control communicator (a collective).
std::string broadcast_from_root(const std::string& s);
// Every rank's string, by rank (a collective on the control communicator).
std::vector<std::string> allgather_strings(const std::string& s);

// Cancellation of an embedded run (which must return to its host instead of ending the
// process): the first failure's exit code, set from any thread (the heartbeat client hearing
// the coordinator, the watchdog); polled waits and injected hangs give up when it is set.
void request_cancel(int code);
int cancel_code();  // 0: not cancelled
void clear_cancel();
// Without MPI (--launcher env/slurm): the communicator that the agreements below
// (lowest_failing_rank, agree_max) and world_rank/world_size use instead. nullptr: none.
void set_control(Communicator* c);

// The rank the launcher gave this process (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
// SLURM_PROCID), or -1. Lets ranks decide who prints before MPI is initialised.
int launcher_rank();
// The number of processes the launcher started (1 when none says).
int launcher_size();

// The lowest world rank for which `failed` is true, or -1 if none (a collective).
int lowest_failing_rank(bool failed);
// The maximum of v over all ranks (a collective).
int agree_max(int v);

// Ends the whole job with `code`. The message is printed once even when several ranks fail at
// the same time: the failing rank tells the others out of band and the lowest one prints. Does
// not wait for ranks stuck in a collective: MPI_Abort brings them down.
[[noreturn]] void abort(ExitCode code, const std::string& message);

// Called with the message just before the process ends through abort() (to flush reports).
void set_before_abort(void (*hook)(ExitCode code, const std::string& message));

}  // namespace cs::job
