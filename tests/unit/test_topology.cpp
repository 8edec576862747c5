// engine/topology.cpp on fixture sysfs trees (tests/fixtures/sysfs/<case>/, README there):
// NUMA nodes of a binding, InfiniBand ports and their rates, Ethernet speed, PCIe links trained
// below their maximum, GPUs found by PCI class, the binary's hash, NCCL_* variables, the GPU
// probe hook; and the parsers (CPU lists, PCIe speeds, IB rates, PCI addresses).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "env_policy.hpp"
#include "int_list.hpp"
#include "topology.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) {
  return (fs::path(__FILE__).parent_path().parent_path() / "fixtures" / "sysfs" / name).string();
}

// A fresh directory under the temp dir, removed at the end of the scope.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("cs_topo_test_" + std::to_string(getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

cs::TopologyOptions fixture_options(const std::string& name) {
  cs::TopologyOptions o;
  o.sysfs_root = fixture(name);
  o.exe_path.clear();
  o.use_hwloc = false;
  o.affinity = std::vector<int>{2, 3, 4, 5};
  o.gpu_probe = [](json&, json&) {};  // keep any process-wide probe out of these tests
  return o;
}

const json* find_nic(const json& t, const std::string& name) {
  for (const auto& n : t["nics"])
    if (n["name"] == name) return &n;
  return nullptr;
}

}  // namespace

