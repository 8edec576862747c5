#include "run_inputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backends.hpp"
#include "error.hpp"
#include "file_read.hpp"
#include "json_text.hpp"
#include "pickle_subset.hpp"
#include "report.hpp"

extern char** environ;

namespace cs {

double check_timeout(double t, const std::string& what, const std::string& where) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", t);
  if (!std::isfinite(t))
    throw InputError(what + " must be a finite number of seconds (0 for none), not " + buf + where);
  if (t < 0) throw InputError(what + " must not be negative (0 for none), not " + std::string(buf) + where);
  if (t > 0 && t < kMinTimeoutS)
    throw InputError(what + " " + buf + " s is below the shortest deadline, " +
                     std::to_string(kMinTimeoutS).substr(0, 5) + " s (0 for none)" + where);
  if (t > kMaxTimeoutS)
    throw InputError(what + " " + buf + " s is beyond the longest deadline, " +
                     std::to_string(static_cast<long>(kMaxTimeoutS)) + " s (7 days; 0 for none)" + where);
  return t;
}

double resolve_deadline(const Config& config, std::optional<double> given, std::optional<double> replayed,
                        const std::string& where) {
  const std::optional<double> t = given ? given : replayed;
  if (t) return check_timeout(*t, "--timeout", "");
  const nlohmann::json run = config.section("run");
  const auto it = run.find("timeout");
  if (it == run.end()) return kDefaultTimeoutS;
  if (!it->is_number()) throw InputError("run.timeout must be a number of seconds, not " + json_text(*it) + where);
  return check_timeout(it->get<double>(), "run.timeout", where);
}

RunSettings run_settings(const Config& config, std::optional<double> timeout, std::optional<uint64_t> seed,
                         const std::string& where, std::optional<double> replayed_timeout) {
  const nlohmann::json run = config.section("run");
  for (auto& [k, v] : run.items()) {
    if (k == "timeout") {
      if (!v.is_number()) throw InputError("run.timeout must be a number of seconds, not " + json_text(v) + where);
      check_timeout(v.get<double>(), "run.timeout", where);
    } else if (k == "seed") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        throw InputError("run.seed must be a non-negative integer, not " + json_text(v) + where);
    } else {
      throw InputError("unknown setting run." + k + " (known: timeout, seed)" + where);
    }
  }
  RunSettings r;
  r.timeout_s = resolve_deadline(config, timeout, replayed_timeout, where);
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
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type that a check missed
    throw InputError(std::string("chaos: ") + e.what() + where);
  }
  // Chaos corrupt flips bits through host pointers; the NCCL backend's buffers are on the GPU.
  if (backend == "nccl")
    for (const ChaosRule& r : rules)
      if (r.kind == ChaosKind::corrupt)
        throw InputError("chaos kind 'corrupt' is not supported with --backend nccl (its buffers are in GPU memory)");
  return rules;
}

std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  // file_read.hpp: never blocks on a FIFO, opens no device, reads at most max_bytes.
  FileRead r = read_regular_file(path, max_bytes);
  switch (r.failure) {
    case ReadFailure::none:
      return std::move(r.text);
    case ReadFailure::not_regular:
      throw InputError(what + ": is " + r.kind + "; only a regular file is read");
    case ReadFailure::too_large:
      throw InputError(what + ": larger than " + std::to_string(max_bytes >> 20) +
                       " MiB, the most read from such a file");
    default:
      throw InputError(what + ": " + r.why);
  }
}

void check_json_depth(const std::string& text, const std::string& what) {
  size_t at = 0;
  if (json_nesting_depth(text, kMaxJsonDepth + 1, &at) > kMaxJsonDepth)
    throw InputError(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (at byte " +
                     std::to_string(at) + "); a commscript report nests a few levels");
}

namespace {

std::string read_file(const std::string& path, const std::string& what) {
  return read_input_file(path, what, kMaxReportBytes);
}

nlohmann::json parse_report(const std::string& text, const std::string& what) {
  check_json_depth(text, what);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(what + ": not JSON: " + e.what());
  }
}

}  // namespace

