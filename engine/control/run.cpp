#include "run.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

#include "clock.hpp"
#include "control_plane.hpp"
#include "coordinator_wire.hpp"
#include "digest.hpp"
#include "guardian.hpp"
#include "host_name.hpp"
#include "incidents.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "progress.hpp"
#include "run_html.hpp"
#include "run_inputs.hpp"

namespace cs::run {

namespace {

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

// report.html could not be written (disk full): exit 6, and report.json says so too (written
// again: the process's code and the report's agree).
int html_unwritten(Session& s, const std::string& html_error, int code) {
  std::fprintf(stderr, "commscript: %s\n", html_error.c_str());
  code = static_cast<int>(ExitCode::output);
  auto& d = s.report->doc();
  d["run"]["exit_code"] = code;
  d["incidents"].push_back({{"kind", "output"}, {"exit_code", code}, {"message", html_error}});
  try {
    s.report->write();
  } catch (const std::exception& e) {  // no room for a second copy: over the first one
    if (const int err = s.report->write_in_place())
      std::fprintf(stderr, "commscript: %s; nor could report.json be updated in place (%s)\n", e.what(),
                   std::strerror(err));
  }
  return code;
}

}  // namespace

int declare_everywhere(Session& s, RecipeHost& host, const RecipeSource& src, const std::vector<std::string>& rargs,
                       int* failed_rank) {
  RecipeFailure f;
  const bool ok = host.declare(src, s.trusted, &f) && host.resolve_options(s.config.section("options"), rargs, &f);
  const int low = job::lowest_failing_rank(!ok);
  if (failed_rank) *failed_rank = low;
  if (low < 0) return 0;
  if (s.rank() == low)
    std::fprintf(stderr, "commscript: %s%s\n", s.size() > 1 ? ("rank " + std::to_string(low) + ": ").c_str() : "",
                 f.message.c_str());
  s.last_error =
      !f.message.empty() ? f.message : "rank " + std::to_string(low) + " could not load the recipe or its options";
  return job::agree_max(ok ? 0 : static_cast<int>(f.code));
}

bool open_report(Session& s, const std::string& out, const std::string& recipe_name) {
  s.out_dir = s.world->broadcast(out.empty() ? default_out_dir(recipe_name) : out, 0);
  std::string error;
  try {
    s.report = std::make_unique<Report>(s.out_dir, s.rank() == 0);
  } catch (const Error& e) {
    error = e.what();
  }
  if (job::lowest_failing_rank(!error.empty()) < 0) return true;
  if (!error.empty()) std::fprintf(stderr, "commscript: %s\n", error.c_str());
  return false;
}

bool open_metrics(Session& s, const RunInfo& info, const std::string& recipe_name, int* code) {
  if (info.metrics_file.empty() && info.metrics_listen.empty()) return true;
  std::string error;
  *code = 0;
  try {
    if (s.rank() == 0)
      s.metrics =
          std::make_shared<MetricsSink>(info.metrics_file, info.metrics_listen, metrics_common_labels(recipe_name));
  } catch (const Error& e) {
    error = e.what();
    *code = static_cast<int>(e.code());
  }
  *code = job::agree_max(*code);
  if (job::lowest_failing_rank(!error.empty()) < 0) return true;
  if (!error.empty()) std::fprintf(stderr, "commscript: %s\n", error.c_str());
  s.last_error = error;
  return false;
}

void describe(Session& s, const RecipeHost& host, const RecipeSource& src, const std::vector<std::string>& rargs,
              const RunInfo& info) {
  const auto hosts = s.world->allgather(host_name());
  nlohmann::json per_host = nlohmann::json::object();
  for (size_t r = 0; r < hosts.size(); ++r) per_host[hosts[r]].push_back(r);
  auto& d = s.report->doc();
  d["commscript"] = host.versions();
  d["recipe"] = {{"name", host.name()},
                 {"version", host.version()},
                 {"file", src.name},
                 {"bundled", src.bundled},
                 {"sha256", sha256_hex(src.text)},
                 {"source", src.text},
                 {"options", host.options()},
                 {"args", rargs}};
  if (!d["recipe"]["options"].is_object())  // none resolved (a top level that did not finish), or empty
    d["recipe"]["options"] = nlohmann::json::object();
  d["run"] = {{"replay_of", info.replay_of.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.replay_of)},
              {"ranks", s.size()},
              {"hosts", per_host.size()},
              {"backend", s.backend},
              {"launcher", s.launcher.is_null() ? nlohmann::json{{"kind", "mpi"}} : s.launcher},
              {"start", iso_time_now()},
              {"seed", s.seed},
              {"timeout_s", s.timeout_s},
              {"trusted", s.trusted},
              {"verify", s.verify},
              {"command", s.argv},
              {"config", s.config.data()},
              {"duration_s", nullptr},
              {"exit_code", nullptr}};
  if (s.embedded) d["run"]["embedded"] = s.host_mpi;
  d["env"] = env_snapshot();
  d["topology"] = {{"hosts", per_host}};
}

