// local_topology(): what this process runs on, read from sysfs (under a configurable root),
// sched_getaffinity, hwloc (when built with it) and /proc/self/exe.
//
// A NIC in "nics" is one of
//   {name, kind = "rdma", node_guid, fw_ver, hca_type, board_id, netdevs = [...], pci = {...},
//    ports = [{port, state, phys_state, rate, rate_gbps, link_layer}]}
//       from /sys/class/infiniband/<dev> (InfiniBand, RoCE, EFA ...);
//   {name, kind = "net", type = "ethernet" | "infiniband" | <number>, operstate, speed_mbps,
//    mtu, rdma_device, pci = {...}}
//       from /sys/class/net/<if> that have a device (virtual interfaces are left out).
// `pci` is {bdf, class_id, vendor_id, device_id, vendor, driver, numa_node, local_cpus, pcie},
// `pcie` as read_pcie_link() describes it.
#include "topology.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <regex>
#include <sstream>

#include "file_digest.hpp"
#include "file_read.hpp"
#include "gpu_topology.hpp"
#include "host_name.hpp"
#include "int_list.hpp"
#include "text.hpp"

#ifdef COMMSCRIPT_HAVE_HWLOC
#include <hwloc.h>
#endif

extern char** environ;

namespace cs {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::mutex g_probe_mu;
GpuProbe g_probe;

// core/text.hpp's trim, as an owned string (the callers pass temporaries)
std::string trimmed(const std::string& s) { return std::string(cs::trim(s)); }

// The trimmed text of a file; nullopt when it cannot be opened or read (sysfs answers EINVAL
// to a read of `speed` on an interface that is down) or is empty.
// file_read.hpp: a FIFO or a device under a sysfs root is not read (nor waited on).
std::optional<std::string> read_text(const fs::path& p) {
  const FileRead r = read_regular_file(p.string(), 1 << 20);
  if (!r.ok()) return std::nullopt;
  std::string s = trimmed(r.text);
  if (s.empty()) return std::nullopt;
  return s;
}

std::optional<long long> parse_ll(const std::string& s, int base = 10) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, base);
  if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::optional<long long> read_ll(const fs::path& p, int base = 10) {
  auto t = read_text(p);
  if (!t) return std::nullopt;
  return parse_ll(*t, base);
}

// The entries of a directory, sorted by name ("" entries never); empty when it is missing.
std::vector<std::string> list_dir(const fs::path& p) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(p, ec);
  if (ec) return out;
  for (const auto& e : it) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// Digits after `prefix` ("node12" -> 12), or -1.
int numbered(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  auto v = parse_ll(name.substr(prefix.size()));
  return v && *v >= 0 && *v < (1 << 30) ? static_cast<int>(*v) : -1;
}

bool is_bdf(const std::string& s) {
  static const std::regex re("^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$");
  return std::regex_match(s, re);
}

// KEY=value lines of a uevent file.
std::string uevent_value(const fs::path& dir, const std::string& key) {
  auto t = read_text(dir / "uevent");
  if (!t) return {};
  std::istringstream in(*t);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == '=')
      return trimmed(line.substr(key.size() + 1));
  }
  return {};
}

std::string vendor_name(long long id) {
  switch (id) {
    case 0x10de:
      return "NVIDIA";
    case 0x15b3:
      return "Mellanox (NVIDIA)";
    case 0x8086:
      return "Intel";
    case 0x1002:
      return "AMD";
    case 0x14e4:
      return "Broadcom";
    case 0x1d0f:
      return "Amazon";
    case 0x1af4:
      return "virtio";
    case 0x1077:
      return "QLogic";
    case 0x19e5:
      return "Huawei";
    case 0x1da3:
      return "Habana";
    case 0x1a03:
      return "ASPEED";
    default:
      return {};
  }
}

std::string hex(long long v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, v);
  return buf;
}

// The PCI device directory of a PCI address: <root>/bus/pci/devices/<bdf>.
fs::path pci_dir(const std::string& root, const std::string& bdf) { return fs::path(root) / "bus/pci/devices" / bdf; }