namespace {

// The fields of a commscript report that a replay reads, with their types: a report is data
// from someone else, so every one is checked before any is used, naming the field.
void expect(bool ok, const std::string& path, const std::string& field, const std::string& want,
            const nlohmann::json& got) {
  if (ok) return;
  std::string g = json_text(got);
  if (g.size() > 60) g = g.substr(0, 57) + "...";
  throw InputError(path + ": field " + field + " must be " + want + ", not " + g);
}

// The backends commscript knows, built or not (backends.hpp: their one list).
bool known_backend(const std::string& name) {
  const auto& n = backend_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}
std::string quoted_backend_names() {
  std::string s;
  for (const auto& n : backend_names()) s += (s.empty() ? "\"" : ", \"") + n + "\"";
  return s;
}

void check_replay_fields(const nlohmann::json& rep, const std::string& path) {
  expect(rep.is_object(), path, "(top level)", "an object", rep);
  expect(rep.contains("schema") && readable_report_schema(rep["schema"]), path, "schema",
         "\"commscript.report/1\" or \"commscript.report/2\"", rep.value("schema", nlohmann::json()));
  expect(rep.contains("recipe"), path, "recipe", "an object with the recipe's source", nlohmann::json());
  const auto& rec = rep["recipe"];
  expect(rec.is_object(), path, "recipe", "an object with the recipe's source", rec);
  expect(rec.contains("source") && rec["source"].is_string(), path, "recipe.source", "a string (the recipe's text)",
         rec.value("source", nlohmann::json()));
  for (const char* k : {"file", "sha256", "name", "version"})
    if (rec.contains(k)) expect(rec[k].is_string(), path, std::string("recipe.") + k, "a string", rec[k]);
  if (rec.contains("bundled")) expect(rec["bundled"].is_boolean(), path, "recipe.bundled", "a boolean", rec["bundled"]);
  if (rec.contains("args")) {
    expect(rec["args"].is_array(), path, "recipe.args", "a list of strings", rec["args"]);
    for (size_t i = 0; i < rec["args"].size(); ++i)
      expect(rec["args"][i].is_string(), path, "recipe.args[" + std::to_string(i) + "]", "a string", rec["args"][i]);
  }
  if (rec.contains("options")) expect(rec["options"].is_object(), path, "recipe.options", "an object", rec["options"]);
  if (rep.contains("commscript")) {
    const auto& c = rep["commscript"];
    expect(c.is_object(), path, "commscript", "an object", c);
    if (c.contains("version")) expect(c["version"].is_string(), path, "commscript.version", "a string", c["version"]);
  }
  if (rep.contains("run")) {
    const auto& run = rep["run"];
    expect(run.is_object(), path, "run", "an object", run);
    if (run.contains("config")) expect(run["config"].is_object(), path, "run.config", "an object", run["config"]);
    if (run.contains("seed"))
      expect(run["seed"].is_number_unsigned() || (run["seed"].is_number_integer() && run["seed"].get<int64_t>() >= 0),
             path, "run.seed", "a non-negative integer", run["seed"]);
    if (run.contains("timeout_s")) {
      expect(run["timeout_s"].is_number(), path, "run.timeout_s", "a number of seconds", run["timeout_s"]);
      check_timeout(run["timeout_s"].get<double>(), path + ": run.timeout_s", "");
    }
    if (run.contains("backend"))
      expect(run["backend"].is_string() && known_backend(run["backend"].get<std::string>()), path, "run.backend",
             "one of " + quoted_backend_names(), run["backend"]);
    if (run.contains("trusted")) expect(run["trusted"].is_boolean(), path, "run.trusted", "a boolean", run["trusted"]);
    if (run.contains("ranks"))
      expect(run["ranks"].is_number_integer() && run["ranks"].get<int64_t>() >= 0 &&
                 run["ranks"].get<int64_t>() < (int64_t{1} << 31),
             path, "run.ranks", "a non-negative integer", run["ranks"]);
  }
  for (const char* k : {"results", "findings", "incidents", "chaos"})
    if (rep.contains(k)) expect(rep[k].is_array(), path, k, "a list", rep[k]);
}

}  // namespace

