// What the NCCL backend's files share (nccl_shared.hpp): NCCL's error text, the error every rank
// agrees on, names NCCL may read after the call, the splitShare override.
#include "nccl_shared.hpp"

#include <cstdlib>
#include <set>
#include <string_view>

namespace cs {

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += " (" + std::string(last) + ")";
  return s;
}

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

const char* stable_name(const std::string& s) {
  static std::mutex mu;
  static auto* names = new std::set<std::string>;
  std::lock_guard<std::mutex> g(mu);
  return names->insert(s).first->c_str();
}

bool split_share_on() {
  const char* e = std::getenv("NCCL_COMM_SPLIT_SHARE_RESOURCES");
  return !(e && std::string_view(e) == "0");
}

}  // namespace cs
