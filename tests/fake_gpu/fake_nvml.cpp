// A stand-in NVML (libnvidia-ml.so.1) for the fake GPUs of fake_cuda.cpp, with the topology
// FAKE_GPU_TOPO names: "nvswitch" (HGX: 8 GPUs, 18 NVLink 4 links each, every link to one of
// four NVSwitches, whose PCI ids are not GPUs'), "nvlink-pairs" (GPUs 2k and 2k+1 bridged by 4
// links) or "pcie" (no NVLink). Every GPU's PCIe link is gen5 x16 (also its maximum), on NUMA
// node 0. Faults, each planted on one GPU (lists of "gpu:value", comma-separated):
//   FAKE_NVML_PCIE=2:3:8        GPU 2's link trained at gen3 x8 (its maximum stays gen5 x16)
//   FAKE_NVML_NVLINK_DOWN=3:5   GPU 3's NVLink 5 present but inactive
//   FAKE_NVML_NUMA=1:1          GPU 1 on NUMA node 1
// Test-only: never shipped.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fake_gpu.hpp"

using namespace fakegpu;

namespace {
constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6;
struct PciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
using Device = struct nvmlDevice_st*;
int index_of(Device d) { return static_cast<int>(reinterpret_cast<uintptr_t>(d)) - 1; }
int links_of() {
  const std::string& t = knobs().topo;
  return t == "nvswitch" ? 18 : t == "nvlink-pairs" ? 4 : 0;
}
bool valid(Device d) { return index_of(d) >= 0 && index_of(d) < knobs().devices; }

// "a:b[:c],..." from the environment: a -> the rest of the numbers.
std::multimap<int, std::vector<int>> plants(const char* name) {
  std::multimap<int, std::vector<int>> out;
  const char* v = std::getenv(name);
  std::string s = v ? v : "";
  size_t i = 0;
  while (i < s.size()) {
    size_t e = s.find(',', i);
    if (e == std::string::npos) e = s.size();
    std::vector<int> nums;
    const std::string item = s.substr(i, e - i);
    size_t j = 0;
    while (j <= item.size()) {
      size_t c = item.find(':', j);
      if (c == std::string::npos) c = item.size();
      if (c > j) nums.push_back(std::atoi(item.substr(j, c - j).c_str()));
      j = c + 1;
    }
    if (nums.size() >= 2) out.emplace(nums[0], std::vector<int>(nums.begin() + 1, nums.end()));
    i = e + 1;
  }
  return out;
}
const std::multimap<int, std::vector<int>>& pcie_plants() {
  static const auto p = plants("FAKE_NVML_PCIE");
  return p;
}
const std::multimap<int, std::vector<int>>& nvlink_down() {
  static const auto p = plants("FAKE_NVML_NVLINK_DOWN");
  return p;
}
const std::multimap<int, std::vector<int>>& numa_plants() {
  static const auto p = plants("FAKE_NVML_NUMA");
  return p;
}
constexpr unsigned kMaxGen = 5, kMaxWidth = 16;
// The current link of GPU i: {gen, width}.
std::pair<unsigned, unsigned> pcie_now(int i) {
  auto it = pcie_plants().find(i);
  if (it == pcie_plants().end() || it->second.size() < 2) return {kMaxGen, kMaxWidth};
  return {static_cast<unsigned>(it->second[0]), static_cast<unsigned>(it->second[1])};
}
bool link_down(int i, unsigned link) {
  auto [a, b] = nvlink_down().equal_range(i);
  for (auto it = a; it != b; ++it)
    if (static_cast<unsigned>(it->second[0]) == link) return true;
  return false;
}
}  // namespace

extern "C" {

int nvmlInit_v2() { return knobs().driver == "none" ? 9 /* NVML_ERROR_DRIVER_NOT_LOADED */ : kSuccess; }
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Invalid Argument";
  }
}
int nvmlSystemGetDriverVersion(char* out, unsigned n) {
  std::snprintf(out, n, "%s", knobs().driver == "old" ? "535.0.fake" : "580.0.fake");
  return kSuccess;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, Device* out) {
  std::string b(bus);
  for (auto& c : b) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (b.size() > 12) b = b.substr(b.size() - 12);  // "00000000:18:00.0" -> "0000:18:00.0"
  for (int d = 0; d < knobs().devices; ++d)
    if (bus_id(d) == b) {
      *out = reinterpret_cast<Device>(static_cast<uintptr_t>(d + 1));
      return kSuccess;
    }
  return kNotFound;
}
// nvmlDeviceGetNvLinkState(device, link, isActive): NVML_ERROR_NOT_SUPPORTED for a link the GPU
// does not have; NVML_FEATURE_ENABLED (1) / _DISABLED (0) for one it has (FAKE_NVML_NVLINK_DOWN).
int nvmlDeviceGetNvLinkState(Device d, unsigned link, int* active) {
  if (!valid(d)) return kInvalidArgument;
  if (static_cast<int>(link) >= links_of()) return kNotSupported;
  if (knobs().topo == "nvlink-pairs" && (index_of(d) ^ 1) >= knobs().devices) return kNotSupported;
  *active = link_down(index_of(d), link) ? 0 : 1;  // NVML_FEATURE_DISABLED for a planted link
  return kSuccess;
}

