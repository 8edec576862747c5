#include "flight_recorder.hpp"

#include <filesystem>
#include <fstream>

#include "progress.hpp"

namespace cs {

nlohmann::json flight_ring_json() {
  const int64_t now = now_ns();
  nlohmann::json ring = nlohmann::json::array();
  const Progress& p = Progress::instance();
  const auto recs = p.recent();
  for (size_t i = 0; i < recs.size(); ++i) {
    const OpRecord& r = recs[i];
    const bool last = i + 1 == recs.size();
    ring.push_back({{"seq", r.seq},
                    {"op", collective_name(r.coll)},
                    {"bytes", r.bytes},
                    {"comm", std::string(r.comm_name())},
                    {"started_ms_ago", static_cast<double>(now - r.start_ns) * 1e-6},
                    {"state", last && p.in_flight() ? "in flight" : "completed"}});
  }
  return ring;
}

std::string write_flight_record(const std::string& out_dir, int rank, const std::string& host,
                                const nlohmann::json& ops, bool overwrite) {
  if (out_dir.empty()) return "";
  std::error_code ec;
  const auto dir = std::filesystem::path(out_dir) / "flight";
  std::filesystem::create_directories(dir, ec);
  const auto file = dir / ("rank-" + std::to_string(rank) + ".json");
  if (!overwrite && std::filesystem::exists(file, ec)) return "";
  std::ofstream out(file);
  out << nlohmann::json{{"rank", rank}, {"host", host}, {"ops", ops}}.dump(1) << "\n";
  return out ? file.string() : "";
}

}  // namespace cs
