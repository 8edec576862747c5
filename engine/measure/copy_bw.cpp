#include "copy_bw.hpp"

#include <fstream>

#include "int_list.hpp"

namespace cs {

GpuLocality gpu_locality(const std::string& bdf, const std::string& sysfs_root) {
  GpuLocality l;
  const std::string dir = sysfs_root + "/bus/pci/devices/" + bdf + "/";
  std::ifstream numa(dir + "numa_node");
  if (int n = -1; numa >> n) l.numa = n < 0 ? -1 : n;
  std::ifstream cpus(dir + "local_cpulist");
  std::string text;
  if (std::getline(cpus, text)) l.cpus = parse_int_ranges(text, /*strict=*/true);
  return l;
}

// gpu_copy_bandwidth: copy_bw_cuda.cpp in a build with CUDA, cuda_absent.cpp (the refusal)
// without.

}  // namespace cs
