#include "nccl_communicator.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cuda_device.hpp"
#include "elementwise.hpp"
#include "error.hpp"
#include "gpu_libs.hpp"
#include "host_name.hpp"
#include "int_list.hpp"
#include "job.hpp"
#include "mpi_communicator.hpp"
#include "poll_wait.hpp"
#include "size.hpp"

namespace cs {

// ---- the parts that need no device ----

void check_nccl_versions(const std::vector<int>& code_by_rank) {
  std::map<int, std::vector<int>> by_code;
  for (size_t r = 0; r < code_by_rank.size(); ++r) by_code[code_by_rank[r]].push_back(static_cast<int>(r));
  if (by_code.size() <= 1) return;
  // The most common version first: the odd ones out are what the user looks for.
  std::vector<std::pair<int, std::vector<int>>> groups(by_code.begin(), by_code.end());
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string list;
  for (const auto& [code, ranks] : groups)
    list += (list.empty() ? "" : "; ") + nccl_version_string(code) + " on rank" + (ranks.size() > 1 ? "s " : " ") +
            format_int_ranges(ranks);
  throw InputError("--backend nccl: the ranks loaded different NCCL libraries: " + list +
                   " (every rank must load the same libnccl: check LD_LIBRARY_PATH and the installs on each host)");
}

int local_rank(const std::vector<std::string>& hosts, int rank) {
  int local = 0;
  for (int r = 0; r < rank && r < static_cast<int>(hosts.size()); ++r)
    local += hosts[static_cast<size_t>(r)] == hosts[static_cast<size_t>(rank)];
  return local;
}

int choose_device(int local, int count, const char* env, const std::string& host, int rank) {
  if (env && *env) {
    const std::string_view v(env);
    const bool digits =
        v.size() <= 6 && std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    const long d = digits ? std::strtol(env, nullptr, 10) : -1;
    if (d < 0 || d >= count)
      throw InputError("--backend nccl: COMMSCRIPT_DEVICE='" + std::string(env) + "' on rank " + std::to_string(rank) +
                       " (host " + host + ") is not a device index: this rank sees " + std::to_string(count) +
                       " device" + (count == 1 ? "" : "s") + " (0.." + std::to_string(count - 1) + ")");
    return static_cast<int>(d);
  }
  return count > 0 ? local % count : 0;
}

void check_nccl_buffers(const Op& op, int rank, int device, const std::string& comm_name, const BufferPlace& send,
                        const BufferPlace& recv) {
  const bool root = rank == op.root;
  const Collective c = op.coll;
  const bool uses_send = c != Collective::recv && c != Collective::barrier && (c != Collective::scatter || root);
  const bool uses_recv = c != Collective::send && c != Collective::barrier &&
                         ((c != Collective::gather && c != Collective::reduce) || root);
  auto judge = [&](const BufferPlace& p, const char* which) {
    if (p.managed || (p.where == MemLocation::device && p.device == device)) return;
    const std::string w =
        std::string(collective_name(c)) + " on communicator '" + comm_name + "': the " + which + " buffer ";
    if (p.where == MemLocation::device)
      throw UsageError(w + "is on GPU " + std::to_string(p.device) + ", but this rank's NCCL communicator uses GPU " +
                       std::to_string(device));
    throw UsageError(w + "is in " + (p.where == MemLocation::pinned ? "pinned host" : "host") +
                     " memory; --backend nccl needs buffers on the rank's GPU (comm:bench allocates them there)");
  };
  if (uses_send) judge(send, "send");
  if (uses_recv) judge(recv, "receive");
}

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::int8:
      return ncclInt8;
    case DType::uint8:
      return ncclUint8;
    case DType::int32:
      return ncclInt32;
    case DType::uint32:
      return ncclUint32;
    case DType::int64:
      return ncclInt64;
    case DType::uint64:
      return ncclUint64;
    case DType::float32:
      return ncclFloat32;
    case DType::float64:
      return ncclFloat64;
    case DType::float16:
      return ncclFloat16;
    case DType::bfloat16:
      return ncclBfloat16;  // NCCL >= 2.10, older than the oldest version accepted
  }
  return ncclUint8;
}

ncclRedOp_t nccl_redop(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::prod:
      return ncclProd;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::avg:
      return ncclAvg;
  }
  return ncclSum;
}

// ---- the communicator ----

namespace {

std::mutex g_ras_mu;
NcclCommunicator::RasProbe g_ras_probe;

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += " (" + std::string(last) + ")";
  return s;
}

BufferPlace place_of(const void* p) {
  BufferPlace b;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return b;
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
      b.where = MemLocation::device;
      b.device = a.device;
      break;
    case cudaMemoryTypeManaged:
      b.where = MemLocation::device;
      b.device = a.device;
      b.managed = true;
      break;
    case cudaMemoryTypeHost:
      b.where = MemLocation::pinned;
      break;
    default:
      break;
  }
  return b;
}

// Every rank passes its error ("" for none); all of them throw the lowest failing rank's.
void agree(Communicator& ctl, const std::string& mine, ExitCode code, const std::vector<std::string>& hosts) {
  const auto all = ctl.allgather(std::to_string(static_cast<int>(code)) + ":" + mine);
  for (size_t r = 0; r < all.size(); ++r) {
    const size_t colon = all[r].find(':');
    if (colon + 1 >= all[r].size()) continue;
    throw Error(static_cast<ExitCode>(std::atoi(all[r].c_str())), "--backend nccl: rank " + std::to_string(r) +
                                                                      " (host " + (r < hosts.size() ? hosts[r] : "?") +
                                                                      "): " + all[r].substr(colon + 1));
  }
}

// NCCL keeps config.commName by pointer and reads it later, on its own threads (init.cc
// parseCommConfig: `comm->config.commName = internalConfigPtr->commName`; the profiler plugin's
// init): the names live as long as the process.
const char* stable_name(const std::string& s) {
  static std::mutex mu;
  static auto* names = new std::set<std::string>;
  std::lock_guard<std::mutex> g(mu);
  return names->insert(s).first->c_str();
}

