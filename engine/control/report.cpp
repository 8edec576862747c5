#include "report.hpp"

#include <unistd.h>

#include <ctime>
#include <fstream>

#include "error.hpp"

namespace cs {

Report::Report(const std::filesystem::path& dir, bool writer) : writer_(writer), dir_(dir) {
  doc_ = {{"schema", "commscript.report/1"},       {"commscript", nlohmann::json::object()},
          {"recipe", nlohmann::json::object()},    {"run", nlohmann::json::object()},
          {"env", nlohmann::json::object()},       {"topology", nlohmann::json::object()},
          {"results", nlohmann::json::array()},    {"findings", nlohmann::json::array()},
          {"scorecard", nlohmann::json::object()}, {"chaos", nlohmann::json::array()},
          {"incidents", nlohmann::json::array()}};
  if (!writer_) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw InputError("--out " + dir_.string() + ": cannot create directory: " + ec.message());
  jsonl_ = std::fopen((dir_ / "results.jsonl").c_str(), "w");
  if (!jsonl_) throw InputError("--out " + dir_.string() + ": cannot write results.jsonl");
}

Report::~Report() {
  if (jsonl_) std::fclose(jsonl_);
}

void Report::add_result(const nlohmann::json& r) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  doc_["results"].push_back(r);
  if (!jsonl_) return;
  const std::string line = r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), jsonl_);
  std::fflush(jsonl_);
}

void Report::add(const std::string& section, const nlohmann::json& item) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  doc_[section].push_back(item);
}

size_t Report::count(const std::string& section) const {
  auto it = doc_.find(section);
  return it == doc_.end() ? 0 : it->size();
}

void Report::write() {
  if (!writer_) return;
  std::lock_guard<std::recursive_mutex> g(mu_);
  const auto tmp = dir_ / "report.json.tmp";
  {
    std::ofstream out(tmp);
    out << doc_.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) throw Error(ExitCode::internal, "cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, dir_ / "report.json");
}

std::string default_out_dir(const std::string& recipe) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return "commscript-runs/" + recipe + "-" + stamp + "-" + std::to_string(getpid());
}

}  // namespace cs
