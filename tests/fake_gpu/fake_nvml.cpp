// A stand-in NVML (libnvidia-ml.so.1) for the fake GPUs of fake_cuda.cpp, with the topology
// FAKE_GPU_TOPO names: "nvswitch" (HGX: 8 GPUs, 18 NVLink 4 links each, every link to one of
// four NVSwitches, whose PCI ids are not GPUs'), "nvlink-pairs" (GPUs 2k and 2k+1 bridged by 4
// links) or "pcie" (no NVLink). Test-only: never shipped.
#include <cstdio>
#include <cstring>
#include <string>

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
int nvmlDeviceGetNvLinkState(Device d, unsigned link, int* active) {
  if (!valid(d)) return kInvalidArgument;
  if (static_cast<int>(link) >= links_of()) return kNotSupported;
  if (knobs().topo == "nvlink-pairs" && (index_of(d) ^ 1) >= knobs().devices) return kNotSupported;
  *active = 1;
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