// NCCL_COMM_SPLIT_SHARE_RESOURCES=0 overrides config.splitShare (init.cc envConfigOverride).
bool split_share_on() {
  const char* e = std::getenv("NCCL_COMM_SPLIT_SHARE_RESOURCES");
  return !(e && std::string_view(e) == "0");
}

// NCCL 2.19 made the background job per communicator, joined by ncclCommAbort (group.cc
// ncclGroupJobAbort): from then on nothing writes a split's child slot after the abort returns.
bool abort_joins_job() { return nccl_lib().version >= 21900; }

}  // namespace

// Communicators that share NCCL's abort flag: a split of a communicator created with
// splitShare = 1 (init.cc ncclCommInitChildComm: `childComm->abortFlag = comm->abortFlag`). An
// abort of one of them aborts them all inside NCCL, so all of them are unusable from then on.
struct NcclFamily {
  std::mutex mu;
  bool aborted = false;
  std::string why;
};

// One blocking NCCL call on a timed twin, watched by the monitor thread: past its deadline the
// monitor aborts `victim` (the twin's non-blocking parent, which shares its abort flag), so that
// NCCL's host-side wait inside the call (lazy connection setup, the work FIFO) ends.
struct NcclGuard {
  enum : int { idle = 0, inside = 1, firing = 2, fired = 3 };
  std::atomic<int> state{idle};
  std::atomic<int64_t> deadline_ns{0};
  std::atomic<ncclComm_t> victim{nullptr};
};

namespace {

class GuardMonitor {
 public:
  static GuardMonitor& get() {
    static auto* m = new GuardMonitor;  // never destroyed: its thread may outlive static destruction
    return *m;
  }
  void add(const std::shared_ptr<NcclGuard>& g) {
    std::lock_guard<std::mutex> l(mu_);
    guards_.push_back(g);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  void remove(const NcclGuard* g) {
    std::lock_guard<std::mutex> l(mu_);
    guards_.erase(std::remove_if(guards_.begin(), guards_.end(), [&](const auto& x) { return x.get() == g; }),
                  guards_.end());
  }

 private:
  void loop() {
    for (;;) {
      const timespec ts{0, 20000000};
      nanosleep(&ts, nullptr);
      std::vector<std::shared_ptr<NcclGuard>> now;
      {
        std::lock_guard<std::mutex> l(mu_);
        now = guards_;
      }
      const int64_t t = now_ns();
      for (const auto& g : now) {
        if (g->state.load(std::memory_order_acquire) != NcclGuard::inside || t < g->deadline_ns.load()) continue;
        int expected = NcclGuard::inside;
        if (!g->state.compare_exchange_strong(expected, NcclGuard::firing)) continue;
        if (ncclComm_t v = g->victim.load()) ncclCommAbort(v);
        g->state.store(NcclGuard::fired, std::memory_order_release);
      }
    }
  }
  std::mutex mu_;
  std::vector<std::shared_ptr<NcclGuard>> guards_;
  std::thread thread_;
};

}  // namespace

void NcclCommunicator::set_ras_probe(RasProbe probe) {
  std::lock_guard<std::mutex> g(g_ras_mu);
  g_ras_probe = std::move(probe);
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> control, std::string name, int device)
    : Communicator(std::move(name)),
      ctrl_(std::move(control)),
      family_(std::make_shared<NcclFamily>()),
      guard_(std::make_shared<NcclGuard>()),
      device_(device) {
  GuardMonitor::get().add(guard_);
  rank_ = ctrl_->rank();
  size_ = ctrl_->size();
  const char* t = std::getenv("COMMSCRIPT_TIMING");
  event_timing_ = !(t && std::string_view(t) == "host");
}

void NcclCommunicator::setup() {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cuda_check(cudaEventCreate(&ev_start_), "cudaEventCreate");
  cuda_check(cudaEventCreate(&ev_end_), "cudaEventCreate");
  cuda_check(cudaMalloc(&barrier_buf_, 8), "cudaMalloc");
  cuda_check(cudaMemset(barrier_buf_, 0, 8), "cudaMemset");
}

NcclCommunicator::~NcclCommunicator() {
  teardown();
  GuardMonitor::get().remove(guard_.get());
  if (scratch_) cudaFree(scratch_);
  if (barrier_buf_) cudaFree(barrier_buf_);
  if (ev_end_) cudaEventDestroy(ev_end_);
  if (ev_start_) cudaEventDestroy(ev_start_);
  if (stream_) cudaStreamDestroy(stream_);
}

// Ends both NCCL communicators within a deadline in every state. Healthy: the twin is destroyed
// under the guard (ncclCommDestroy is always blocking: init.cc commReclaim waits for the streams;
// past the deadline the monitor aborts comm_, whose abort flag the twin shares), then comm_ is
// finalized without blocking and polled (ncclCommFinalize is refused unless comm_ is ready:
// init.cc ncclCommEnsureReady), then destroyed. Revoked, failed, busy or late: ncclCommAbort,
// which never waits for a peer.
void NcclCommunicator::teardown() {
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 10.0;
  bool healthy = !revoked_;
  {
    std::lock_guard<std::mutex> g(family_->mu);
    healthy = healthy && !family_->aborted;
  }
  if (healthy && timed_) {
    bool fired = false;
    const ncclResult_t r = guarded(
        limit, [&] { return ncclCommDestroy(timed_); }, &fired);
    if (r != ncclSuccess && !fired) ncclCommAbort(timed_);  // refused: not freed
    timed_ = nullptr;
    healthy = !fired;
  }
  if (!healthy || !comm_) {
    abort_comm();
    return;
  }
  ncclResult_t r = ncclCommFinalize(comm_);
  const int64_t t0 = now_ns();
  for (unsigned polls = 0; r == ncclInProgress; ++polls) {
    if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) break;
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (r != ncclInProgress || waited > limit) break;
    pause_poll(waited, polls);
  }
  if (r == ncclSuccess && ncclCommDestroy(comm_) == ncclSuccess)
    comm_ = nullptr;
  else
    abort_comm();
}