nlohmann::json load_replay(const std::string& path) {
  nlohmann::json rep = parse_report(read_file(path, path), path);
  check_replay_fields(rep, path);
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

namespace {

// The replay environment's allow-list: families that tune the communication libraries a recipe
// measures and that neither the MPI library nor the loader reads, and exact names.
const char* const kReplayEnvFamilies[] = {"NCCL_", "TORCH_NCCL_", "UCX_"};
const char* const kReplayEnvNames[] = {"CUDA_VISIBLE_DEVICES",        "CUDA_DEVICE_ORDER",  "CUDA_LAUNCH_BLOCKING",
                                       "CUDA_DEVICE_MAX_CONNECTIONS", "GLOO_SOCKET_IFNAME", "GLOO_DEVICE_TRANSPORT",
                                       "TORCH_DISTRIBUTED_DEBUG",     "OMP_NUM_THREADS"};

}  // namespace

std::string replay_env_allow_list() {
  std::string s;
  for (const char* p : kReplayEnvFamilies) s += (s.empty() ? "" : ", ") + std::string(p) + "*";
  for (const char* n : kReplayEnvNames) s += ", " + std::string(n);
  return s;
}

bool env_var_unsafe_to_replay(const std::string& name) {
  for (const char* n : kReplayEnvNames)
    if (name == n) return false;
  bool family = false;
  for (const char* p : kReplayEnvFamilies) family = family || (name.rfind(p, 0) == 0 && name.size() > std::strlen(p));
  if (!family) return true;  // OMPI_MCA_*, PMIX_*, MPICH_*, LD_*, COMMSCRIPT_*, PATH ... and anything unknown
  // Inside the families, what loads code, starts programs or names files: plugins
  // (NCCL_NET_PLUGIN), library and module paths, debug/dump files.
  std::string up;
  for (char c : name) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* bad : {"PLUGIN", "AGENT", "PRELOAD", "LIBRARY", "PATH", "MODULE", "LAUNCH", "EXEC", "PREFIX", "FILE",
                          "DIR", "SHELL", "CMD", "COMMAND", "SCRIPT", "PROGRAM", "LIB"})
    if (up.find(bad) != std::string::npos) return true;
  return false;
}

std::string load_baseline(const std::string& path) {
  const std::string what = "--baseline " + path;
  std::string text = read_file(path, what);
  const nlohmann::json b = parse_report(text, what);
  if (!b.is_object() || !b.contains("schema") || !readable_report_schema(b["schema"]))
    throw InputError(what + ": not a commscript report (schema commscript.report/1 or /2)");
  // What the recipes read from a baseline (results, run), checked before anything is measured.
  if (b.contains("results")) {
    expect(b["results"].is_array(), what, "results", "a list of result objects", b["results"]);
    for (size_t i = 0; i < b["results"].size(); ++i)
      expect(b["results"][i].is_object(), what, "results[" + std::to_string(i) + "]", "an object", b["results"][i]);
  }
  if (b.contains("run")) expect(b["run"].is_object(), what, "run", "an object", b["run"]);
  return text;
}

nlohmann::json env_snapshot() {
  nlohmann::json e = nlohmann::json::object();
  for (char** p = environ; p && *p; ++p) {
    const std::string kv = *p;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq);
    if (!is_secret_env_name(k) && env_name_in(k, env_snapshot_prefixes())) e[k] = kv.substr(eq + 1);
  }
  return e;
}

}  // namespace cs
