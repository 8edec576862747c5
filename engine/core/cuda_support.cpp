#include "cuda_support.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "error.hpp"
#include "host_name.hpp"

namespace cs {

std::string no_device_message(std::string_view what, const std::string& host, const CudaProbe& p) {
  const std::string why = p.error.empty() ? std::to_string(p.count) + " devices" : p.error;
  return std::string(what) + ": no usable CUDA device on host " + host + " (cudaGetDeviceCount: " + why + ")";
}

int require_cuda_devices(std::string_view what) {
  const CudaProbe p = cuda_probe();
  if (p.count <= 0) throw InputError(no_device_message(what, host_name(), p));
  return p.count;
}

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string nccl_version_string(int code) {
  if (code <= 0) return "unknown";
  const int major = code < 10000 ? code / 1000 : code / 10000;
  const int minor = code < 10000 ? code % 1000 / 100 : code % 10000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::optional<int> nccl_version_code(std::string_view text) {
  text = text.substr(0, text.find('+'));  // "2.28.9+cuda13.0"
  int part[3] = {0, 0, 0};
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t end = i < 2 ? text.find('.', pos) : text.size();
    if (end == std::string_view::npos || end == pos || end - pos > 4) return std::nullopt;
    int v = 0;
    for (char c : text.substr(pos, end - pos)) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    part[i] = v;
    pos = end + 1;
  }
  if (part[2] > 99 || part[1] > 99) return std::nullopt;
  // NCCL_VERSION(X, Y, Z) of nccl.h
  return part[0] <= 2 && part[1] <= 8 ? part[0] * 1000 + part[1] * 100 + part[2]
                                      : part[0] * 10000 + part[1] * 100 + part[2];
}

std::string normalize_bdf(std::string_view bdf) {
  std::string s;
  for (char c : bdf) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  // domain:bus:dev.fn with a domain of any width: keep four hex digits, as sysfs does.
  const size_t c1 = s.find(':');
  if (c1 == std::string::npos || s.find(':', c1 + 1) == std::string::npos) return s;
  std::string dom = s.substr(0, c1);
  if (dom.empty() ||
      !std::all_of(dom.begin(), dom.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    return s;
  while (dom.size() > 4 && dom[0] == '0') dom.erase(0, 1);
  while (dom.size() < 4) dom.insert(0, "0");
  return dom + s.substr(c1);
}

namespace {

// A non-negative decimal of at most 6 digits, or -1.
int small_index(const char* v) {
  if (!v || !*v) return -1;
  int n = 0, digits = 0;
  for (const char* p = v; *p; ++p) {
    if (*p < '0' || *p > '9' || ++digits > 6) return -1;
    n = n * 10 + (*p - '0');
  }
  return n;
}

int g_preselected = -1;

}  // namespace

LauncherLocal launcher_local(const char* (*env)(const char*)) {
  static constexpr const char* kPairs[][2] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                              {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                                              {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
                                              {"LOCAL_RANK", "LOCAL_WORLD_SIZE"}};
  LauncherLocal l;
  for (const auto& [rank_var, size_var] : kPairs) {
    const int r = small_index(env(rank_var));
    if (r < 0) continue;
    l.rank = r;
    l.source = rank_var;
    const int n = small_index(env(size_var));
    if (n > r) {
      l.size = n;
      l.source += std::string("/") + size_var;
    }
    break;
  }
  return l;
}

int early_device(const LauncherLocal& local, int count, const char* device_env, const std::string& host) {
  if (local.rank < 0 || count <= 0) return -1;
  const int over = local.size > count ? local.size : local.rank >= count ? local.rank + 1 : 0;
  if (over > 0) {
    const std::string ranks =
        local.size > 0
            ? std::to_string(local.size) + " ranks (local ranks 0-" + std::to_string(local.size - 1) + ")"
            : "at least " + std::to_string(local.rank + 1) + " ranks (local rank " + std::to_string(local.rank) + ")";
    throw InputError("--backend nccl: host " + host + ": the launcher started " + ranks + " there (" + local.source +
                     "), but it has " + std::to_string(count) + " GPU" + (count == 1 ? "" : "s") +
                     ": NCCL needs one GPU per rank (two ranks of a communicator on one GPU fail with \"Duplicate "
                     "GPU detected\"); start at most " +
                     std::to_string(count) + " rank" + (count == 1 ? "" : "s") +
                     " per host (mpirun --map-by ppr:" + std::to_string(count) +
                     ":node, srun --ntasks-per-node, torchrun --nproc-per-node) or check CUDA_VISIBLE_DEVICES");
  }
  if (device_env && *device_env) {
    const int d = small_index(device_env);
    return d >= 0 && d < count ? d : -1;  // not a device: the NCCL backend names it, with the rank
  }
  return local.rank % count;
}

void set_preselected_device(int device) { g_preselected = device; }
int preselected_device() { return g_preselected; }

}  // namespace cs
