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
  // The types of the sections commscript reads ([env], [rules], [thresholds], [scorecard], every
  // section a table): InputError naming the field. parse/from_json check; call again after set().
  void check() const;
  // Removes the [env] entries for which `drop(name)` is true; returns their names.
  template <class Pred>
  std::vector<std::string> drop_env(Pred drop) {
    std::vector<std::string> out;
    if (!data_.contains("env") || !data_["env"].is_object()) return out;
    for (auto& [k, v] : data_["env"].items())
      if (drop(k)) out.push_back(k);
    for (const auto& k : out) data_["env"].erase(k);
    return out;
  }

 private:
  std::string path_;
  nlohmann::json data_ = nlohmann::json::object();
};

}  // namespace cs
