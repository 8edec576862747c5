#include "flight_recorder.hpp"

#include <filesystem>
#include <fstream>

#include "json_text.hpp"
#include "progress.hpp"

namespace cs {

nlohmann::json flight_ring_json() {
  const Progress& p = Progress::instance();
  const auto recs = p.recent();
  return flight_ring_json(recs, p.in_flight());
}

nlohmann::json flight_ring_json(const std::vector<OpRecord>& recs, bool in_flight) {
  const int64_t now = now_ns();
  nlohmann::json ring = nlohmann::json::array();
  for (size_t i = 0; i < recs.size(); ++i) {
    const OpRecord& r = recs[i];
    const bool last = i + 1 == recs.size();
    nlohmann::json op{{"seq", r.seq},
                      {"op", collective_name(r.coll)},
                      {"bytes", r.bytes},
                      {"comm", std::string(r.comm_name())},
                      {"started_ms_ago", static_cast<double>(now - r.start_ns) * 1e-6},
                      {"state", last && in_flight ? "in flight" : "completed"}};
    // A timed loop's record: the calls it stands for, up to and including `seq` (its start is
    // the loop's).
    if (r.ops > 1) op["loop_calls"] = r.ops;
    ring.push_back(std::move(op));
  }
  return ring;
}

std::string write_flight_record(const std::string& out_dir, int rank, const std::string& host,
                                const nlohmann::json& ops, bool overwrite, const nlohmann::json& extra) {
  if (out_dir.empty()) return "";
  std::error_code ec;
  const auto dir = std::filesystem::path(out_dir) / "flight";
  std::filesystem::create_directories(dir, ec);
  const auto file = dir / ("rank-" + std::to_string(rank) + ".json");
  if (!overwrite && std::filesystem::exists(file, ec)) return "";
  nlohmann::json doc{{"rank", rank}, {"host", host}, {"ops", ops}};
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) doc[k] = v;
  // Via a temporary file: a reader (rank 0's guardian) never sees half of it.
  const auto tmp = dir / ("rank-" + std::to_string(rank) + ".json.tmp");
  {
    std::ofstream out(tmp);
    out << json_text(doc, 1) << "\n";
    if (!out) return "";
  }
  std::filesystem::rename(tmp, file, ec);
  return ec ? "" : file.string();
}

}  // namespace cs