std::string NcclCommunicator::choose_device_before_mpi(bool* print) {
  *print = false;
  const CudaProbe probe = cuda_probe();
  if (probe.count <= 0) return "";  // world() refuses it, every rank agreeing, after MPI_Init
  const LauncherLocal local = launcher_local([](const char* v) -> const char* { return std::getenv(v); });
  int dev = -1;
  try {
    dev = early_device(local, probe.count, std::getenv("COMMSCRIPT_DEVICE"), host_name());
  } catch (const Error& e) {
    *print = local.size > 0 ? local.rank == 0 : true;
    return e.what();
  }
  if (dev < 0) return "";
  if (cudaSetDevice(dev) != cudaSuccess) {  // world() tries again and says what failed
    cudaGetLastError();
    return "";
  }
  set_preselected_device(dev);
  return "";
}

namespace {

// What each rank has, gathered so that all of them refuse the same way (none is left waiting).
struct RankFacts {
  std::vector<std::string> hosts, errors, dev_envs;
  std::vector<int> counts, versions;
};

RankFacts gather_rank_facts(Communicator& ctl) {
  using json = nlohmann::json;
  const CudaProbe probe = cuda_probe();
  int version = 0;
  ncclGetVersion(&version);
  const char* dev_env = std::getenv("COMMSCRIPT_DEVICE");
  const char* timing_env = std::getenv("COMMSCRIPT_TIMING");
  const char* blocking_env = std::getenv("NCCL_COMM_BLOCKING");
  const json mine = {{"host", host_name()},
                     {"count", probe.count},
                     {"error", probe.error},
                     {"nccl", version},
                     {"device", dev_env ? dev_env : ""},
                     {"timing", timing_env ? timing_env : ""},
                     {"lib", nccl_lib().loaded ? "" : nccl_lib().why},
                     {"blocking", blocking_env ? blocking_env : ""}};
  RankFacts f;
  auto& hosts = f.hosts;
  for (const auto& s : ctl.allgather(mine.dump())) {
    const json j = json::parse(s);
    hosts.push_back(j["host"]);
    f.counts.push_back(j["count"]);
    f.errors.push_back(j["error"]);
    f.versions.push_back(j["nccl"]);
    f.dev_envs.push_back(j["device"]);
    // NCCL_COMM_BLOCKING overrides config.blocking: init and split would block with no deadline.
    if (const std::string b = j["blocking"]; !b.empty() && b != "0")
      throw InputError("--backend nccl: NCCL_COMM_BLOCKING=" + b + " on rank " + std::to_string(hosts.size() - 1) +
                       " (host " + hosts.back() +
                       ") makes NCCL block in ncclCommInitRankConfig and ncclCommSplit, where commscript can no "
                       "longer enforce its deadline (--timeout): unset it (commscript already times its loops on a "
                       "blocking communicator)");
    if (const std::string lib = j["lib"]; !lib.empty())
      throw InputError("--backend nccl: rank " + std::to_string(hosts.size() - 1) + " (host " + hosts.back() +
                       "): " + lib);
    const std::string t = j["timing"];
    if (!t.empty() && t != "event" && t != "host")
      throw InputError("--backend nccl: COMMSCRIPT_TIMING='" + t + "' on rank " + std::to_string(hosts.size() - 1) +
                       " is neither 'event' (CUDA events, the default) nor 'host' (steady clock)");
  }
  return f;
}

// A rank without a usable GPU: refused, naming the first and every other host with one.
void refuse_ranks_without_gpu(const RankFacts& f, int n) {
  std::vector<std::string> bad_hosts;
  int first_bad = -1;
  for (int r = 0; r < n; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (f.counts[i] > 0) continue;
    if (first_bad < 0)
      first_bad = r;
    else if (f.hosts[i] != f.hosts[static_cast<size_t>(first_bad)] &&
             std::find(bad_hosts.begin(), bad_hosts.end(), f.hosts[i]) == bad_hosts.end())
      bad_hosts.push_back(f.hosts[i]);
  }
  if (first_bad >= 0) {
    const size_t i = static_cast<size_t>(first_bad);
    std::string msg = no_device_message("--backend nccl", f.hosts[i], CudaProbe{f.counts[i], f.errors[i]});
    if (!bad_hosts.empty()) {
      std::string more;
      for (const auto& h : bad_hosts) more += (more.empty() ? "" : ", ") + h;
      msg += "; also on host" + std::string(bad_hosts.size() > 1 ? "s " : " ") + more;
    }
    throw InputError(msg);
  }
}

// This rank's GPU by the same rule on every rank (its place among its host's ranks).
int device_of(const RankFacts& f, int n, int me) {
  int dev = 0;
  std::map<std::string, int> seen;  // ranks met so far per host
  for (int r = 0; r < n; ++r) {
    const size_t i = static_cast<size_t>(r);
    const int d = choose_device(seen[f.hosts[i]]++, f.counts[i],
                                f.dev_envs[i].empty() ? nullptr : f.dev_envs[i].c_str(), f.hosts[i], r);
    if (r == me) dev = d;
  }
  // Chosen from the launcher's local rank before MPI_Init (the same rule; the launcher knows
  // the local rank even where host names mislead, e.g. containers with one name per rank).
  if (preselected_device() >= 0 && preselected_device() < f.counts[static_cast<size_t>(me)] &&
      f.dev_envs[static_cast<size_t>(me)].empty())
    dev = preselected_device();
  return dev;
}

// Two ranks of a host on one GPU (COMMSCRIPT_DEVICE, CUDA_VISIBLE_DEVICES) would fail NCCL's
// init with "Duplicate GPU detected": refuse it here, naming the host, the GPU and the ranks.
void refuse_shared_gpus(Communicator& ctl, const std::vector<std::string>& hosts, int n, int dev) {
  char bus[32] = {0};
  std::string mine_bus = std::to_string(dev);
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) == cudaSuccess)
    mine_bus = normalize_bdf(bus);
  else
    cudaGetLastError();
  const auto buses = ctl.allgather(mine_bus);
  std::map<std::pair<std::string, std::string>, std::vector<int>> users;  // (host, GPU) -> ranks
  for (int r = 0; r < n; ++r) users[{hosts[static_cast<size_t>(r)], buses[static_cast<size_t>(r)]}].push_back(r);
  for (const auto& [where, ranks] : users)
    if (ranks.size() > 1)
      throw InputError("--backend nccl: ranks " + format_int_ranges(ranks) + " on host " + where.first +
                       " would share GPU " + where.second +
                       " (NCCL needs one GPU per rank): give each rank its own GPU (COMMSCRIPT_DEVICE, "
                       "CUDA_VISIBLE_DEVICES) or start fewer ranks on that host");
}

}  // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::world(double init_timeout_s) {
  return create(MpiCommunicator::world(), "world", init_timeout_s);
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(std::unique_ptr<Communicator> control, std::string name,
                                                           double init_timeout_s) {
  Communicator& ctl = *control;
  const int n = ctl.size(), me = ctl.rank();

  // 1. What every rank has, so that all of them refuse the same way (none is left waiting).
  const RankFacts facts = gather_rank_facts(ctl);
  const std::vector<std::string>& hosts = facts.hosts;
  refuse_ranks_without_gpu(facts, n);
  check_nccl_versions(facts.versions);
  const int dev = device_of(facts, n, me);
  refuse_shared_gpus(ctl, hosts, n, dev);

  // 2. This rank's GPU: stream, events, the barrier's buffer.
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(std::move(control), std::move(name), dev));
  std::string err;
  try {
    c->setup();
  } catch (const Error& e) {
    err = std::string("GPU ") + std::to_string(dev) + ": " + e.what();
  }
  agree(*c->ctrl_, err, ExitCode::runtime, hosts);

  // 3. The unique id, from rank 0 over the control communicator.
  ncclUniqueId id{};
  std::string blob;
  if (me == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    blob = r == ncclSuccess ? "1" + std::string(id.internal, sizeof id.internal)
                            : "0ncclGetUniqueId failed on rank 0 (host " + hosts[0] + "): " + nccl_text(r, nullptr);
  }
  blob = c->ctrl_->broadcast(blob, 0);
  if (blob.empty() || blob[0] != '1' || blob.size() != 1 + sizeof id.internal)
    throw Error(ExitCode::runtime,
                "--backend nccl: " + (blob.size() > 1 ? blob.substr(1) : std::string("no unique id")));
  std::memcpy(id.internal, blob.data() + 1, sizeof id.internal);

  // 4. Non-blocking init, polled against the deadline.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.splitShare = 1;  // the timed twin (and the recipe's splits) share this one's resources
  cfg.commName = stable_name(c->name_);
  ncclComm_t comm = nullptr;
  ExitCode code = ExitCode::runtime;
  err.clear();
  ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, me, &cfg);
  const int64_t t0 = now_ns();
  for (unsigned polls = 0; r == ncclInProgress; ++polls) {
    const ncclResult_t q = ncclCommGetAsyncError(comm, &r);
    if (q != ncclSuccess) r = q;
    if (r != ncclInProgress) break;
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (init_timeout_s > 0 && waited > init_timeout_s) {
      code = ExitCode::timeout;
      err = "timeout: ncclCommInitRankConfig (GPU " + std::to_string(dev) + ") did not complete within " +
            std::to_string(static_cast<int>(init_timeout_s)) +
            " s: a rank never joined, or NCCL's bootstrap cannot connect (NCCL_SOCKET_IFNAME?); the communicator was "
            "aborted (ncclCommAbort)";
      break;
    }
    pause_poll(waited, polls);
  }
  if (err.empty() && r != ncclSuccess)
    err = "ncclCommInitRankConfig (GPU " + std::to_string(dev) + ") failed: " + nccl_text(r, comm);
  if (!err.empty() && comm) {
    ncclCommAbort(comm);
    comm = nullptr;
  }
  try {
    agree(*c->ctrl_, err, code, hosts);
  } catch (...) {
    if (comm) ncclCommAbort(comm);
    throw;
  }
  c->comm_ = comm;
  c->make_timed(init_timeout_s);
  try {  // a control plane that survives drops (Gloo) says who is alive; MPI refuses
    c->ctrl_->survivors();
    c->ctrl_survives_ = true;
  } catch (const InputError&) {
  }
  return c;
}

