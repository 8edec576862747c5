#include "gpu_topology.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "cuda_device.hpp"
#include "file_read.hpp"
#include "host_name.hpp"
#include "topology.hpp"

namespace cs {

using json = nlohmann::json;

namespace {

// The few NVML entry points used here, declared as nvml.h (CUDA 11+) declares them, so that the
// build needs no NVML header and the binary no driver.
namespace nvml {
using Return = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
using Device = struct nvmlDevice_st*;
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
struct PciInfo {                    // nvmlPciInfo_t (v3 layout)
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t layout");

struct Lib {
  void* handle = nullptr;
  std::string why;  // when not loaded
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*driver_version)(char*, unsigned) = nullptr;
  Return (*by_pci)(const char*, Device*) = nullptr;
  Return (*link_state)(Device, unsigned, int*) = nullptr;
  Return (*link_version)(Device, unsigned, unsigned*) = nullptr;
  Return (*link_remote_pci)(Device, unsigned, PciInfo*) = nullptr;
  Return (*common_ancestor)(Device, Device, int*) = nullptr;
  Return (*remote_type)(Device, unsigned, int*) = nullptr;    // nvmlDeviceGetNvLinkRemoteDeviceType
  Return (*p2p_status)(Device, Device, int, int*) = nullptr;  // nvmlDeviceGetP2PStatus
  // nvmlDeviceGet{Curr,Max}PcieLink{Generation,Width}: the GPU's link now and at most
  Return (*pcie_gen)(Device, unsigned*) = nullptr;
  Return (*pcie_max_gen)(Device, unsigned*) = nullptr;
  Return (*pcie_width)(Device, unsigned*) = nullptr;
  Return (*pcie_max_width)(Device, unsigned*) = nullptr;
  // nvmlDeviceGetMemoryAffinity(device, nodeSetSize, nodeSet, scope): the nearest NUMA nodes
  Return (*memory_affinity)(Device, unsigned, unsigned long*, int) = nullptr;
};
constexpr int kRemoteSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH
constexpr int kP2pNvlink = 2;     // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kP2pOk = 0;         // NVML_P2P_STATUS_OK

constexpr int kAffinityScopeNode = 0;  // NVML_AFFINITY_SCOPE_NODE

template <class F>
void sym(Lib& l, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(l.handle, name));
}

const Lib& lib() {
  static const Lib l = [] {
    Lib x;
    x.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!x.handle) {
      const char* e = dlerror();
      x.why = std::string("libnvidia-ml.so.1 not loaded: ") + (e ? e : "?");
      return x;
    }
    sym(x, x.init, "nvmlInit_v2");
    sym(x, x.shutdown, "nvmlShutdown");
    sym(x, x.error_string, "nvmlErrorString");
    sym(x, x.driver_version, "nvmlSystemGetDriverVersion");
    sym(x, x.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(x, x.link_state, "nvmlDeviceGetNvLinkState");
    sym(x, x.link_version, "nvmlDeviceGetNvLinkVersion");
    sym(x, x.link_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    sym(x, x.common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
    sym(x, x.remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    sym(x, x.p2p_status, "nvmlDeviceGetP2PStatus");
    sym(x, x.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    sym(x, x.pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
    sym(x, x.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    sym(x, x.pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
    sym(x, x.memory_affinity, "nvmlDeviceGetMemoryAffinity");
    if (!x.init || !x.shutdown || !x.by_pci) {
      x.why = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2";
      dlclose(x.handle);
      x.handle = nullptr;
    }
    return x;
  }();
  return l;
}
}  // namespace nvml

// The first line of a sysfs file ("" when it cannot be read; file_read.hpp: no FIFO, no device).
std::string read_line(const std::string& path) {
  const FileRead r = read_regular_file(path, 1 << 20);
  return r.ok() ? r.text.substr(0, r.text.find('\n')) : std::string();
}

// The GPU's PCIe link as NVML reports it, in read_pcie_link's fields (source "nvml"); null when
// NVML cannot say.
json nvml_pcie_link(const nvml::Lib& ml, nvml::Device h) {
  unsigned gen = 0, max_gen = 0, width = 0, max_width = 0;
  if (!h || !ml.pcie_gen || !ml.pcie_width) return nullptr;
  if (ml.pcie_gen(h, &gen) != 0 || ml.pcie_width(h, &width) != 0) return nullptr;
  if (!ml.pcie_max_gen || ml.pcie_max_gen(h, &max_gen) != 0) max_gen = 0;
  if (!ml.pcie_max_width || ml.pcie_max_width(h, &max_width) != 0) max_width = 0;
  json j = {{"gen", gen}, {"width", width}, {"source", "nvml"}};
  if (max_gen) j["max_gen"] = max_gen;
  if (max_width) j["max_width"] = max_width;
  const int g = static_cast<int>(gen), mg = static_cast<int>(max_gen);
  j["gbytes_per_s"] = pcie_lane_gbytes(g) * width;
  if (max_gen && max_width) j["max_gbytes_per_s"] = pcie_lane_gbytes(mg) * max_width;
  j["below_max_width"] = max_width > 0 && width < max_width;
  j["below_max_speed"] = max_gen > 0 && gen < max_gen;
  return j;
}

// The lowest NUMA node NVML names nearest the GPU; -1 when it cannot say.
int nvml_numa_node(const nvml::Lib& ml, nvml::Device h) {
  if (!h || !ml.memory_affinity) return -1;
  unsigned long set[4] = {0, 0, 0, 0};
  if (ml.memory_affinity(h, 4, set, nvml::kAffinityScopeNode) != 0) return -1;
  for (int i = 0; i < 4 * 64; ++i)
    if (set[i / 64] >> (i % 64) & 1ul) return i;
  return -1;
}

std::string uuid_text(const cudaUUID_t& u) {
  std::string s = "GPU-";
  char b[3];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(u.bytes[i]));
    s += b;
    if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
  }
  return s;
}

// NVML's state for the report, started when asked for and it loads ("available" true then).
json start_nvml(const GpuTopologyOptions& opt, const nvml::Lib& ml) {
  json nv;
  if (!opt.use_nvml) {
    nv = {{"available", false}, {"why", "not asked for"}};
  } else if (!ml.handle) {
    nv = {{"available", false}, {"why", ml.why}};
  } else if (const nvml::Return r = ml.init(); r != 0) {
    nv = {{"available", false},
          {"why", std::string("nvmlInit: ") + (ml.error_string ? ml.error_string(r) : std::to_string(r))}};
  } else {
    nv["available"] = true;
    char v[96] = {0};
    if (ml.driver_version && ml.driver_version(v, sizeof v) == 0) nv["driver_version"] = v;
  }
  return nv;
}

// One GPU's facts from CUDA, sysfs and NVML; its NVML handle (null without) and its bus id
// (into index_of_bdf) on the way.
json describe_gpu(int d, const GpuTopologyOptions& opt, const nvml::Lib& ml, bool have_nvml, nvml::Device* handle,
                  std::map<std::string, int>& index_of_bdf) {
  json g;
  g["index"] = d;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
    g["name"] = prop.name;
    g["memory_bytes"] = prop.totalGlobalMem;
    g["compute_capability"] = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    g["multiprocessors"] = prop.multiProcessorCount;
    g["uuid"] = uuid_text(prop.uuid);
  } else {
    cudaGetLastError();
  }
  char bus[32] = {0};
  std::string bdf;
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess)
    bdf = normalize_bdf(bus);
  else
    cudaGetLastError();
  g["pci_bus_id"] = bdf;
  if (!bdf.empty()) {
    index_of_bdf[bdf] = d;
    const std::string dir = opt.sysfs_root + "/bus/pci/devices/" + bdf;
    const std::string numa = read_line(dir + "/numa_node");
    if (!numa.empty()) g["numa_node"] = std::atoi(numa.c_str());
    json link = read_pcie_link(dir);
    if (!link.is_null()) g["pcie"] = std::move(link);
    if (have_nvml && ml.by_pci(bdf.c_str(), handle) != 0) *handle = nullptr;
    // What sysfs does not say (a container without /sys/bus/pci, the stand-in), NVML may.
    const nvml::Device h = *handle;
    if (!g.contains("pcie"))
      if (json nl = nvml_pcie_link(ml, h); !nl.is_null()) g["pcie"] = std::move(nl);
    if (!g.contains("numa_node"))
      if (const int node = nvml_numa_node(ml, h); node >= 0) g["numa_node"] = node;
  }
  return g;
}

// A GPU's NVLinks from NVML: each active link, counted in nl_row by the GPU at its end, or in
// switch_links when it goes to an NVSwitch.
json nvlink_of(const nvml::Lib& ml, nvml::Device h, const std::map<std::string, int>& index_of_bdf,
               std::vector<int>* nl_row, int* switch_links) {
  json ls = json::array(), down = json::array();
  int active = 0, present = 0;
  for (unsigned l = 0; l < nvml::kMaxLinks; ++l) {
    int state = 0;
    if (ml.link_state(h, l, &state) != 0) continue;  // not a link of this GPU
    ++present;
    if (!state) {  // the GPU has the link, but it is not up
      down.push_back(l);
      continue;
    }
    ++active;
    json e = {{"link", l}};
    unsigned ver = 0;
    if (ml.link_version && ml.link_version(h, l, &ver) == 0) e["version"] = ver;
    // Through an NVSwitch the link's remote end is the switch, not a GPU: such links reach
    // every other switch-connected GPU (HGX), and are counted per pair below.
    int rtype = -1;
    if (ml.remote_type && ml.remote_type(h, l, &rtype) == 0 && rtype == nvml::kRemoteSwitch) {
      e["remote_type"] = "nvswitch";
      ++*switch_links;
    }
    nvml::PciInfo pci{};
    if (rtype != nvml::kRemoteSwitch && ml.link_remote_pci && ml.link_remote_pci(h, l, &pci) == 0) {
      const std::string remote = normalize_bdf(pci.busId);
      e["remote_pci_bus_id"] = remote;
      if (auto it = index_of_bdf.find(remote); it != index_of_bdf.end()) {
        e["remote_index"] = it->second;
        ++(*nl_row)[static_cast<size_t>(it->second)];
      }
    }
    ls.push_back(std::move(e));
  }
  return {{"active", active}, {"present", present}, {"down", down}, {"links", ls}};
}

}  // namespace

json gpu_topology(const GpuTopologyOptions& opt, std::string* error) {
  const CudaProbe p = cuda_probe();
  if (p.count <= 0) {
    if (error) *error = "no usable CUDA device (cudaGetDeviceCount: " + (p.error.empty() ? "0 devices" : p.error) + ")";
    return json::object();
  }
  const int n = p.count;
  json out;
  out["host"] = host_name();
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  out["cuda_runtime"] = cuda_version_text(rt);
  out["cuda_driver"] = cuda_version_text(drv);
  out["device_count"] = n;

  // NVML, when it loads and starts.
  const nvml::Lib& ml = nvml::lib();
  json nv = start_nvml(opt, ml);
  const bool have_nvml = nv["available"].get<bool>();

  json gpus = json::array();
  std::vector<nvml::Device> handles(static_cast<size_t>(n), nullptr);
  std::map<std::string, int> index_of_bdf;
  for (int d = 0; d < n; ++d)
    gpus.push_back(describe_gpu(d, opt, ml, have_nvml, &handles[static_cast<size_t>(d)], index_of_bdf));

  json access = json::array(), links = json::array(), path = json::array();
  std::vector<std::vector<int> > nl(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), 0));
  std::vector<int> switch_links(static_cast<size_t>(n), 0);
  for (int d = 0; d < n; ++d) {
    json& g = gpus[static_cast<size_t>(d)];
    const nvml::Device h = handles[static_cast<size_t>(d)];
    if (!h || !ml.link_state) {
      g["nvlink"] = {{"available", false}, {"why", have_nvml ? "no NVML handle for this GPU" : nv["why"]}};
      continue;
    }
    g["nvlink"] = nvlink_of(ml, h, index_of_bdf, &nl[static_cast<size_t>(d)], &switch_links[static_cast<size_t>(d)]);
  }
  // Pairs of GPUs on NVSwitches: the links the slower of the two has to the switches, when NVML
  // confirms NVLink peer-to-peer between them (or cannot say).
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const size_t ia = static_cast<size_t>(a), ib = static_cast<size_t>(b);
      if (a == b || !switch_links[ia] || !switch_links[ib]) continue;
      int st = nvml::kP2pOk;
      const nvml::Device ha = handles[ia], hb = handles[ib];
      if (ml.p2p_status && ha && hb && ml.p2p_status(ha, hb, nvml::kP2pNvlink, &st) != 0) st = nvml::kP2pOk;
      if (st == nvml::kP2pOk) nl[ia][ib] += std::min(switch_links[ia], switch_links[ib]);
    }
  for (int a = 0; a < n; ++a) {
    json arow = json::array(), lrow = json::array(), prow = json::array();
    for (int b = 0; b < n; ++b) {
      if (a == b) {
        arow.push_back(nullptr);
        lrow.push_back(nullptr);
        prow.push_back(nullptr);
        continue;
      }
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) cudaGetLastError();
      arow.push_back(can != 0);
      lrow.push_back(have_nvml ? json(nl[static_cast<size_t>(a)][static_cast<size_t>(b)]) : json(nullptr));
      int level = -1;
      const nvml::Device ha = handles[static_cast<size_t>(a)], hb = handles[static_cast<size_t>(b)];
      if (ha && hb && ml.common_ancestor && ml.common_ancestor(ha, hb, &level) == 0 &&
          !topology_level_name(level).empty())
        prow.push_back(topology_level_name(level));
      else
        prow.push_back(nullptr);
    }
    access.push_back(std::move(arow));
    links.push_back(std::move(lrow));
    path.push_back(std::move(prow));
  }
  if (have_nvml) ml.shutdown();
  out["gpus"] = std::move(gpus);
  out["peer_access"] = std::move(access);
  out["nvlink_matrix"] = std::move(links);
  out["path"] = std::move(path);
  out["nvml"] = std::move(nv);
  return out;
}