void guard(Session& s, const PageRenderer& pages) {
  // The rank's guardian (cli: forked before MPI) writes what this rank no longer can if it dies.
  guardian::watch(s.out_dir, s.rank(), s.size(), host_name());
  if (s.rank() == 0) guardian::header(s.report->doc());
  incidents::attach(&s, &pages);
  job::set_before_abort(incidents::on_abort);
  // A chaos `exit` ends this rank with its status: when this rank writes the report, report.json
  // says so before the process ends (another rank's death, with the status its injection
  // carried, is the coordinator's to record: incidents::rank_died).
  Chaos::instance().on_exit([&s](int status, const std::string& message) {
    if (s.report && s.report->writer()) incidents::on_abort(static_cast<ExitCode>(status), message);
  });
}

int run_through_host(Session& s, RecipeHost& host) {
  int code = 0;
  RecipeFailure f;
  if (host.run(s, &code, &f)) return code;
  f.message = coord::cap_message(f.message);  // a 50 MiB error message: its head, its tail, its length
  std::string msg =
      "commscript: " + (s.size() > 1 ? "rank " + std::to_string(s.rank()) + ": " : std::string()) + f.message;
  if (!f.traceback.empty() && f.code == ExitCode::runtime) msg += "\n" + f.traceback;
  if (!s.embedded) job::abort(f.code, msg);
  // Embedded: this run ends, the host's process does not. A rank that gave up because the run
  // was cancelled elsewhere is aftermath: the failure that cancelled it was reported.
  Progress::instance().end();  // the operation that threw is no longer in flight
  if (const int cancelled = job::cancel_code()) return cancelled;
  std::fprintf(stderr, "%s\n", msg.c_str());
  s.last_error = msg;
  incidents::fail_run(f.code, msg);
  return static_cast<int>(f.code);
}

void adopt_survivors(Session& s) {
  bool moved = false;
  while (auto next = s.world->successor()) {
    s.set_world(next);
    moved = true;
  }
  if (!moved) return;
  if (!job::mpi_active()) job::set_control(s.world.get());
}

int agree_exit_code(int code) { return job::agree_max(code); }

int finish_report(Session& s, const PageRenderer& pages, nlohmann::json fired, double secs, int code) {
  if (!s.report->writer()) return code;
  std::lock_guard<std::recursive_mutex> g(s.report->mutex());
  auto& d = s.report->doc();
  std::string html_error;
  d["chaos"] = std::move(fired);
  d["run"]["duration_s"] = secs;
  d["run"]["exit_code"] = code;
  // report.html is rendered (in a fresh state, never the recipe's: run_host.hpp) on a thread of
  // its own while this one writes report.json: both only read the document, which the lock held
  // here keeps others from editing; at 1024 ranks each takes about a second (docs/scale.md).
  std::thread html;
  try {
    html = std::thread([&pages, &s, &html_error] { html_error = write_html(pages, *s.report); });
  } catch (const std::system_error&) {  // no thread: rendered below, after report.json
  }
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{html};
  try {
    s.report->write();
    std::fprintf(stderr, "commscript: report written to %s/report.json\n", s.out_dir.c_str());
  } catch (const Error& e) {  // the output directory: disk full, gone, unwritable
    std::fprintf(stderr, "commscript: %s\n", e.what());
    code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commscript: %s\n", e.what());
    code = static_cast<int>(ExitCode::internal);
  }
  if (html.joinable())
    html.join();
  else
    html_error = write_html(pages, *s.report);
  if (!html_error.empty() && code != static_cast<int>(ExitCode::output)) code = html_unwritten(s, html_error, code);
  return code;
}

