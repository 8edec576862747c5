#include "env_policy.hpp"

namespace cs {

const std::vector<std::string>& env_audited_prefixes() {
  static const std::vector<std::string> p = {"NCCL_", "TORCH_NCCL_", "TORCH_FR_", "UCX_"};
  return p;
}

const std::vector<std::string>& env_topology_names() {
  static const std::vector<std::string> p = [] {
    std::vector<std::string> v = env_audited_prefixes();
    v.push_back("CUDA_VISIBLE_DEVICES");
    return v;
  }();
  return p;
}

const std::vector<std::string>& env_snapshot_prefixes() {
  static const std::vector<std::string> p = [] {
    std::vector<std::string> v = env_audited_prefixes();
    for (const char* more : {"OMPI_", "CUDA_", "COMMSCRIPT_", "MPICH_", "PMIX_MCA_"}) v.push_back(more);
    return v;
  }();
  return p;
}

const std::vector<std::string>& env_secret_patterns() {
  // Launcher credentials are not configuration and do not belong in a shared report.
  static const std::vector<std::string> p = {"precondition_transports", "SECRET", "TOKEN", "PASSWORD"};
  return p;
}

bool is_secret_env_name(const std::string& name) {
  for (const auto& p : env_secret_patterns())
    if (name.find(p) != std::string::npos) return true;
  return false;
}

bool env_name_in(const std::string& name, const std::vector<std::string>& list) {
  for (const auto& e : list) {
    const bool prefix = !e.empty() && e.back() == '_';
    if (prefix ? name.compare(0, e.size(), e) == 0 : name == e) return true;
  }
  return false;
}

}  // namespace cs