// nvmlDeviceGetCurrPcieLinkGeneration / nvmlDeviceGetMaxPcieLinkGeneration /
// nvmlDeviceGetCurrPcieLinkWidth / nvmlDeviceGetMaxPcieLinkWidth: the link as the GPU trained it
// now (FAKE_NVML_PCIE) and the most the GPU and its slot support.
int nvmlDeviceGetCurrPcieLinkGeneration(Device d, unsigned* gen) {
  if (!valid(d) || !gen) return kInvalidArgument;
  *gen = pcie_now(index_of(d)).first;
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkGeneration(Device d, unsigned* gen) {
  if (!valid(d) || !gen) return kInvalidArgument;
  *gen = kMaxGen;
  return kSuccess;
}
int nvmlDeviceGetCurrPcieLinkWidth(Device d, unsigned* width) {
  if (!valid(d) || !width) return kInvalidArgument;
  *width = pcie_now(index_of(d)).second;
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkWidth(Device d, unsigned* width) {
  if (!valid(d) || !width) return kInvalidArgument;
  *width = kMaxWidth;
  return kSuccess;
}

// nvmlDeviceGetMemoryAffinity(device, nodeSetSize, nodeSet, scope): a bit mask (unsigned longs)
// of the NUMA nodes nearest the GPU; scope NVML_AFFINITY_SCOPE_NODE (0) or _SOCKET (1), the
// same here. FAKE_NVML_NUMA moves a GPU to another node.
int nvmlDeviceGetMemoryAffinity(Device d, unsigned size, unsigned long* set, int scope) {
  if (!valid(d) || !set || size == 0 || (scope != 0 && scope != 1)) return kInvalidArgument;
  std::memset(set, 0, size * sizeof *set);
  auto it = numa_plants().find(index_of(d));
  const int node = it == numa_plants().end() ? 0 : it->second[0];
  const unsigned bits = 8 * sizeof *set;
  if (node < 0 || static_cast<unsigned>(node) >= size * bits) return kInvalidArgument;
  set[static_cast<unsigned>(node) / bits] |= 1ul << (static_cast<unsigned>(node) % bits);
  return kSuccess;
}
int nvmlDeviceGetNvLinkVersion(Device d, unsigned link, unsigned* v) {
  if (!valid(d) || static_cast<int>(link) >= links_of()) return kNotSupported;
  *v = knobs().topo == "nvswitch" ? 4 : 3;
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned link, PciInfo* p) {
  if (!valid(d) || static_cast<int>(link) >= links_of()) return kNotSupported;
  std::memset(p, 0, sizeof *p);
  std::string remote;
  if (knobs().topo == "nvswitch") {
    char b[32];
    std::snprintf(b, sizeof b, "00000000:%02X:00.0", 0xc1 + static_cast<int>(link % 4));  // a switch
    remote = b;
  } else {
    remote = "0000" + bus_id(index_of(d) ^ 1);
    for (auto& c : remote) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  std::snprintf(p->busId, sizeof p->busId, "%s", remote.c_str());
  return kSuccess;
}
// NVML_NVLINK_DEVICE_TYPE_GPU 0, _IBMNPU 1, _SWITCH 2
int nvmlDeviceGetNvLinkRemoteDeviceType(Device d, unsigned link, int* type) {
  if (!valid(d) || static_cast<int>(link) >= links_of()) return kNotSupported;
  *type = knobs().topo == "nvswitch" ? 2 : 0;
  return kSuccess;
}
// NVML_P2P_CAPS_INDEX_NVLINK = 2; status 0 = OK, 5 = NOT_SUPPORTED
int nvmlDeviceGetP2PStatus(Device a, Device b, int index, int* status) {
  if (!valid(a) || !valid(b)) return kInvalidArgument;
  bool nvlink = knobs().topo == "nvswitch" || (knobs().topo == "nvlink-pairs" && (index_of(a) ^ 1) == index_of(b));
  *status = index == 2 ? (nvlink ? 0 : 5) : 0;
  return kSuccess;
}
// NVML_TOPOLOGY_SINGLE 10, _MULTIPLE 20, _HOSTBRIDGE 30, _NODE 40, _SYSTEM 50
int nvmlDeviceGetTopologyCommonAncestor(Device a, Device b, int* level) {
  if (!valid(a) || !valid(b)) return kInvalidArgument;
  const int x = index_of(a), y = index_of(b);
  *level = x / 2 == y / 2 ? 10 : x / 4 == y / 4 ? 40 : 50;
  return kSuccess;
}

}  // extern "C"