json read_pci(const std::string& root, const std::string& bdf) {
  const fs::path d = pci_dir(root, bdf);
  json j;
  j["bdf"] = bdf;
  if (auto c = read_ll(d / "class", 16)) j["class_id"] = hex(*c, 6);
  if (auto v = read_ll(d / "vendor", 16)) {
    j["vendor_id"] = hex(*v, 4);
    const std::string n = vendor_name(*v);
    if (!n.empty()) j["vendor"] = n;
  }
  if (auto v = read_ll(d / "device", 16)) j["device_id"] = hex(*v, 4);
  const std::string drv = uevent_value(d, "DRIVER");
  if (!drv.empty()) j["driver"] = drv;
  if (auto n = read_ll(d / "numa_node"); n && *n >= 0) j["numa_node"] = *n;
  if (auto c = read_text(d / "local_cpulist")) j["local_cpus"] = *c;
  json link = read_pcie_link(d.string());
  if (!link.is_null()) j["pcie"] = std::move(link);
  return j;
}

json numa_nodes(const std::string& root) {
  json out = json::array();
  std::vector<std::pair<int, std::string>> nodes;
  const fs::path base = fs::path(root) / "devices/system/node";
  for (const auto& n : list_dir(base)) {
    const int id = numbered(n, "node");
    if (id < 0) continue;
    nodes.emplace_back(id, read_text(base / n / "cpulist").value_or(""));
  }
  std::sort(nodes.begin(), nodes.end());
  for (const auto& [id, list] : nodes) {
    const auto cpus = parse_int_ranges(list, false);
    out.push_back({{"node", id}, {"cpus", format_int_ranges(cpus)}, {"count", cpus.size()}});
  }
  return out;
}

std::vector<int> process_affinity() {
  for (int n = 1024; n <= (1 << 16); n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) return {};
    const size_t sz = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(sz, set);
    if (sched_getaffinity(0, sz, set) == 0) {
      std::vector<int> out;
      for (int i = 0; i < n; ++i)
        if (CPU_ISSET_S(i, sz, set)) out.push_back(i);
      CPU_FREE(set);
      return out;
    }
    const int err = errno;
    CPU_FREE(set);
    if (err != EINVAL) break;
  }
  return {};
}

json rdma_nics(const std::string& root) {
  json out = json::array();
  const fs::path base = fs::path(root) / "class/infiniband";
  for (const auto& dev : list_dir(base)) {
    const fs::path d = base / dev;
    json nic;
    nic["name"] = dev;
    nic["kind"] = "rdma";
    for (const char* f : {"node_guid", "fw_ver", "hca_type", "board_id"})
      if (auto t = read_text(d / f)) nic[f] = *t;
    json netdevs = json::array();
    for (const auto& n : list_dir(d / "device/net")) netdevs.push_back(n);
    nic["netdevs"] = std::move(netdevs);
    const std::string bdf = pci_address_of((d / "device").string());
    if (!bdf.empty()) nic["pci"] = read_pci(root, bdf);
    std::vector<std::pair<int, std::string>> ports;
    for (const auto& p : list_dir(d / "ports"))
      if (auto v = parse_ll(p); v && *v >= 0 && *v < 1024) ports.emplace_back(static_cast<int>(*v), p);
    std::sort(ports.begin(), ports.end());
    json pj = json::array();
    for (const auto& [num, name] : ports) {
      const fs::path pd = d / "ports" / name;
      json port;
      port["port"] = num;
      if (auto s = read_text(pd / "state")) port["state"] = strip_state_number(*s);
      if (auto s = read_text(pd / "phys_state")) port["phys_state"] = strip_state_number(*s);
      if (auto s = read_text(pd / "rate")) {
        port["rate"] = *s;
        const double g = ib_rate_gbps(*s);
        if (g > 0) port["rate_gbps"] = g;
      }
      if (auto s = read_text(pd / "link_layer")) port["link_layer"] = *s;
      pj.push_back(std::move(port));
    }
    nic["ports"] = std::move(pj);
    out.push_back(std::move(nic));
  }
  return out;
}