std::string NcclCommunicator::no_shrink_reason() const {
  if (!nccl_has("ncclCommRevoke") || !nccl_has("ncclCommShrink"))
    return "cannot survive a dropped rank: the loaded NCCL (" + nccl_version_string(nccl_lib().version) +
           ") lacks ncclCommRevoke/ncclCommShrink (NCCL >= 2.28 has both)";
  return "cannot survive a dropped rank with this control plane (" + ctrl_->backend() +
         "): " + ctrl_->no_shrink_reason() +
         "; launch without MPI (--launcher env or slurm), where the NCCL backend's control plane is Gloo";
}

std::vector<int> NcclCommunicator::survivors() {
  if (!ctrl_survives_ || !nccl_has("ncclCommRevoke") || !nccl_has("ncclCommShrink"))
    throw InputError("nccl: " + no_shrink_reason());
  return ctrl_->survivors();
}

void NcclCommunicator::check_gone(const Op& op, const char* call) {
  const int64_t now = now_ns();
  if (now - gone_checked_ns_ < 100000000) return;
  gone_checked_ns_ = now;
  const std::vector<int> alive = ctrl_->survivors();
  if (static_cast<int>(alive.size()) >= size_) return;
  std::vector<int> gone;
  for (int r = 0; r < size_; ++r)
    if (std::find(alive.begin(), alive.end(), r) == alive.end()) gone.push_back(r);
  // The communicator stays as it is (the operation still on the GPU): revoke() stops it.
  throw RanksLostError(std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                           format_size(op.bytes()) + "B, " + name() + ", nccl) on rank " + std::to_string(rank_) +
                           ", GPU " + std::to_string(device_) + ": " + call + " cannot complete: rank" +
                           (gone.size() > 1 ? "s " : " ") + format_int_ranges(gone) +
                           " gone (the control plane lost their connection); revoke and shrink to go on",
                       gone);
}

