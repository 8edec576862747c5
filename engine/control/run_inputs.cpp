#include "run_inputs.hpp"

#include <fstream>
#include <sstream>

#include "error.hpp"

extern char** environ;

namespace cs {

RunSettings run_settings(const Config& config, std::optional<double> timeout, std::optional<uint64_t> seed,
                         const std::string& where) {
  const nlohmann::json run = config.section("run");
  for (auto& [k, v] : run.items()) {
    if (k == "timeout") {
      if (!v.is_number() || v.get<double>() < 0)
        throw InputError("run.timeout must be a number of seconds >= 0, not " + v.dump() + where);
    } else if (k == "seed") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        throw InputError("run.seed must be a non-negative integer, not " + v.dump() + where);
    } else {
      throw InputError("unknown setting run." + k + " (known: timeout, seed)" + where);
    }
  }
  RunSettings r;
  r.timeout_s = timeout ? *timeout : run.value("timeout", kDefaultTimeoutS);
  r.seed = seed ? *seed : run.value("seed", static_cast<uint64_t>(0));
  return r;
}

std::vector<ChaosRule> chaos_plan(const Config& config, const std::string& backend, const std::string& where) {
  std::vector<ChaosRule> rules;
  try {
    const nlohmann::json plan = config.data().value("chaos", nlohmann::json::array());
    if (!plan.is_array()) throw InputError("chaos must be an array of tables ([[chaos]] in TOML)");
    for (const auto& r : plan) rules.push_back(chaos_rule_from_json(r));
  } catch (const Error& e) {
    throw InputError(std::string(e.what()) + where);
  }
  // Chaos corrupt flips bits through host pointers; the NCCL backend's buffers are on the GPU.
  if (backend == "nccl")
    for (const ChaosRule& r : rules)
      if (r.kind == ChaosKind::corrupt)
        throw InputError("chaos kind 'corrupt' is not supported with --backend nccl (its buffers are in GPU memory)");
  return rules;
}

namespace {

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(what + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) throw InputError(what + ": cannot read");
  return ss.str();
}

nlohmann::json parse_report(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(what + ": not JSON: " + e.what());
  }
}

}  // namespace

nlohmann::json load_replay(const std::string& path) {
  nlohmann::json rep = parse_report(read_file(path, path), path);
  if (!rep.is_object() || rep.value("schema", "") != "commscript.report/1" || !rep.contains("recipe") ||
      !rep["recipe"].is_object() || !rep["recipe"].contains("source"))
    throw InputError(path + ": not a commscript.report/1 with the recipe's source");
  return rep;
}

Replayed replay_settings(const nlohmann::json& report, const std::string& path) {
  Replayed r;
  try {
    const auto& run = report.value("run", nlohmann::json::object());
    r.config = Config::from_json(run.value("config", nlohmann::json::object()), path);
    if (run.contains("seed") && run["seed"].is_number_unsigned()) r.seed = run["seed"].get<uint64_t>();
    if (run.contains("timeout_s") && run["timeout_s"].is_number()) r.timeout_s = run["timeout_s"].get<double>();
    if (run.contains("backend") && run["backend"].is_string()) r.backend = run["backend"].get<std::string>();
    r.was_trusted = run.value("trusted", false);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": " + e.what());
  }
  return r;
}

std::string load_baseline(const std::string& path) {
  const std::string what = "--baseline " + path;
  std::string text = read_file(path, what);
  const nlohmann::json b = parse_report(text, what);
  if (!b.is_object() || b.value("schema", "") != "commscript.report/1")
    throw InputError(what + ": not a commscript.report/1");
  return text;
}

nlohmann::json env_snapshot() {
  nlohmann::json e = nlohmann::json::object();
  for (char** p = environ; p && *p; ++p) {
    const std::string kv = *p;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq);
    // Launcher credentials are not configuration and do not belong in a shared report.
    if (k.find("precondition_transports") != std::string::npos || k.find("SECRET") != std::string::npos ||
        k.find("TOKEN") != std::string::npos || k.find("PASSWORD") != std::string::npos)
      continue;
    for (const char* prefix : {"NCCL_", "UCX_", "OMPI_", "TORCH_NCCL_", "CUDA_", "COMMSCRIPT_", "MPICH_", "PMIX_MCA_"})
      if (k.rfind(prefix, 0) == 0) {
        e[k] = kv.substr(eq + 1);
        break;
      }
  }
  return e;
}

}  // namespace cs