json net_nics(const std::string& root, const json& rdma) {
  json out = json::array();
  const fs::path base = fs::path(root) / "class/net";
  for (const auto& ifname : list_dir(base)) {
    const fs::path d = base / ifname;
    if (!path_exists(d / "device")) continue;  // virtual: lo, bridges, veth, ifb, bonds ...
    json nic;
    nic["name"] = ifname;
    nic["kind"] = "net";
    if (auto t = read_ll(d / "type")) {
      if (*t == 1)
        nic["type"] = "ethernet";
      else if (*t == 32)
        nic["type"] = "infiniband";
      else
        nic["type"] = *t;
    }
    if (auto s = read_text(d / "operstate")) nic["operstate"] = *s;
    if (auto s = read_ll(d / "speed"); s && *s > 0) nic["speed_mbps"] = *s;
    if (auto m = read_ll(d / "mtu")) nic["mtu"] = *m;
    auto ib = list_dir(d / "device/infiniband");
    if (!ib.empty())
      nic["rdma_device"] = ib.front();
    else
      for (const auto& r : rdma)
        for (const auto& n : r.value("netdevs", json::array()))
          if (n == ifname) nic["rdma_device"] = r.value("name", "");
    const std::string bdf = pci_address_of((d / "device").string());
    if (!bdf.empty())
      nic["pci"] = read_pci(root, bdf);
    else if (auto drv = uevent_value(d / "device", "DRIVER"); !drv.empty())
      nic["driver"] = drv;
    out.push_back(std::move(nic));
  }
  return out;
}

// GPUs (and accelerators) on the PCI bus: 3D controllers, display "other" and processing
// accelerators of any vendor, VGA controllers of NVIDIA and AMD (not a server's BMC VGA).
bool is_gpu_class(long long cls, long long vendor) {
  const long long sub = cls >> 8;  // class + subclass
  if (sub == 0x0302 || sub == 0x0380 || sub == 0x1200) return true;
  return sub == 0x0300 && (vendor == 0x10de || vendor == 0x1002);
}

json sysfs_gpus(const std::string& root) {
  json out = json::array();
  const fs::path base = fs::path(root) / "bus/pci/devices";
  for (const auto& bdf : list_dir(base)) {
    const auto cls = read_ll(base / bdf / "class", 16);
    const auto vendor = read_ll(base / bdf / "vendor", 16);
    if (!cls || !vendor || !is_gpu_class(*cls, *vendor)) continue;
    json g = read_pci(root, bdf);
    g["source"] = "sysfs";
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

json exe_info(const std::string& path, const std::string& cache_dir, double min_age_s) {
  json j;
  std::error_code ec;
  fs::path real = fs::is_symlink(path, ec) ? fs::read_symlink(path, ec) : fs::path(path);
  j["path"] = ec ? path : real.string();
  const FileDigest d = sha256_file_cached(path, cache_dir, min_age_s);
  if (!d.ok) {
    j["error"] = d.why;
    return j;
  }
  j["size"] = d.size;
  j["sha256"] = d.sha256;
  j["sha256_from"] = d.from;
  return j;
}

namespace {

json environment(const std::vector<std::string>& prefixes) {
  json j = json::object();
  for (char** p = environ; p && *p; ++p) {
    const char* eq = std::strchr(*p, '=');
    if (!eq) continue;
    const std::string name(*p, static_cast<size_t>(eq - *p));
    if (!is_secret_env_name(name) && env_name_in(name, prefixes)) j[name] = eq + 1;
  }
  return j;
}

#ifdef COMMSCRIPT_HAVE_HWLOC
json hwloc_summary() {
  json j;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return {{"available", false}, {"why", "hwloc_topology_init failed"}};
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return {{"available", false}, {"why", "hwloc_topology_load failed"}};
  }
  const unsigned api = hwloc_get_api_version();
  j["available"] = true;
  j["api_version"] =
      std::to_string(api >> 16) + "." + std::to_string((api >> 8) & 0xff) + "." + std::to_string(api & 0xff);
#ifdef HWLOC_VERSION
  j["version"] = HWLOC_VERSION;  // of the headers built against
#endif
  j["packages"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  j["cores"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  j["pus"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  j["numa_nodes"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0))
    if (const char* m = hwloc_obj_get_info_by_name(pkg, "CPUModel")) j["cpu_model"] = m;
  json pci = json::array();
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, nullptr); o; o = hwloc_get_next_pcidev(topo, o)) {
    const auto& a = o->attr->pcidev;
    const unsigned cls = a.class_id >> 8;
    const char* kind = cls == 0x02 ? "network" : cls == 0x03 ? "display" : cls == 0x12 ? "accelerator" : nullptr;
    if (!kind) continue;
    char bdf[32];
    std::snprintf(bdf, sizeof bdf, "%04x:%02x:%02x.%01x", static_cast<unsigned>(a.domain), a.bus, a.dev, a.func);
    json d;
    d["bdf"] = bdf;
    d["kind"] = kind;
    d["class_id"] = hex(a.class_id, 4);
    d["vendor_id"] = hex(a.vendor_id, 4);
    d["device_id"] = hex(a.device_id, 4);
    if (const char* n = hwloc_obj_get_info_by_name(o, "PCIVendor")) d["vendor"] = n;
    if (const char* n = hwloc_obj_get_info_by_name(o, "PCIDevice")) d["name"] = n;
    if (a.linkspeed > 0) d["linkspeed_gbytes_per_s"] = a.linkspeed;
    json numa = json::array();
    if (hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, o); anc && anc->nodeset) {
      int i = hwloc_bitmap_first(anc->nodeset);
      while (i >= 0) {
        numa.push_back(i);
        i = hwloc_bitmap_next(anc->nodeset, i);
      }
    }
    d["numa_nodes"] = std::move(numa);
    json osdevs = json::array();
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) osdevs.push_back(c->name);
    d["os_devices"] = std::move(osdevs);
    pci.push_back(std::move(d));
  }
  j["pci"] = std::move(pci);
  hwloc_topology_destroy(topo);
  return j;
}
#endif

}  // namespace