TEST_CASE("int ranges: lenient parse and format (CPU lists)", "[topology]") {
  CHECK(cs::parse_int_ranges("0-3,8,10-11", false) == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(cs::parse_int_ranges("5", false) == std::vector<int>{5});
  CHECK(cs::parse_int_ranges("", false).empty());
  CHECK(cs::parse_int_ranges(" 3 , 1-2\n", false) == std::vector<int>{1, 2, 3});
  CHECK(cs::parse_int_ranges("2,2,1-2", false) == std::vector<int>{1, 2});
  CHECK(cs::parse_int_ranges("x,4-2,7", false) == std::vector<int>{7});  // malformed parts skipped
  CHECK(cs::format_int_ranges({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(cs::format_int_ranges({11, 10, 3, 2, 1, 0, 8, 8}) == "0-3,8,10-11");
  CHECK(cs::format_int_ranges({}).empty());
  CHECK(cs::format_int_ranges({7}) == "7");
  CHECK(cs::format_int_ranges({1, 3}) == "1,3");
  CHECK(cs::format_int_ranges(cs::parse_int_ranges("0-63,128-191", false)) == "0-63,128-191");
}

TEST_CASE("PCIe speed strings map to generations and lane bandwidth", "[topology]") {
  CHECK(cs::pcie_gen_from_speed("2.5 GT/s PCIe") == 1);
  CHECK(cs::pcie_gen_from_speed("5.0 GT/s PCIe") == 2);
  CHECK(cs::pcie_gen_from_speed("8.0 GT/s PCIe") == 3);
  CHECK(cs::pcie_gen_from_speed("16.0 GT/s PCIe") == 4);
  CHECK(cs::pcie_gen_from_speed("16 GT/s") == 4);  // older kernels
  CHECK(cs::pcie_gen_from_speed("32.0 GT/s PCIe") == 5);
  CHECK(cs::pcie_gen_from_speed("64.0 GT/s PCIe") == 6);
  CHECK(cs::pcie_gen_from_speed("Unknown") == 0);
  CHECK(cs::pcie_gen_from_speed("") == 0);
  CHECK(cs::pcie_lane_gbytes(1) == Approx(0.25));
  CHECK(cs::pcie_lane_gbytes(3) == Approx(0.9846).epsilon(1e-3));
  CHECK(cs::pcie_lane_gbytes(4) * 16 == Approx(31.5).epsilon(1e-3));
  CHECK(cs::pcie_lane_gbytes(5) * 16 == Approx(63.0).epsilon(1e-3));
  CHECK(cs::pcie_lane_gbytes(0) == 0.0);
}

TEST_CASE("IB rates and port states", "[topology]") {
  CHECK(cs::ib_rate_gbps("200 Gb/sec (4X HDR)") == 200.0);
  CHECK(cs::ib_rate_gbps("56 Gb/sec (4X FDR)") == 56.0);
  CHECK(cs::ib_rate_gbps("2.5 Gb/sec (1X SDR)") == 2.5);
  CHECK(cs::ib_rate_gbps("invalid") == 0.0);
  CHECK(cs::strip_state_number("4: ACTIVE") == "ACTIVE");
  CHECK(cs::strip_state_number("1: DOWN") == "DOWN");
  CHECK(cs::strip_state_number("5: LinkUp") == "LinkUp");
  CHECK(cs::strip_state_number("ACTIVE") == "ACTIVE");
}

TEST_CASE("read_pcie_link: a link trained at x8 of x16", "[topology]") {
  const json gpu = cs::read_pcie_link(fixture("dual_numa") + "/bus/pci/devices/0000:17:00.0");
  REQUIRE(gpu.is_object());
  CHECK(gpu["speed"] == "16.0 GT/s PCIe");
  CHECK(gpu["gen"] == 4);
  CHECK(gpu["max_gen"] == 4);
  CHECK(gpu["width"] == 8);
  CHECK(gpu["max_width"] == 16);
  CHECK(gpu["below_max_width"] == true);
  CHECK(gpu["below_max_speed"] == false);
  CHECK(gpu["gbytes_per_s"].get<double>() == Approx(cs::pcie_lane_gbytes(4) * 8));
  CHECK(gpu["max_gbytes_per_s"].get<double>() == Approx(cs::pcie_lane_gbytes(4) * 16));

  const json nic = cs::read_pcie_link(fixture("dual_numa") + "/bus/pci/devices/0000:3b:00.0");
  CHECK(nic["below_max_width"] == false);
  CHECK(nic["below_max_speed"] == false);
  CHECK(nic["width"] == 16);

  // A device without link attributes (virtual, or a root complex device): null.
  CHECK(cs::read_pcie_link(fixture("dual_numa") + "/bus/pci/devices/0000:00:1f.0").is_null());
  CHECK(cs::read_pcie_link(fixture("dual_numa") + "/no/such/dir").is_null());
}

TEST_CASE("read_pcie_link: a link trained below its maximum speed", "[topology]") {
  TempDir t;
  std::ofstream(t.path / "current_link_speed") << "8.0 GT/s PCIe\n";
  std::ofstream(t.path / "max_link_speed") << "16.0 GT/s PCIe\n";
  std::ofstream(t.path / "current_link_width") << "16\n";
  std::ofstream(t.path / "max_link_width") << "16\n";
  const json l = cs::read_pcie_link(t.path.string());
  CHECK(l["gen"] == 3);
  CHECK(l["max_gen"] == 4);
  CHECK(l["below_max_speed"] == true);
  CHECK(l["below_max_width"] == false);
}

TEST_CASE("pci_address_of: uevent in fixtures, the resolved path in real sysfs", "[topology]") {
  CHECK(cs::pci_address_of(fixture("dual_numa") + "/class/net/eth0/device") == "0000:5e:00.0");
  CHECK(cs::pci_address_of(fixture("dual_numa") + "/class/infiniband/mlx5_0/device") == "0000:3b:00.0");
  CHECK(cs::pci_address_of(fixture("dual_numa") + "/class/net/lo/device").empty());

  // The kernel's layout: class/net/<if>/device is a link into devices/pci.../<bdf>[/virtioN].
  TempDir t;
  const fs::path pci = t.path / "devices/pci0000:00/0000:00:03.0";
  fs::create_directories(pci / "virtio2");
  fs::create_directories(t.path / "class/net/eth0");
  fs::create_directory_symlink("../../../devices/pci0000:00/0000:00:03.0/virtio2", t.path / "class/net/eth0/device");
  CHECK(cs::pci_address_of((t.path / "class/net/eth0/device").string()) == "0000:00:03.0");
  fs::create_directories(t.path / "class/net/eth1");
  fs::create_directory_symlink("../../../devices/pci0000:00/0000:00:03.0", t.path / "class/net/eth1/device");
  CHECK(cs::pci_address_of((t.path / "class/net/eth1/device").string()) == "0000:00:03.0");
}

TEST_CASE("local_topology on a host with 2 NUMA nodes, an HCA, an Ethernet NIC and a GPU", "[topology]") {
  const json t = cs::local_topology(fixture_options("dual_numa"));

  SECTION("host, process, CPUs and NUMA") {
    CHECK(t["host"].is_string());
    CHECK(t["pid"] == static_cast<long long>(getpid()));
    CHECK(t["cpu"]["affinity"] == "2-5");
    CHECK(t["cpu"]["count"] == 4);
    CHECK(t["cpu"]["cpus"] == json::array({2, 3, 4, 5}));
    CHECK(t["cpu"]["online"] == "0-7");
    CHECK(t["cpu"]["online_count"] == 8);
    CHECK(t["cpu"]["bound"] == true);
    CHECK(t["cpu"]["numa_nodes"] == json::array({0, 1}));  // 2-3 on node 0, 4-5 on node 1
    REQUIRE(t["numa"].size() == 2);
    CHECK(t["numa"][0]["node"] == 0);
    CHECK(t["numa"][0]["cpus"] == "0-3");
    CHECK(t["numa"][1]["node"] == 1);
    CHECK(t["numa"][1]["cpus"] == "4-7");
    CHECK(t["numa"][1]["count"] == 4);
    CHECK(t["hwloc"]["available"] == false);
    CHECK_FALSE(t.contains("exe"));
  }

  SECTION("the InfiniBand HCA: one ACTIVE 200 Gb/s port, one DOWN") {
    const json* ib = find_nic(t, "mlx5_0");
    REQUIRE(ib != nullptr);
    CHECK((*ib)["kind"] == "rdma");
    CHECK((*ib)["fw_ver"] == "20.39.1002");
    CHECK((*ib)["netdevs"] == json::array({"ib0"}));
    REQUIRE((*ib)["ports"].size() == 2);
    const json& p1 = (*ib)["ports"][0];
    CHECK(p1["port"] == 1);
    CHECK(p1["state"] == "ACTIVE");
    CHECK(p1["phys_state"] == "LinkUp");
    CHECK(p1["rate"] == "200 Gb/sec (4X HDR)");
    CHECK(p1["rate_gbps"] == 200.0);
    CHECK(p1["link_layer"] == "InfiniBand");
    const json& p2 = (*ib)["ports"][1];
    CHECK(p2["port"] == 2);
    CHECK(p2["state"] == "DOWN");
    CHECK(p2["phys_state"] == "Disabled");
    const json& pci = (*ib)["pci"];
    CHECK(pci["bdf"] == "0000:3b:00.0");
    CHECK(pci["class_id"] == "0x020700");
    CHECK(pci["vendor_id"] == "0x15b3");
    CHECK(pci["driver"] == "mlx5_core");
    CHECK(pci["numa_node"] == 0);
    CHECK(pci["local_cpus"] == "0-3");
    CHECK(pci["pcie"]["gen"] == 4);
    CHECK(pci["pcie"]["width"] == 16);
    CHECK(pci["pcie"]["below_max_width"] == false);
  }

  SECTION("network interfaces: Ethernet at 25000 Mb/s, IPoIB tied to its HCA, lo left out") {
    const json* eth = find_nic(t, "eth0");
    REQUIRE(eth != nullptr);
    CHECK((*eth)["kind"] == "net");
    CHECK((*eth)["type"] == "ethernet");
    CHECK((*eth)["operstate"] == "up");
    CHECK((*eth)["speed_mbps"] == 25000);
    CHECK((*eth)["mtu"] == 9000);
    CHECK((*eth)["pci"]["bdf"] == "0000:5e:00.0");
    CHECK((*eth)["pci"]["numa_node"] == 1);
    CHECK((*eth)["pci"]["pcie"]["gen"] == 3);
    CHECK((*eth)["pci"]["pcie"]["width"] == 8);
    CHECK_FALSE(eth->contains("rdma_device"));
    const json* ib0 = find_nic(t, "ib0");
    REQUIRE(ib0 != nullptr);
    CHECK((*ib0)["type"] == "infiniband");
    CHECK((*ib0)["rdma_device"] == "mlx5_0");
    CHECK(find_nic(t, "lo") == nullptr);
    CHECK(t["nics"].size() == 3);
  }

  SECTION("GPUs by PCI class: the 3D controller at x8 of x16, not the BMC's VGA") {
    REQUIRE(t["gpus"].size() == 1);
    const json& g = t["gpus"][0];
    CHECK(g["bdf"] == "0000:17:00.0");
    CHECK(g["vendor"] == "NVIDIA");
    CHECK(g["source"] == "sysfs");
    CHECK(g["numa_node"] == 0);
    CHECK(g["pcie"]["width"] == 8);
    CHECK(g["pcie"]["max_width"] == 16);
    CHECK(g["pcie"]["below_max_width"] == true);
    CHECK(t["gpu_links"] == json::array());
  }
}

TEST_CASE("local_topology: the GPU probe hook fills gpus and gpu_links", "[topology]") {
  auto o = fixture_options("dual_numa");
  o.gpu_probe = [](json& gpus, json& links) {
    for (auto& g : gpus) g["name"] = "Test GPU";
    links.push_back({{"a", 0}, {"b", 1}, {"kind", "NVLink"}});
  };
  const json t = cs::local_topology(o);
  CHECK(t["gpus"][0]["name"] == "Test GPU");
  CHECK(t["gpu_links"][0]["kind"] == "NVLink");

  o.gpu_probe = [](json&, json&) { throw std::runtime_error("no NVML"); };
  const json u = cs::local_topology(o);
  CHECK(u["gpu_probe_error"] == "no NVML");
  CHECK(u["gpus"].size() == 1);

  // The process-wide probe, used when the options carry none.
  cs::set_gpu_probe([](json&, json& links) { links.push_back({{"kind", "SYS"}}); });
  o.gpu_probe = nullptr;
  const json w = cs::local_topology(o);
  cs::set_gpu_probe(nullptr);
  CHECK(w["gpu_links"].size() == 1);
  CHECK(cs::local_topology(o)["gpu_links"].empty());
}

TEST_CASE("local_topology: binary hash, NCCL_* variables, versions passed in", "[topology]") {
  TempDir t;
  std::ofstream(t.path / "exe", std::ios::binary) << "abc";
  auto o = fixture_options("dual_numa");
  o.exe_path = (t.path / "exe").string();
  o.hash_cache_dir.clear();
  o.versions = {{"nccl", "2.21.5"}};
  setenv("NCCL_CS_UNIT_TEST", "1", 1);
  setenv("NCCLX_CS_UNIT_TEST", "1", 1);
  setenv("CUDA_VISIBLE_DEVICES_CS_UNIT_TEST", "1", 1);
  const json j = cs::local_topology(o);
  unsetenv("NCCL_CS_UNIT_TEST");
  unsetenv("NCCLX_CS_UNIT_TEST");
  unsetenv("CUDA_VISIBLE_DEVICES_CS_UNIT_TEST");
  CHECK(j["exe"]["sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(j["exe"]["size"] == 3);
  CHECK(j["env"]["NCCL_CS_UNIT_TEST"] == "1");
  CHECK_FALSE(j["env"].contains("NCCLX_CS_UNIT_TEST"));
  CHECK_FALSE(j["env"].contains("CUDA_VISIBLE_DEVICES_CS_UNIT_TEST"));  // exact name, not a prefix
  CHECK(j["versions"]["nccl"] == "2.21.5");

  CHECK(j["exe"]["sha256_from"] == "computed");
  o.exe_path = (t.path / "missing").string();
  CHECK(cs::local_topology(o)["exe"].contains("error"));
}

// The topology records what the environment audit lints (env_policy.hpp, the one list): a family
// the audit knows but the topology left out (TORCH_FR_ once) would never be compared between ranks.
TEST_CASE("local_topology: records every family the environment audit lints, no credentials", "[topology]") {
  auto o = fixture_options("dual_numa");
  REQUIRE_FALSE(cs::env_audited_prefixes().empty());
  for (const auto& p : cs::env_audited_prefixes()) setenv((p + "CS_UNIT_TEST").c_str(), p.c_str(), 1);
  setenv("NCCL_IB_SECRET_CS_UNIT_TEST", "hunter2", 1);
  setenv("CUDA_VISIBLE_DEVICES", "3", 1);
  const json j = cs::local_topology(o);
  for (const auto& p : cs::env_audited_prefixes()) unsetenv((p + "CS_UNIT_TEST").c_str());
  unsetenv("NCCL_IB_SECRET_CS_UNIT_TEST");
  unsetenv("CUDA_VISIBLE_DEVICES");
  for (const auto& p : cs::env_audited_prefixes()) {
    INFO(p);
    CHECK(j["env"].value(p + "CS_UNIT_TEST", "") == p);
  }
  CHECK(j["env"].contains("TORCH_FR_CS_UNIT_TEST"));  // the family that once was audited only
  CHECK(j["env"]["CUDA_VISIBLE_DEVICES"] == "3");
  CHECK_FALSE(j["env"].contains("NCCL_IB_SECRET_CS_UNIT_TEST"));
  CHECK(o.env_prefixes == cs::env_topology_names());
}

namespace {
const char* kShaAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const char* kShaAbd = "a52d159f262b2c6ddb724a61840befc36eb30c88877a4030b65cbe86298449c9";
}  // namespace

TEST_CASE("exe_info: hashed once per file version, from the host's cache after", "[topology]") {
  TempDir t;
  const std::string exe = (t.path / "exe").string(), other = (t.path / "other").string();
  const std::string cache = (t.path / "cache").string();
  std::ofstream(exe, std::ios::binary) << "abc";
  std::ofstream(other, std::ios::binary) << "abd";
  const json a = cs::exe_info(exe, cache, 0);
  CHECK(a["sha256"] == kShaAbc);
  CHECK(a["sha256_from"] == "computed");
  CHECK(a["size"] == 3);
  const json b = cs::exe_info(exe, cache, 0);
  CHECK(b["sha256"] == kShaAbc);
  CHECK(b["sha256_from"] == "host cache");
  CHECK(b["size"] == 3);
  // Another binary on the same host (ranks running different builds): its own hash.
  CHECK(cs::exe_info(other, cache, 0)["sha256"] == kShaAbd);
  CHECK(cs::exe_info(other, cache, 0)["sha256_from"] == "host cache");
  // The binary rewritten in place with the same size: a new identity (mtime, ctime), hashed again.
  usleep(50000);
  std::ofstream(exe, std::ios::binary | std::ios::trunc) << "abd";
  const json c = cs::exe_info(exe, cache, 0);
  CHECK(c["sha256"] == kShaAbd);
  CHECK(c["sha256_from"] == "computed");
  // A file younger than min_age_s is never cached (a rewrite within the clock's granularity
  // would keep its identity).
  const std::string young = (t.path / "young").string();
  std::ofstream(young, std::ios::binary) << "abc";
  CHECK(cs::exe_info(young, cache, 3600)["sha256_from"] == "computed");
  CHECK(cs::exe_info(young, cache, 3600)["sha256_from"] == "computed");
  // No cache: always computed.
  CHECK(cs::exe_info(exe, "", 0)["sha256_from"] == "computed");
}

TEST_CASE("exe_info: a cache entry that is not a hash, or a cache others can write, is not used", "[topology]") {
  TempDir t;
  const std::string exe = (t.path / "exe").string(), cache = (t.path / "cache").string();
  std::ofstream(exe, std::ios::binary) << "abc";
  REQUIRE(cs::exe_info(exe, cache, 0)["sha256_from"] == "computed");
  for (const auto& e : fs::directory_iterator(cache))
    if (e.path().extension() != ".lock") std::ofstream(e.path()) << "not a hash\n";
  const json j = cs::exe_info(exe, cache, 0);
  CHECK(j["sha256"] == kShaAbc);
  CHECK(j["sha256_from"] == "computed");
  CHECK(cs::exe_info(exe, cache, 0)["sha256_from"] == "host cache");  // and stored again
  fs::permissions(cache, fs::perms::all);                             // 0777: anyone could plant an answer
  CHECK(cs::exe_info(exe, cache, 0)["sha256_from"] == "computed");
}

TEST_CASE("exe_info: processes of a host asking at once hash the file once", "[topology]") {
  TempDir t;
  const std::string exe = (t.path / "exe").string(), cache = (t.path / "cache").string();
  {
    std::ofstream f(exe, std::ios::binary);
    for (int i = 0; i < (1 << 16); ++i) f << "0123456789abcdef";  // 1 MiB: long enough to overlap
  }
  const int n = 6;
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    const pid_t p = fork();
    REQUIRE(p >= 0);
    if (p == 0) {
      const json j = cs::exe_info(exe, cache, 0);
      _exit(j.value("sha256_from", "") == "computed" ? 10 : j.value("sha256_from", "") == "host cache" ? 11 : 12);
    }
    kids.push_back(p);
  }
  int computed = 0, cached = 0;
  for (pid_t p : kids) {
    int st = 0;
    REQUIRE(waitpid(p, &st, 0) == p);
    REQUIRE(WIFEXITED(st));
    computed += WEXITSTATUS(st) == 10;
    cached += WEXITSTATUS(st) == 11;
  }
  CHECK(computed == 1);
  CHECK(cached == n - 1);
  const json j = cs::exe_info(exe, cache, 0);
  CHECK(j["sha256_from"] == "host cache");
  CHECK(j["sha256"] == cs::exe_info(exe, "", 0)["sha256"]);
}

TEST_CASE("local_topology on a missing sysfs root is empty, not an error", "[topology]") {
  auto o = fixture_options("no_such_case");
  json t;
  REQUIRE_NOTHROW(t = cs::local_topology(o));
  CHECK(t["nics"] == json::array());
  CHECK(t["gpus"] == json::array());
  CHECK(t["numa"] == json::array());
  CHECK(t["cpu"]["numa_nodes"] == json::array());
  CHECK(t["cpu"]["affinity"] == "2-5");
  CHECK_FALSE(t["cpu"].contains("online"));
}

TEST_CASE("local_topology on this machine", "[topology]") {
  cs::TopologyOptions o;
  o.gpu_probe = [](json&, json&) {};
  const json t = cs::local_topology(o);
  CHECK(t["cpu"]["count"].get<int>() >= 1);
  CHECK(t["exe"]["sha256"].get<std::string>().size() == 64);
  CHECK(t["nics"].is_array());
  if (t["hwloc"]["available"] == true)
    CHECK(t["hwloc"]["pus"].get<int>() >= 1);
  else
    CHECK(t["hwloc"]["why"].is_string());
}
