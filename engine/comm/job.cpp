#include "job.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "communicator.hpp"
#include "host_name.hpp"

namespace cs::job {

namespace {
bool g_mpi = false;
MPI_Comm g_ctrl = MPI_COMM_NULL;  // out-of-band messages between ranks
constexpr int kTagAbort = 7001;
// abort(): how long a rank other than 0 listens for a lower rank that failed at the same moment
// (the lowest one prints), and how long a rank that leaves the printing to a lower one waits
// before MPI_Abort, so that the lower rank's message is out first.
constexpr auto kAbortListen = std::chrono::milliseconds(500);
constexpr auto kAbortLetLowerPrint = std::chrono::milliseconds(1000);
void (*g_before_abort)(ExitCode, const std::string&) = nullptr;
std::atomic<int> g_cancel{0};
Communicator* g_control = nullptr;  // without MPI
}  // namespace

void set_control(Communicator* c) { g_control = c; }

void attach(MPI_Comm comm) {
  MPI_Comm_dup(comm, &g_ctrl);
  MPI_Comm_set_errhandler(g_ctrl, MPI_ERRORS_RETURN);
  g_mpi = true;
}

void detach() {
  if (g_ctrl != MPI_COMM_NULL) MPI_Comm_free(&g_ctrl);
  g_ctrl = MPI_COMM_NULL;
  g_mpi = false;
}

int ctrl_rank() {
  if (!g_mpi || g_ctrl == MPI_COMM_NULL) return 0;
  int r = 0;
  MPI_Comm_rank(g_ctrl, &r);
  return r;
}

int ctrl_size() {
  if (!g_mpi || g_ctrl == MPI_COMM_NULL) return 1;
  int n = 1;
  MPI_Comm_size(g_ctrl, &n);
  return n;
}

std::string broadcast_from_root(const std::string& s) {
  if (!g_mpi && g_control && g_control->size() > 1) return g_control->broadcast(s, 0);  // without MPI
  if (!g_mpi || g_ctrl == MPI_COMM_NULL) return s;
  unsigned long long n = s.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, g_ctrl);
  std::string out = ctrl_rank() == 0 ? s : std::string(static_cast<size_t>(n), '\0');
  for (size_t off = 0; off < out.size();) {  // in pieces: MPI counts are int
    const int chunk = static_cast<int>(std::min<size_t>(out.size() - off, 1u << 30));
    MPI_Bcast(out.data() + off, chunk, MPI_CHAR, 0, g_ctrl);
    off += static_cast<size_t>(chunk);
  }
  return out;
}

std::vector<std::string> allgather_strings(const std::string& s) {
  if (!g_mpi || g_ctrl == MPI_COMM_NULL) return {s};
  const int n = ctrl_size();
  int len = static_cast<int>(s.size());
  std::vector<int> lens(static_cast<size_t>(n)), offs(static_cast<size_t>(n));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, g_ctrl);
  int total = 0;
  for (int r = 0; r < n; ++r) {
    offs[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, g_ctrl);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<size_t>(offs[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

void request_cancel(int code) {
  int none = 0;
  g_cancel.compare_exchange_strong(none, code > 0 ? code : static_cast<int>(ExitCode::runtime));
}

int cancel_code() { return g_cancel.load(std::memory_order_relaxed); }

void clear_cancel() { g_cancel = 0; }

void init_mpi(int* argc, char*** argv) {
  // MPI_THREAD_SINGLE, as osu_* and nccl-tests initialise: only this (the main) thread ever
  // calls MPI; the watchdog, heartbeat, coordinator and signal threads never do. Asking for
  // FUNNELED made Open MPI 4.1 lock a mutex in every shared-memory send: +0.09 us on each 8 B
  // all-reduce at 2 ranks (0.49 -> 0.58 us, a plain loop either way; docs/timing.md).
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_ctrl);
  MPI_Comm_set_errhandler(g_ctrl, MPI_ERRORS_RETURN);
  g_mpi = true;
}

bool mpi_active() { return g_mpi; }

int world_rank() {
  if (!g_mpi) return g_control ? g_control->rank() : 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  if (!g_mpi) return g_control ? g_control->size() : 1;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void finalize() {
  if (!g_mpi) return;
  if (g_ctrl != MPI_COMM_NULL) MPI_Comm_free(&g_ctrl);
  MPI_Finalize();
  g_mpi = false;
}

int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return -1;
}

int launcher_size() {
  if (launcher_rank() < 0) return 1;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "WORLD_SIZE"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return 1;
}

int lowest_failing_rank(bool failed) {
  if (!g_mpi && g_control && g_control->size() > 1) {
    int low = -1;
    const auto all = g_control->allgather(failed ? 1.0 : 0.0);
    for (size_t r = all.size(); r-- > 0;)
      if (all[r] != 0) low = static_cast<int>(r);
    return low;
  }
  if (!g_mpi) return failed ? 0 : -1;
  const int n = ctrl_size();
  int mine = failed ? ctrl_rank() : n, low = n;
  MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, g_ctrl);
  return low == n ? -1 : low;
}

int agree_max(int v) {
  if (!g_mpi && g_control && g_control->size() > 1) {
    int out = v;
    for (double x : g_control->allgather(static_cast<double>(v))) out = std::max(out, static_cast<int>(x));
    return out;
  }
  if (!g_mpi) return v;
  int out = v;
  MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, g_ctrl);
  return out;
}

void set_before_abort(void (*hook)(ExitCode, const std::string&)) { g_before_abort = hook; }

void abort(ExitCode code, const std::string& message) {
  bool print = true;
  if (g_mpi && world_size() > 1) {
    const int me = world_rank(), n = world_size();
    // Tell everyone (never wait for these sends: a peer may be stuck), then give lower ranks
    // that failed at the same moment a short while to say so; the lowest one prints.
    std::vector<MPI_Request> reqs(static_cast<size_t>(n), MPI_REQUEST_NULL);
    for (int r = 0; r < n; ++r)
      if (r != me) MPI_Issend(&me, 1, MPI_INT, r, kTagAbort, g_ctrl, &reqs[static_cast<size_t>(r)]);
    if (me != 0) {
      const int64_t until = deadline_ns(kAbortListen);
      while (print && now_ns() < until) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, kTagAbort, g_ctrl, &flag, &st);
        if (flag) {
          int from = 0;
          MPI_Recv(&from, 1, MPI_INT, st.MPI_SOURCE, kTagAbort, g_ctrl, MPI_STATUS_IGNORE);
          if (from < me) print = false;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      }
    }
  }
  if (print) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
  }
  std::fflush(stdout);
  if (g_before_abort) g_before_abort(code, message);
  // A lower rank prints the message: MPI_Abort from here would end it first.
  if (!print) std::this_thread::sleep_for(kAbortLetLowerPrint);
  if (g_mpi) MPI_Abort(MPI_COMM_WORLD, static_cast<int>(code));
  std::_Exit(static_cast<int>(code));
}

}  // namespace cs::job