// gpu_topology.hpp's, here because both builds need it (gpu_topology.cpp is CUDA's alone).
std::string topology_level_name(int level) {
  switch (level) {
    case 0:
      return "internal";
    case 10:
      return "PIX";
    case 20:
      return "PXB";
    case 30:
      return "PHB";
    case 40:
      return "NODE";
    case 50:
      return "SYS";
    default:
      return "";
  }
}

void set_gpu_probe(GpuProbe probe) {
  std::lock_guard<std::mutex> lock(g_probe_mu);
  g_probe = std::move(probe);
}

int pcie_gen_from_speed(const std::string& speed) {
  const char* s = speed.c_str();
  char* end = nullptr;
  const double gts = std::strtod(s, &end);
  if (end == s || !(gts > 0)) return 0;
  if (gts < 3.5) return 1;  // 2.5 GT/s
  if (gts < 6.5) return 2;  // 5
  if (gts < 12) return 3;   // 8
  if (gts < 24) return 4;   // 16
  if (gts < 48) return 5;   // 32
  if (gts < 96) return 6;   // 64
  return 7;                 // 128
}

double pcie_lane_gbytes(int gen) {
  switch (gen) {
    case 1:
      return 0.25;  // 2.5 GT/s, 8b/10b
    case 2:
      return 0.5;  // 5 GT/s, 8b/10b
    case 3:
      return 8.0 * 128.0 / 130.0 / 8.0;  // 128b/130b
    case 4:
      return 16.0 * 128.0 / 130.0 / 8.0;
    case 5:
      return 32.0 * 128.0 / 130.0 / 8.0;
    case 6:
      return 64.0 * 242.0 / 256.0 / 8.0;  // PAM4, FLIT mode
    case 7:
      return 128.0 * 242.0 / 256.0 / 8.0;
    default:
      return 0.0;
  }
}

json read_pcie_link(const std::string& dir) {
  const fs::path d(dir);
  auto speed = read_text(d / "current_link_speed");
  auto max_speed = read_text(d / "max_link_speed");
  auto width_of = [](const std::optional<std::string>& t) -> int {
    if (!t) return 0;
    std::string s = *t;
    if (!s.empty() && (s[0] == 'x' || s[0] == 'X')) s.erase(0, 1);
    auto v = parse_ll(s);
    return v && *v > 0 && *v <= 64 ? static_cast<int>(*v) : 0;
  };
  auto width_text = read_text(d / "current_link_width");
  auto max_width_text = read_text(d / "max_link_width");
  if (!speed && !max_speed && !width_text && !max_width_text) return nullptr;
  const int width = width_of(width_text), max_width = width_of(max_width_text);
  const int gen = speed ? pcie_gen_from_speed(*speed) : 0;
  const int max_gen = max_speed ? pcie_gen_from_speed(*max_speed) : 0;
  json j;
  if (speed) j["speed"] = *speed;
  if (gen) j["gen"] = gen;
  if (width) j["width"] = width;
  if (max_speed) j["max_speed"] = *max_speed;
  if (max_gen) j["max_gen"] = max_gen;
  if (max_width) j["max_width"] = max_width;
  if (gen && width) j["gbytes_per_s"] = pcie_lane_gbytes(gen) * width;
  if (max_gen && max_width) j["max_gbytes_per_s"] = pcie_lane_gbytes(max_gen) * max_width;
  j["below_max_width"] = width > 0 && max_width > 0 && width < max_width;
  j["below_max_speed"] = gen > 0 && max_gen > 0 && gen < max_gen;
  return j;
}

