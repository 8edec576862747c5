// open_plan (plan.hpp): one run's inputs read, resolved and checked before anything
// communicates. Where the deadline, the backend, the replay policy and the output directory are
// decided, each once; joining the world and running are plan_world.cpp's.
#include "plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "backends.hpp"
#include "commscript_version.hpp"
#include "digest.hpp"
#include "file_read.hpp"
#include "job.hpp"
#include "metrics.hpp"
#include "run_inputs.hpp"
#include "triage_input.hpp"

namespace cs {

namespace {

// The runs of this process, over all its sessions: it numbers their default output directories
// (a per-session count gave two sessions' first runs in one second the same directory, and the
// second run's report replaced the first's; commscript.run() in Python opens a session per call).
std::atomic<unsigned> g_runs{0};

// Messages of the replay policy go to stderr from the launcher's rank 0 of the command line's
// process; an embedded host reads cs_last_error instead.
bool printer(const PlanDefaults& d) { return d.own_process && job::launcher_rank() <= 0; }

// NAME in the search path, then what the command line finds (a file, a bundled name).
std::optional<RecipeSource> locate(const PlanDefaults& d, const std::string& name, const RecipeLibrary& lib,
                                   std::string* why) {
  namespace fs = std::filesystem;
  const std::string& path = d.recipe_path;
  if (name.find('/') == std::string::npos && !path.empty()) {
    const std::string file = name.size() > 4 && name.substr(name.size() - 4) == ".lua" ? name : name + ".lua";
    size_t start = 0;
    while (start <= path.size()) {
      const size_t end = std::min(path.find(':', start), path.size());
      const std::string dir = path.substr(start, end - start);
      std::error_code ec;
      if (!dir.empty() && fs::is_regular_file(fs::path(dir) / file, ec))
        return lib.find((fs::path(dir) / file).string(), why);
      start = end + 1;
    }
  }
  return lib.find(name, why);
}

// What differs between a recorded run and this one (printed by the launcher's rank 0): the run
// still uses the recorded recipe source, options, config and seed.
void replay_warnings(const nlohmann::json& rep, const RecipeSource& src, const std::string& file,
                     const RecipeLibrary& lib) {
  if (job::launcher_rank() > 0) return;
  auto warn = [&](const std::string& m) {
    std::fprintf(stderr, "commscript: replay %s: warning: %s\n", file.c_str(), m.c_str());
  };
  const std::string was = rep.value("commscript", nlohmann::json::object()).value("version", "?");
  if (was != COMMSCRIPT_VERSION) warn("recorded with commscript " + was + ", this is " + COMMSCRIPT_VERSION);
  const int ranks = rep.value("run", nlohmann::json::object()).value("ranks", 0);
  const int now = job::launcher_size();
  if (ranks && ranks != now)
    warn("recorded on " + std::to_string(ranks) + " ranks, now running on " + std::to_string(now));
  const std::string sha = rep["recipe"].value("sha256", "");
  if (sha.empty())
    warn("the report records no sha256 of the recipe source");
  else if (sha != sha256_hex(src.text))
    warn("the recorded source does not match its recorded sha256");
  if (!src.bundled) {  // a regular file there (file_read.hpp: not a FIFO a report names)
    const FileRead now_there = read_regular_file(src.name, size_t{64} << 20);
    if (now_there.ok() && sha256_hex(now_there.text) != sha)
      warn(src.name + " has changed since the recorded run; replaying the recorded source");
  } else {
    if (auto b = lib.bundled(src.name); b && sha256_hex(b->text) != sha)
      warn("the bundled " + src.name + " differs from the recorded one; replaying the recorded source");
  }
}

// What a sandboxed replay applies of the report's config. Nor does it reach the loader or the MPI
// library: the recorded [env] is applied only for the allow-list (run_inputs.hpp), less what loads
// code or names files. Nor does it name rule files: cs.rules loads those of the config's [rules]
// files as given to the run (issue 30, class 20.7), and a report's are someone else's.
void sandbox_replayed_config(Config* config, const std::string& file, bool print) {
  const std::vector<std::string> skipped = config->drop_env(env_var_unsafe_to_replay);
  if (!skipped.empty() && print) {
    std::string names;
    for (const auto& n : skipped) names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr,
                 "commscript: replay %s: not applying %s from the report's [env] (dropped: a replay applies "
                 "only %s, less names that load code or name files; --trusted applies them all)\n",
                 file.c_str(), names.c_str(), replay_env_allow_list().c_str());
  }
  if (!config->data().contains("rules")) return;
  nlohmann::json data = config->data();
  data.erase("rules");
  *config = Config::from_json(data, file);
  if (print)
    std::fprintf(stderr,
                 "commscript: replay %s: not applying the report's [rules] files (name your own with --config or "
                 "--set; --trusted applies them)\n",
                 file.c_str());
}

// The replay policy: the report's config, seed, deadline and backend unless the host gave them,
// its config sandboxed unless the run is trusted. The replayed deadline: *replayed_timeout.
void apply_replay(const PlanDefaults& d, const std::string& file, const nlohmann::json& report, Session& ss,
                  std::optional<uint64_t>* seed, std::optional<double>* replayed_timeout) {
  Replayed r = replay_settings(report, file);
  ss.config = std::move(r.config);
  if (!*seed) *seed = r.seed;
  *replayed_timeout = r.timeout_s;
  // What join_world sets up when given this plan.
  ss.backend = resolve_backend(d.backend_given ? std::optional<std::string>(d.backend) : std::nullopt, r.backend, file);
  if (!ss.trusted) sandbox_replayed_config(&ss.config, file, printer(d));
  // A report is data from someone else: it never lifts the sandbox by itself.
  if (r.was_trusted && !ss.trusted && printer(d))
    std::fprintf(stderr,
                 "commscript: replay %s: warning: the recorded run was --trusted; this one is sandboxed "
                 "unless you pass --trusted\n",
                 file.c_str());
}

// The inputs that are files and settings: --baseline, the replayed report, --config, --set
// ([env] applied), the chaos plan, the deadline and the seed. Errors (InputError) name the file.
void read_settings(const PlanDefaults& d, const PlanRequest& r, Plan& p, nlohmann::json* replayed) {
  Session& ss = p.session;
  std::optional<uint64_t> seed = d.seed;
  std::optional<double> replayed_timeout;
  const std::string where = r.has_config ? " (in " + r.config + ")" : "";
  if (!r.baseline.empty()) ss.baseline = load_baseline(r.baseline);
  if (!r.replay.empty()) {
    *replayed = load_replay(r.replay);
    apply_replay(d, r.replay, *replayed, ss, &seed, &replayed_timeout);
  }
  if (r.has_config) ss.config = Config::load(r.config);
  for (const auto& kv : r.sets) ss.config.set(kv);
  ss.config.check();  // again after the sets, before [env] is applied or anything is measured
  ss.config.apply_env();
  p.info.chaos = chaos_plan(ss.config, ss.backend, where);
  const RunSettings rs = run_settings(ss.config, d.deadline_s, seed, where, replayed_timeout);
  ss.timeout_s = rs.timeout_s;
  ss.seed = rs.seed;
}

// The recipe: the replayed report's source and words, or the one named (the bundled triage's
// positional paths read as --paths, triage_input.hpp). Returns the name its output directory
// is called after.
std::string choose_recipe(const PlanDefaults& d, const PlanRequest& r, const nlohmann::json& replayed,
                          const RecipeLibrary& lib, Plan& p) {
  if (!replayed.is_null()) {
    const auto& rec = replayed["recipe"];
    p.recipe =
        RecipeSource{rec.value("file", "replayed.lua"), rec["source"].get<std::string>(), rec.value("bundled", false)};
    for (const auto& x : rec.value("args", nlohmann::json::array())) p.rargs.push_back(x.get<std::string>());
    if (d.own_process) replay_warnings(replayed, p.recipe, r.replay, lib);
    return p.recipe.name;
  }
  std::vector<std::string> words{r.recipe};
  words.insert(words.end(), r.args.begin(), r.args.end());
  words = triage::recipe_words(words);
  std::string why;
  auto src = locate(d, words[0], lib, &why);
  if (!src) throw PlanError(PlanFailure::not_found, 1, why, PlanPrint::launcher_root);
  p.recipe = std::move(*src);
  p.rargs.assign(words.begin() + 1, words.end());
  return r.recipe;
}

// --metrics FILE and --metrics-listen ADDRESS:PORT; an address that is garbage is refused before
// anything runs.
void metrics_options(const PlanRequest& r, RunInfo& info) {
  info.metrics_file = r.metrics_file;
  if (r.metrics_listen.empty()) return;
  try {
    (void)parse_listen_address(r.metrics_listen);
  } catch (const Error& e) {
    throw PlanError(PlanFailure::invalid, 1, e.what(), PlanPrint::launcher_root);
  }
  info.metrics_listen = r.metrics_listen;
}

}  // namespace

