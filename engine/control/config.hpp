#pragma once
// A run's TOML file: [options] for the recipe, [env] applied before any communicator exists,
// [run] (timeout, seed), and sections later layers read ([thresholds], [scorecard], [[chaos]] ...).
// Held as JSON so it can go into the report as is.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace cs {

class Config {
 public:
  // Parses FILE; errors are InputError "FILE:LINE:COL: message".
  static Config load(const std::string& path);
  static Config parse(const std::string& text, const std::string& source_name);
  // A config as report.json records it (run.config); checked like a parsed file.
  static Config from_json(const nlohmann::json& data, const std::string& source_name);

  // `--set key=value`: a dotted path; a key without a section means options.KEY. The value is
  // read as a TOML value when it is one (42, 1.5, true, "x", [1,2]) and as a string otherwise.
  void set(const std::string& assignment);

  const nlohmann::json& data() const { return data_; }
  const std::string& path() const { return path_; }
  nlohmann::json section(const std::string& name) const;  // {} when absent
  std::vector<std::pair<std::string, std::string>> env() const;
  void apply_env() const;  // setenv for every [env] entry (overrides the inherited value)

 private:
  std::string path_;
  nlohmann::json data_ = nlohmann::json::object();
};

}  // namespace cs