void unguard(Session& s) {
  // Embedded: every rank gets rank 0's report (on the control communicator: the world's may
  // hold requests a cancelled run abandoned).
  if (s.embedded) s.report_json = job::broadcast_from_root(s.rank() == 0 ? json_text(s.report->doc()) : std::string());
  job::set_before_abort(nullptr);
  Chaos::instance().on_exit(nullptr);
  incidents::detach();
}

namespace {

// The chaos plan (the config's [[chaos]], --set chaos=) names only ranks the job has: checked on
// every rank alike, before anything runs; rank 0 says why (exit 1).
bool chaos_fits(Session& s, const std::vector<ChaosRule>& plan) {
  try {
    for (const ChaosRule& r : plan) check_chaos_ranks(r, s.size());
  } catch (const Error& e) {
    if (s.rank() == 0) std::fprintf(stderr, "commscript: %s\n", e.what());
    s.last_error = e.what();
    return false;
  }
  return true;
}

// The recipe's top level was ended by an engine limit (an endless loop past its budget, the C
// stack, the Lua heap): exit 2, as under --check and --help, and, the run having started, a
// report.json that says so (issue 30: it was exit 1 and no report). A recipe or options that do
// not load are bad input (exit 1) before anything runs: no report.
int load_failed(Session& s, RecipeHost& host, const RecipeSource& src, const std::vector<std::string>& rargs,
                const RunInfo& info, int code, int failed_rank) {
  if (code == static_cast<int>(ExitCode::bad_input)) return code;
  const std::string name = host.name().empty() ? std::filesystem::path(src.name).stem().string() : host.name();
  if (!open_report(s, info.out, name)) return static_cast<int>(ExitCode::output);
  describe(s, host, src, rargs, info);
  if (s.report->writer()) {
    std::lock_guard<std::recursive_mutex> g(s.report->mutex());
    s.report->doc()["recipe"]["name"] = name;  // the file's, when the top level declared none
    s.report->doc()["incidents"].push_back(
        {{"kind", "error"}, {"rank", failed_rank}, {"exit_code", code}, {"message", coord::cap_message(s.last_error)}});
  }
  return finish_report(s, host, nlohmann::json::array(), 0.0, code);
}

}  // namespace

int run_recipe(Session& s, RecipeHost& host, const RecipeSource& src, const std::vector<std::string>& rargs,
               const RunInfo& info) {
  if (!chaos_fits(s, info.chaos)) return static_cast<int>(ExitCode::bad_input);
  int failed_rank = -1;
  if (const int code = declare_everywhere(s, host, src, rargs, &failed_rank))
    return load_failed(s, host, src, rargs, info, code, failed_rank);
  if (int code = 0; !open_metrics(s, info, host.name(), &code)) return code;  // before any output exists
  if (!open_report(s, info.out, host.name())) {
    s.metrics.reset();
    if (s.embedded) s.last_error = "cannot open the output directory " + s.out_dir;
    return static_cast<int>(ExitCode::output);  // an unwritable --out: exit 6, as every unwritable output
  }
  job::clear_cancel();
  const int64_t t_start = now_ns();
  describe(s, host, src, rargs, info);
  guard(s, host);
  int code = 0;
  {
    ControlPlane plane(s);
    Chaos::instance().install(info.chaos, s.seed, s.size());
    code = run_through_host(s, host);
    adopt_survivors(s);
    code = agree_exit_code(code);
    nlohmann::json fired = plane.fired_injections(s);
    Chaos::instance().clear();
    plane.stop_heartbeat();
    const double secs = seconds_since(t_start);
    code = finish_report(s, host, std::move(fired), secs, code);
    if (s.metrics) {  // the final values, from the final report, for any recipe
      std::lock_guard<std::recursive_mutex> g(s.report->mutex());
      s.metrics->publish_final(s.report->doc());
    }
    guardian::release();  // the report is written: nothing left for the guardian to do
  }
  unguard(s);
  s.metrics.reset();  // the server's thread ends here: it served while the run lasted
  return code;
}

}  // namespace cs::run