std::string plan_out_dir(const PlanDefaults& d, const std::string& given, const std::string& name) {
  if (!given.empty()) return given;
  if (d.own_process && d.out_dir.empty()) return "";  // open_report names it after the recipe
  std::string base = std::filesystem::path(name).filename().string();
  if (base.size() > 4 && base.substr(base.size() - 4) == ".lua") base.resize(base.size() - 4);
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  // Several runs of one process in the same second must not share a directory.
  return (d.out_dir.empty() ? std::string("commscript-runs") : d.out_dir) + "/" + base + "-" + stamp + "-" +
         std::to_string(getpid()) + "-" + std::to_string(++g_runs);
}

std::unique_ptr<Plan> open_plan(const PlanDefaults& d, const PlanRequest& r, const RecipeLibrary& lib) {
  auto p = std::make_unique<Plan>();
  Session& ss = p->session;
  ss.embedded = !d.own_process;
  ss.backend = d.backend;
  ss.trusted = d.trusted;
  ss.verify = d.verify;
  ss.fail_below = r.fail_below;
  if (r.command_line) {
    ss.argv = *r.command_line;
  } else {
    ss.argv = {"libcommscript", r.replay.empty() ? r.recipe : "--replay=" + r.replay};
    ss.argv.insert(ss.argv.end(), r.args.begin(), r.args.end());
  }
  nlohmann::json replayed;
  try {
    read_settings(d, r, *p, &replayed);
  } catch (const PlanError&) {
    throw;
  } catch (const Error& e) {
    throw PlanError(PlanFailure::invalid, static_cast<int>(e.code()), e.what(), PlanPrint::launcher_root);
  }
  p->info.replay_of = r.replay;
  const std::string name = choose_recipe(d, r, replayed, lib, *p);
  for (const auto& x : p->rargs)
    if (x == "--help" || x == "-h") p->help = true;
  p->info.out = plan_out_dir(d, r.out_dir, name);
  metrics_options(r, p->info);
  return p;
}

}  // namespace cs