double ib_rate_gbps(const std::string& rate) {
  const char* s = rate.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || !(v > 0)) return 0.0;
  return v;
}

std::string strip_state_number(const std::string& s) {
  const auto colon = s.find(':');
  if (colon == std::string::npos) return trimmed(s);
  const std::string head = trimmed(s.substr(0, colon));
  if (head.empty() || !std::all_of(head.begin(), head.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return trimmed(s);
  return trimmed(s.substr(colon + 1));
}

std::string pci_address_of(const std::string& device_path) {
  std::error_code ec;
  const fs::path real = fs::canonical(device_path, ec);
  if (!ec) {
    // The deepest PCI address on the path (a virtio or USB device sits below its PCI function).
    std::string found;
    for (const auto& part : real)
      if (is_bdf(part.string())) found = part.string();
    if (!found.empty()) return found;
  }
  // Fixture trees (no symlinks) and devices whose path does not show it: the uevent says.
  const std::string slot = uevent_value(device_path, "PCI_SLOT_NAME");
  return is_bdf(slot) ? slot : std::string();
}

json local_topology(const TopologyOptions& opt) {
  const std::string& root = opt.sysfs_root;
  json j;
  j["host"] = host_name();
  j["pid"] = static_cast<long long>(getpid());
  j["sysfs_root"] = root;

  // CPU binding and the NUMA nodes it spans.
  std::vector<int> cpus = opt.affinity ? *opt.affinity : process_affinity();
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  json numa = numa_nodes(root);
  json cpu;
  cpu["affinity"] = format_int_ranges(cpus);
  cpu["cpus"] = cpus;
  cpu["count"] = cpus.size();
  if (auto online = read_text(fs::path(root) / "devices/system/cpu/online")) {
    const auto on = parse_int_ranges(*online, false);
    cpu["online"] = format_int_ranges(on);
    cpu["online_count"] = on.size();
    cpu["bound"] = !on.empty() && !std::includes(cpus.begin(), cpus.end(), on.begin(), on.end());
  }
  json bound_nodes = json::array();
  for (const auto& n : numa) {
    const auto node_cpus = parse_int_ranges(n["cpus"].get<std::string>(), false);
    const bool hit = std::any_of(cpus.begin(), cpus.end(),
                                 [&](int c) { return std::binary_search(node_cpus.begin(), node_cpus.end(), c); });
    if (hit) bound_nodes.push_back(n["node"]);
  }
  cpu["numa_nodes"] = std::move(bound_nodes);
  j["cpu"] = std::move(cpu);
  j["numa"] = std::move(numa);

#ifdef COMMSCRIPT_HAVE_HWLOC
  if (opt.use_hwloc && fs::path(root).lexically_normal() == fs::path("/sys"))
    j["hwloc"] = hwloc_summary();
  else
    j["hwloc"] = {{"available", false}, {"why", opt.use_hwloc ? "sysfs_root is not /sys" : "not asked for"}};
#else
  j["hwloc"] = {{"available", false}, {"why", "built without hwloc"}};
#endif

  json rdma = rdma_nics(root);
  json net = net_nics(root, rdma);
  json nics = json::array();
  for (auto& n : rdma) nics.push_back(std::move(n));
  for (auto& n : net) nics.push_back(std::move(n));
  j["nics"] = std::move(nics);

  // GPUs: the PCI bus view; the CUDA/NVML side fills in the rest through the probe.
  json gpus = sysfs_gpus(root);
  json links = json::array();
  GpuProbe probe = opt.gpu_probe;
  if (!probe) {
    std::lock_guard<std::mutex> lock(g_probe_mu);
    probe = g_probe;
  }
  if (probe) {
    try {
      probe(gpus, links);
    } catch (const std::exception& e) {
      j["gpu_probe_error"] = e.what();
    }
  }
  j["gpus"] = std::move(gpus);
  j["gpu_links"] = std::move(links);

  if (!opt.exe_path.empty())
    j["exe"] = exe_info(opt.exe_path, opt.hash_cache_dir == "auto" ? default_hash_cache_dir() : opt.hash_cache_dir,
                        opt.hash_cache_min_age_s);
  j["env"] = environment(opt.env_prefixes);
  j["versions"] = opt.versions.is_null() ? json::object() : opt.versions;
  return j;
}

}  // namespace cs