void NcclCommunicator::revoke() {
  survivors();  // refuses, saying why, where a drop cannot be survived
  ctrl_->revoke();
  if (revoked_ || !comm_) return;
  revoked_ = true;
  {  // the revoke raises the abort flag that the twin and the recipe's splits share
    std::lock_guard<std::mutex> g(family_->mu);
    if (!family_->aborted) {
      family_->aborted = true;
      family_->why = "the revoke of communicator '" + name() + "' (shrink it to go on)";
    }
  }
  if (timed_) ncclCommAbort(timed_);  // the timed loops' communicator is rebuilt by shrink
  timed_ = nullptr;
  const std::string what = "ncclCommRevoke of communicator '" + name() + "' on rank " + std::to_string(rank_);
  ncclResult_t r = ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 10;
  const int64_t t0 = now_ns();
  // In progress until the stopped work has left the GPU (quiescent).
  for (unsigned polls = 0; r == ncclSuccess || r == ncclInProgress; ++polls) {
    ncclResult_t a = ncclSuccess;
    if (const ncclResult_t q = ncclCommGetAsyncError(comm_, &a); q != ncclSuccess)
      r = q;
    else if (a != ncclInProgress) {
      r = a;
      break;
    }
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (waited > limit) {
      why_aborted_ = "timeout: " + what + " not quiescent within " + std::to_string(static_cast<int>(limit)) +
                     " s; the communicator was aborted (ncclCommAbort)";
      abort_comm();
      throw Error(ExitCode::timeout, why_aborted_);
    }
    pause_poll(waited, polls);
  }
  if (r != ncclSuccess) {
    why_aborted_ = what + " failed: " + nccl_text(r, comm_);
    abort_comm();
    throw Error(ExitCode::runtime, why_aborted_);
  }
  // What was enqueued but stopped leaves the stream now.
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

std::unique_ptr<Communicator> NcclCommunicator::shrink(const std::vector<int>& exclude) {
  survivors();
  // The control plane first: it checks the list (only gone ranks, not itself, not all) and
  // gives the survivors their new ranks.
  std::unique_ptr<Communicator> sub_ctrl = ctrl_->shrink(exclude);
  if (!comm_) throw Error(ExitCode::runtime, "shrink of communicator '" + name() + "': " + why_aborted_);
  if (timed_) ncclCommAbort(timed_);
  timed_ = nullptr;
  ++shrinks_;
  const std::string sub_name = name() + "/shrink" + std::to_string(shrinks_);
  const std::string what = "ncclCommShrink of communicator '" + name() + "' (excluding " + format_int_ranges(exclude) +
                           ") on rank " + std::to_string(rank_) + ", GPU " + std::to_string(device_);
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device_) cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.splitShare = 1;  // for the new communicator's own twin
  cfg.commName = stable_name(sub_name);
  std::vector<int> ex(exclude.begin(), exclude.end());  // NCCL sorts it in place (qsort)
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  // NCCL_SHRINK_ABORT: whatever still runs on the parent is stopped first (a no-op after revoke);
  // the new communicator never shares the parent's resources then.
  ncclComm_t nc = child_polled(
      [&](ncclComm_t* slot) {
        return ncclCommShrink(comm_, ex.data(), static_cast<int>(ex.size()), slot, &cfg, NCCL_SHRINK_ABORT);
      },
      true, limit, what);
  std::unique_ptr<NcclCommunicator> sub(new NcclCommunicator(std::move(sub_ctrl), sub_name, device_));
  sub->comm_ = nc;  // its own family: a shrink never shares
  sub->ctrl_survives_ = true;
  finish_child(*sub, limit);
  return sub;
}

ncclComm_t NcclCommunicator::child_polled(const std::function<ncclResult_t(ncclComm_t*)>& start, bool want_child,
                                          double limit, const std::string& what) {
  // NCCL writes the child through this pointer from its own thread when the job ends (init.cc
  // ncclCommInitRankFunc: `__atomic_store_n(job->newcomm, comm, __ATOMIC_RELEASE)`, on failure
  // too), after our call has returned: the slot is on the heap, freed once nothing can write it.
  auto* slot = new ncclComm_t(nullptr);
  auto child = [&] { return __atomic_load_n(slot, __ATOMIC_ACQUIRE); };
  auto end_with = [&](ExitCode code, const std::string& msg) {
    // The parent first: its abort joins the job (from NCCL 2.19), so the slot is final after it.
    why_aborted_ = msg;
    abort_comm();
    if (ncclComm_t c = child()) ncclCommAbort(c);
    if (abort_joins_job()) delete slot;  // else left: an older NCCL's job may still write it
    throw Error(code, msg);
  };
  ncclResult_t r = start(slot);
  // A non-blocking parent returns ncclSuccess at once with the child still NULL (ncclCommSplit:
  // the group end's ncclInProgress is swallowed); its progress is on the parent.
  const int64_t t0 = now_ns();
  for (unsigned polls = 0; r == ncclSuccess || r == ncclInProgress; ++polls) {
    ncclResult_t a = ncclSuccess;
    if (const ncclResult_t q = ncclCommGetAsyncError(comm_, &a); q != ncclSuccess) {
      r = q;
      break;
    }
    if (a != ncclInProgress) {
      r = a;
      break;
    }
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (limit > 0 && waited > limit)
      end_with(ExitCode::timeout, "timeout: " + what + " did not complete within " +
                                      std::to_string(static_cast<int>(limit)) +
                                      " s (a rank never called it?); the communicator was aborted (ncclCommAbort)");
    pause_poll(waited, polls);
  }
  if (r != ncclSuccess)
    end_with(ExitCode::runtime,
             what + " failed: " + nccl_text(r, comm_) + "; the communicator was aborted (ncclCommAbort)");
  ncclComm_t c = child();
  delete slot;
  if (want_child && !c) {
    why_aborted_ = what + ": NCCL reported success but published no communicator";
    abort_comm();
    throw Error(ExitCode::runtime, why_aborted_);
  }
  if (!want_child && c) {  // not expected: NCCL_SPLIT_NOCOLOR gives no communicator
    ncclCommAbort(c);
    c = nullptr;
  }
  return c;
}

