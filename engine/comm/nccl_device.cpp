// The NCCL backend's choice of GPU: one device per rank, by the rank's place among its host's
// ranks (COMMSCRIPT_DEVICE overrides it), chosen once before MPI_Init from the launcher's local
// rank and again, agreed on by every rank, when the communicator is created; the refusals of a
// rank without a GPU, of ranks that loaded different NCCL libraries and of two ranks sharing a
// GPU.
#include "nccl_device.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

#include "error.hpp"
#include "gpu_libs.hpp"
#include "host_name.hpp"
#include "int_list.hpp"
#include "json_text.hpp"
#include "nccl_communicator.hpp"

namespace cs {

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
  for (const auto& s : ctl.allgather(json_text(mine))) {
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

int agree_on_device(Communicator& ctl, std::vector<std::string>* hosts) {
  const int n = ctl.size(), me = ctl.rank();
  const RankFacts facts = gather_rank_facts(ctl);
  refuse_ranks_without_gpu(facts, n);
  check_nccl_versions(facts.versions);
  const int dev = device_of(facts, n, me);
  refuse_shared_gpus(ctl, facts.hosts, n, dev);
  *hosts = facts.hosts;
  return dev;
}

}  // namespace cs