namespace {
// A GPU's NVLink facts in the host topology: links active and present, the ones down, how many
// go to NVSwitches, the NVLink version.
void add_nvlink_facts(json& o, const json& g) {
  if (!g.contains("nvlink") || !g["nvlink"].contains("active")) return;
  const json& n = g["nvlink"];
  o["nvlinks_active"] = n["active"];
  if (n.contains("present")) o["nvlinks_present"] = n["present"];
  if (n.contains("down") && !n["down"].empty()) o["nvlinks_down"] = n["down"];
  int to_switch = 0;
  for (const auto& e : n.value("links", json::array())) {
    if (e.value("remote_type", "") == "nvswitch") ++to_switch;
    if (e.contains("version") && !o.contains("nvlink_version")) o["nvlink_version"] = e["version"];
  }
  if (to_switch) o["nvswitch_links"] = to_switch;
}
}  // namespace

void probe_gpus(json& gpus, json& gpu_links) {
  std::string err;
  const json t = gpu_topology({}, &err);
  if (t.empty()) return;
  // CUDA index -> position in `gpus` (the PCI bus view), matched by PCI address.
  std::map<int, size_t> pos;
  const size_t from_sysfs = gpus.size();
  for (size_t i = 0; i < from_sysfs; ++i) {
    if (!gpus[i].contains("bdf") || !gpus[i]["bdf"].is_string()) continue;
    const std::string bdf = normalize_bdf(gpus[i]["bdf"].get<std::string>());
    for (const auto& g : t["gpus"]) {
      if (g.value("pci_bus_id", "") != bdf) continue;
      const int d = g["index"];
      pos[d] = i;
      json& o = gpus[i];
      o["cuda_index"] = d;
      for (const char* k : {"name", "uuid", "memory_bytes", "compute_capability", "multiprocessors"})
        if (g.contains(k)) o[k] = g[k];
      add_nvlink_facts(o, g);
      if (!o.contains("pcie") && g.contains("pcie")) o["pcie"] = g["pcie"];
      if (!o.contains("numa_node") && g.contains("numa_node")) o["numa_node"] = g["numa_node"];
      o["source"] = "sysfs+cuda";
    }
  }
  // GPUs that CUDA sees and sysfs does not list (no /sys/bus/pci in a container, the stand-in):
  // what CUDA and NVML say of them.
  for (const auto& g : t["gpus"]) {
    const int d = g["index"];
    if (pos.count(d)) continue;
    json o = {{"bdf", g.value("pci_bus_id", "")}, {"cuda_index", d}, {"source", "cuda+nvml"}};
    for (const char* k : {"name", "uuid", "memory_bytes", "compute_capability", "multiprocessors", "numa_node", "pcie"})
      if (g.contains(k)) o[k] = g[k];
    add_nvlink_facts(o, g);
    pos[d] = gpus.size();
    gpus.push_back(std::move(o));
  }
  for (const auto& [a, pa] : pos)
    for (const auto& [b, pb] : pos) {
      if (b <= a) continue;
      const size_t ia = static_cast<size_t>(a), ib = static_cast<size_t>(b);
      json l = {{"a", pa}, {"b", pb}, {"peer_access", t["peer_access"][ia][ib]}};
      const json& links = t["nvlink_matrix"][ia][ib];
      const json& path = t["path"][ia][ib];
      if (links.is_number() && links.get<int>() > 0) {
        l["kind"] = "NVLink";
        l["links"] = links;
        const auto& nvl = t["gpus"][ia]["nvlink"];
        for (const auto& e : nvl.value("links", json::array()))
          if (e.value("remote_index", -1) == b && e.contains("version")) {
            l["version"] = e["version"];
            break;
          }
      } else if (path.is_string()) {
        l["kind"] = path;
      } else {
        continue;  // nothing known about this pair
      }
      gpu_links.push_back(std::move(l));
    }
}

}  // namespace cs