ncclComm_t NcclCommunicator::split_polled(int color, int key, ncclConfig_t& cfg, double limit,
                                          const std::string& what) {
  return child_polled([&](ncclComm_t* slot) { return ncclCommSplit(comm_, color, key, slot, &cfg); },
                      color != NCCL_SPLIT_NOCOLOR, limit, what);
}

void NcclCommunicator::make_timed(double limit_s) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  cfg.commName = stable_name(name() + "/timed");
  timed_ = split_polled(0, rank_, cfg, limit_s,
                        "ncclCommSplit (the blocking communicator of the timed loops) of communicator '" + name() +
                            "' on rank " + std::to_string(rank_) + ", GPU " + std::to_string(device_));
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (!comm_) throw Error(ExitCode::runtime, "split of communicator '" + name() + "': " + why_aborted_);
  {
    std::lock_guard<std::mutex> g(family_->mu);
    if (family_->aborted)
      throw Error(ExitCode::runtime, "split of communicator '" + name() + "': unusable after " + family_->why);
  }
  auto sub_ctrl = ctrl_->split(color, key);
  ++splits_;  // on every rank, even one left out: the names must agree
  const std::string sub_name = name() + "/s" + std::to_string(splits_) + ".c" + std::to_string(color);
  const std::string what = "ncclCommSplit of communicator '" + name() + "' (color " + std::to_string(color) +
                           ") on rank " + std::to_string(rank_) + ", GPU " + std::to_string(device_);
  // The split first, every rank at once: a rank whose device setup failed before it would leave
  // the others waiting in ncclCommSplit (setup comes after, agreed on over the sub-communicator).
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device_) cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.splitShare = 1;  // for the child's own twin
  cfg.commName = stable_name(sub_name);
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  ncclComm_t nc = split_polled(color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, cfg, limit, what);
  if (!sub_ctrl) {
    if (nc) ncclCommAbort(nc);  // not expected: NCCL_SPLIT_NOCOLOR gives no communicator
    return nullptr;
  }
  std::unique_ptr<NcclCommunicator> sub(new NcclCommunicator(std::move(sub_ctrl), sub_name, device_));
  sub->comm_ = nc;                               // freed with `sub`, whatever happens below
  if (split_share_on()) sub->family_ = family_;  // it shares this one's abort flag
  finish_child(*sub, limit);
  return sub;
}

// A child communicator (split or shrink) once it holds its NCCL handle: this one's deadline,
// verification and timing, its device setup agreed on by every member (one member's failure
// ends them all, naming its GPU), then its timed twin.
void NcclCommunicator::finish_child(NcclCommunicator& sub, double limit) const {
  sub.set_timeout(timeout_s_, local_grace_s_);
  sub.set_verify(verify_);
  sub.event_timing_ = event_timing_;
  std::string err;
  try {
    sub.setup();
  } catch (const Error& e) {
    err = std::string("GPU ") + std::to_string(device_) + ": " + e.what();
  }
  const auto hosts = sub.ctrl_->allgather(host_name());
  agree(*sub.ctrl_, err, ExitCode::runtime, hosts);
  sub.make_timed(limit);
}

void* NcclCommunicator::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    if (scratch_) cuda_check(cudaFree(scratch_), "cudaFree");
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    cuda_check(cudaMalloc(&scratch_, bytes), "cudaMalloc");
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

void NcclCommunicator::check_buffers(const Op& op) {
  // Timed loops run one operation on the same buffers many times: those are judged once.
  auto known = [&](const void* p) {
    if (!p) return true;
    for (const void* k : checked_)
      if (k == p) return true;
    return false;
  };
  if (op.blocking && known(op.send) && known(op.recv)) return;
  check_nccl_buffers(op, rank_, device_, name(), op.send ? place_of(op.send) : BufferPlace{},
                     op.recv ? place_of(op.recv) : BufferPlace{});
  for (const void* p : {static_cast<const void*>(op.send), static_cast<const void*>(op.recv)})
    if (p && !known(p)) checked_[checked_next_++ % 4] = p;
}

ncclResult_t NcclCommunicator::enqueue(const Op& op, const char** call, ncclComm_t nc) {
  const ncclDataType_t t = nccl_dtype(op.dtype);
  const size_t c = op.count, es = dtype_size(op.dtype);
  const int n = size_;
  auto at = [&](const void* p, size_t elems) { return cs::at(p, elems, op.dtype); };
  auto d2d = [&](void* dst, const void* src, size_t bytes) {
    if (bytes && dst != src)
      cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  };
  // Grouped point-to-point calls: the first error counts, and the group is always closed.
  ncclResult_t first = ncclSuccess;
  auto add = [&](ncclResult_t r) {
    if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) first = r;
  };
  auto group = [&](auto&& body) {
    const ncclResult_t s = ncclGroupStart();
    if (s != ncclSuccess) return s;
    body();
    const ncclResult_t e = ncclGroupEnd();
    return first != ncclSuccess ? first : e;
  };
  const ncclRedOp_t rop = nccl_redop(op.redop);
  switch (op.coll) {
    case Collective::barrier:
      *call = "ncclAllReduce (barrier)";
      return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclSum, nc, stream_);
    case Collective::allreduce:
      *call = "ncclAllReduce";
      return ncclAllReduce(op.send, op.recv, c, t, rop, nc, stream_);
    case Collective::reduce:
      *call = "ncclReduce";
      return ncclReduce(op.send, op.recv, c, t, rop, op.root, nc, stream_);
    case Collective::broadcast:
      *call = "ncclBroadcast";
      return ncclBroadcast(op.send, op.recv, c, t, op.root, nc, stream_);
    case Collective::allgather:  // in place: send = recv + rank*count, as NCCL defines it
      *call = "ncclAllGather";
      return ncclAllGather(op.send, op.recv, c, t, nc, stream_);
    case Collective::reduce_scatter:  // in place: recv = send + rank*count
      *call = "ncclReduceScatter";
      return ncclReduceScatter(op.send, op.recv, c, t, rop, nc, stream_);
    case Collective::alltoall: {
      const size_t bytes = c * static_cast<size_t>(n) * es;
      const void* src = op.send;
      if (op.in_place(rank_)) {  // in place: send from a copy
        src = scratch(bytes);
        d2d(const_cast<void*>(src), op.send, bytes);
      }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
      // NCCL 2.28's own all-to-all (what nccl-tests calls): on one rank a single copy, on more the
      // same send/receive pair per peer as below (enqueue.cc taskAppend, v2.28.9-1).
      static const bool has_alltoall = nccl_has("ncclAlltoAll");
      if (has_alltoall) {
        *call = "ncclAlltoAll";
        return ncclAlltoAll(src, op.recv, c, t, nc, stream_);
      }
#endif
      *call = "ncclSend/ncclRecv (alltoall)";
      return group([&] {
        for (int p = 0; p < n; ++p) {
          add(ncclSend(at(src, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
          add(ncclRecv(at(op.recv, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
        }
      });
    }
    case Collective::gather: {
      *call = "ncclSend/ncclRecv (gather)";
      if (rank_ == op.root) d2d(at(op.recv, c * static_cast<size_t>(rank_)), op.send, c * es);  // own part
      return group([&] {
        if (rank_ != op.root) {
          add(ncclSend(op.send, c, t, op.root, nc, stream_));
          return;
        }
        for (int p = 0; p < n; ++p)
          if (p != rank_) add(ncclRecv(at(op.recv, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
      });
    }
    case Collective::scatter: {
      *call = "ncclSend/ncclRecv (scatter)";
      if (rank_ == op.root) d2d(op.recv, at(op.send, c * static_cast<size_t>(rank_)), c * es);  // own part
      return group([&] {
        if (rank_ != op.root) {
          add(ncclRecv(op.recv, c, t, op.root, nc, stream_));
          return;
        }
        for (int p = 0; p < n; ++p)
          if (p != rank_) add(ncclSend(at(op.send, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
      });
    }
    case Collective::sendrecv: {
      *call = "ncclSend/ncclRecv (sendrecv)";
      const void* src = op.send;
      if (op.in_place(rank_)) {  // in place: send from a copy
        src = scratch(c * es);
        d2d(const_cast<void*>(src), op.send, c * es);
      }
      return group([&] {
        add(ncclSend(src, c, t, op.peer, nc, stream_));
        add(ncclRecv(op.recv, c, t, op.recv_peer, nc, stream_));
      });
    }
    case Collective::send:
      *call = "ncclSend";
      return ncclSend(op.send, c, t, op.peer, nc, stream_);
    case Collective::recv:
      *call = "ncclRecv";
      return ncclRecv(op.recv, c, t, op.peer, nc, stream_);
  }
  *call = "?";
  return ncclInvalidArgument;
}

template <class F>
ncclResult_t NcclCommunicator::guarded(double limit_s, F&& call, bool* fired) {
  *fired = false;
  // Only a twin that shares comm_'s abort flag can be interrupted this way (an abort of the twin
  // itself from another thread would free it under the call: NCCL does not allow that).
  const bool watch = limit_s > 0 && comm_ && split_share_on();
  if (watch) {
    guard_->victim.store(comm_);
    guard_->deadline_ns.store(now_ns() + static_cast<int64_t>(limit_s * 1e9));
    guard_->state.store(NcclGuard::inside, std::memory_order_release);
  }
  auto leave = [&] {
    if (!watch) return;
    int expected = NcclGuard::inside;
    if (guard_->state.compare_exchange_strong(expected, NcclGuard::idle)) return;
    while (guard_->state.load(std::memory_order_acquire) != NcclGuard::fired) std::this_thread::yield();
    guard_->state.store(NcclGuard::idle);
    comm_ = nullptr;  // the monitor aborted it
    *fired = true;
  };
  ncclResult_t r = ncclSuccess;
  try {
    r = call();
  } catch (...) {
    leave();
    throw;
  }
  leave();
  return r;
}

void NcclCommunicator::mark_aborted(const std::string& why) {
  std::lock_guard<std::mutex> g(family_->mu);
  if (family_->aborted) return;
  family_->aborted = true;
  family_->why = "an abort of communicator '" + name() + "' (" + why + ")";
}

void NcclCommunicator::run(const Op& op) {
  if (!comm_)
    throw Error(ExitCode::runtime, std::string(collective_name(op.coll)) + " on communicator '" + name() +
                                       "': the communicator is unusable after an earlier failure (" + why_aborted_ +
                                       ")");
  {
    std::lock_guard<std::mutex> g(family_->mu);
    if (family_->aborted)  // NCCL aborted it with a relative that shares its abort flag
      throw Error(ExitCode::runtime, std::string(collective_name(op.coll)) + " on communicator '" + name() +
                                         "': the communicator is unusable after " + family_->why);
  }
  check_buffers(op);
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device_) cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  // Timed loops go to the blocking communicator: on a non-blocking one every call spawns and
  // joins a thread (NCCL >= 2.23), which would be inside the timed region.
  const ncclComm_t nc = op.blocking && timed_ ? timed_ : comm_;
  const bool timing = op.blocking && event_timing_ && !pipelined_;
  if (timing) cuda_check(cudaEventRecord(ev_start_, stream_), "cudaEventRecord");
  const char* call = "";
  const int64_t t0 = now_ns();
  ncclResult_t r = ncclSuccess;
  if (nc == timed_) {
    // A blocking call can wait inside NCCL (lazy connection setup, the work FIFO): watched.
    bool fired = false;
    r = guarded(
        timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0, [&] { return enqueue(op, &call, nc); }, &fired);
    if (fired)
      timed_out(op, static_cast<double>(now_ns() - t0) * 1e-9,
                "inside the blocking call (NCCL's host-side wait: lazy connection setup or the work FIFO)");
  } else {
    r = enqueue(op, &call, nc);
  }
  if (r != ncclSuccess && r != ncclInProgress) fail(op, call, r);
  // A non-blocking communicator may still be enqueueing: the work is on the stream only once
  // the asynchronous state says so (then the end event goes after it).
  if (r == ncclInProgress) wait(op, call, true, t0);
  if (pipelined_) return;  // time_loop_us waits once, after the whole loop
  if (timing) cuda_check(cudaEventRecord(ev_end_, stream_), "cudaEventRecord");
  wait(op, call, false, t0);
}

double NcclCommunicator::timed_execute_us(const Op& op) {
  execute(op);
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, ev_start_, ev_end_), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e3;
}

double NcclCommunicator::time_loop_us(const Op& op, size_t iters) {
  if (!device_timing() || iters == 0) return Communicator::time_loop_us(op, iters);
  Op o = op;
  o.blocking = true;
  // CUDA events around the whole loop on the blocking communicator; the operations are enqueued
  // back to back and the stream is waited for once, against the deadline.
  cuda_check(cudaEventRecord(ev_start_, stream_), "cudaEventRecord");
  pipelined_ = true;
  try {
    for (size_t i = 0; i < iters; ++i) execute(o);
  } catch (...) {
    pipelined_ = false;
    throw;
  }
  pipelined_ = false;
  cuda_check(cudaEventRecord(ev_end_, stream_), "cudaEventRecord");
  wait(o, "time_loop", false, now_ns());
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, ev_start_, ev_end_), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e3;
}

void NcclCommunicator::wait(const Op& op, const char* call, bool enqueueing, int64_t t0) {
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  // Timed loops spin (the stream query is the whole cost); the clock and the asynchronous
  // error are looked at every 1024 polls there, on every poll otherwise.
  const unsigned every = op.blocking ? 1023u : 0u;
  for (unsigned polls = 0;; ++polls) {
    if (enqueueing) {
      ncclResult_t a = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &a);
      if (q != ncclSuccess) fail(op, "ncclCommGetAsyncError", q);
      if (a == ncclSuccess) return;
      if (a != ncclInProgress) fail(op, call, a);
    } else {
      const cudaError_t s = cudaStreamQuery(stream_);
      if (s == cudaSuccess) return;
      if (s != cudaErrorNotReady) {
        cudaGetLastError();
        why_aborted_ = std::string(call) + ": cudaStreamQuery: " + cuda_error_text(s);
        abort_comm();
        throw Error(ExitCode::runtime, std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " on '" +
                                           name() + "', rank " + std::to_string(rank_) + ": " + why_aborted_);
      }
    }
    if ((polls & every) != every) continue;
    if (!enqueueing) {
      ncclResult_t a = ncclSuccess;
      for (ncclComm_t c : {comm_, timed_})
        if (c && ncclCommGetAsyncError(c, &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress)
          fail(op, call, a);
    }
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (ctrl_survives_) check_gone(op, call);
    if (limit > 0 && waited > limit) timed_out(op, waited);
    if (!op.blocking) pause_poll(waited, polls);
  }
}

void NcclCommunicator::abort_comm() {
  if (timed_ || comm_) mark_aborted(why_aborted_.empty() ? "teardown after a failure" : why_aborted_);
  if (timed_) ncclCommAbort(timed_);  // split from comm_: it goes first
  timed_ = nullptr;
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::fail(const Op& op, const char* call, ncclResult_t r) {
  const std::string msg = std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                          format_size(op.bytes()) + "B, " + name() + ") on rank " + std::to_string(rank_) + ", GPU " +
                          std::to_string(device_) + ": " + call + " failed: " + nccl_text(r, comm_);
  // Every error ends the communicator: on a non-blocking one even ncclInvalidArgument persists
  // (ncclCommGetAsyncError keeps returning it), so nothing could run on it afterwards.
  why_aborted_ = msg;
  abort_comm();
  throw Error(ExitCode::runtime, msg);
}

void NcclCommunicator::timed_out(const Op& op, double waited_s, const char* where) {
  std::string msg = "timeout: " + std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                    format_size(op.bytes()) + "B, " + name() + ") after " + std::to_string(static_cast<int>(waited_s)) +
                    " s on rank " + std::to_string(rank_) + " (GPU " + std::to_string(device_) +
                    "): NCCL never completed it" + (where ? std::string(" ") + where : std::string()) +
                    "; the communicator was aborted (ncclCommAbort)";
  RasProbe probe;
  {
    std::lock_guard<std::mutex> g(g_ras_mu);
    probe = g_ras_probe;
  }
  if (probe) {
    try {
      const std::string ras = probe(op, name());
      if (!ras.empty()) msg += "\nNCCL RAS: " + ras;
    } catch (const std::exception& e) {
      msg += "\nNCCL RAS: not available (" + std::string(e.what()) + ")";
    }
  }
  why_aborted_ = msg;
  abort_comm();
  throw Error(ExitCode::timeout, msg);
}

}  // namespace cs
