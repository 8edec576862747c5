#include "incidents.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "collective.hpp"
#include "coordinator_verdict.hpp"
#include "flight_recorder.hpp"
#include "guardian.hpp"
#include "host_name.hpp"
#include "run_html.hpp"

namespace cs::incidents {

namespace {

std::atomic<Session*> g_session{nullptr};
std::atomic<Coordinator*> g_coordinator{nullptr};
std::atomic<HeartbeatClient*> g_heartbeat{nullptr};
std::atomic<bool> g_outcome_saved{false};
std::atomic<const PageRenderer*> g_pages{nullptr};
std::atomic<bool> g_death_pending{false};

// How long the coordinator waits for a dead rank's guardian to write its flight recorder (it
// does so the moment it hears of the death: milliseconds).
constexpr int kGuardianWaitMs = 400;

// How long a rank other than 0 lingers after a signal, so that rank 0 can save the report
// before mpirun's SIGKILL follows.
constexpr auto kSignalLinger = std::chrono::milliseconds(800);
// How long a failing rank waits for the coordinator to confirm that the report was saved.
constexpr int kFailureAckMs = 2000;
// How long a signal handler waits for a death being recorded (rank_died) to finish, and how
// often it looks.
constexpr auto kDeathRecordWait = std::chrono::milliseconds(1000);
constexpr auto kDeathRecordPoll = std::chrono::milliseconds(10);

const char* signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP"; }

void on_signal(int sig) {
  Session* s = g_session.load();
  // A death being recorded (rank_died): mpirun's SIGTERM to rank 0 follows it; let it finish.
  for (auto waited = std::chrono::milliseconds(0); waited < kDeathRecordWait && g_death_pending;
       waited += kDeathRecordPoll)
    std::this_thread::sleep_for(kDeathRecordPoll);
  // Rank 0 resumed from a freeze with the signal (mpirun sends SIGCONT with SIGTERM): the
  // coordinator, frozen with it, is giving the verdict on who the others waited for.
  if (Coordinator* c = g_coordinator.load()) c->await_verdict(coord::kVerdictWaitMs);
  if (s) {
    // Ended by a signal is not dying on its own: say so to the coordinator first.
    if (HeartbeatClient* hb = g_heartbeat.load()) hb->send_goodbye("signal");
    write_flight_record(s->out_dir, s->rank(), host_name(), flight_ring_json(), /*overwrite=*/false);
    // The SIGTERM that follows a recipe error or a timeout verdict is the aftermath, not news.
    if (s->rank() == 0 && !g_outcome_saved) {
      nlohmann::json inc = {
          {"kind", "killed"},
          {"signal", signal_name(sig)},
          {"message", std::string("the job was ended by ") + signal_name(sig) + " before the recipe finished"}};
      if (Coordinator* c = g_coordinator.load()) {
        const auto ranks = c->snapshot();
        // What was in flight and who was not in it: the operation most ranks were in (of equals,
        // the earliest), a collective known by its collective number (the ranks' #N differ after
        // sends), a send or receive by its #N.
        auto number = [](const nlohmann::json& r) {
          return collective_name_is_pairwise(r["op"].get<std::string>()) ? r["seq"].get<uint64_t>()
                                                                         : r["cseq"].get<uint64_t>();
        };
        std::map<std::string, std::vector<int>> in_op;  // keys order by number within an op and comm
        std::map<std::string, std::string> shown;       // key -> "barrier #N on world" (the first rank's N)
        for (const auto& r : ranks)
          if (r["in_flight"].get<bool>()) {
            const std::string op = r["op"].get<std::string>(), comm = r["comm"].get<std::string>();
            char no[24];
            std::snprintf(no, sizeof no, " %c%020llu", collective_name_is_pairwise(op) ? 's' : 'c',
                          static_cast<unsigned long long>(number(r)));
            const std::string key = op + " " + comm + no;
            in_op[key].push_back(r["rank"].get<int>());
            shown.emplace(key, op + " #" + std::to_string(r["seq"].get<uint64_t>()) + " on " + comm);
          }
        std::string what = "outside any operation";
        std::vector<int> inside;
        for (const auto& [key, rs] : in_op)
          if (rs.size() > inside.size()) {
            what = "in " + shown[key];
            inside = rs;
          }
        // Past it, as the timeout verdict counts them: in flight on the same communicator at a
        // later number (a timed loop's ranks are spread over its calls; none of them is missing).
        const nlohmann::json* ref = nullptr;
        for (const auto& r : ranks)
          if (!inside.empty() && r["rank"].get<int>() == inside.front()) ref = &r;
        auto past = [&](const nlohmann::json& r) {
          return ref && r["in_flight"].get<bool>() && r["comm"] == (*ref)["comm"] &&
                 collective_name_is_pairwise(r["op"].get<std::string>()) ==
                     collective_name_is_pairwise((*ref)["op"].get<std::string>()) &&
                 number(r) > number(*ref);
        };
        std::string in_list, out_list;
        for (const auto& r : ranks) {
          const int id = r["rank"].get<int>();
          if (std::find(inside.begin(), inside.end(), id) != inside.end() || past(r)) {
            in_list += (in_list.empty() ? "" : ", ") + std::to_string(id);
          } else if (!inside.empty()) {
            out_list += (out_list.empty() ? "" : "; ") + std::to_string(id) + " (" + r["state"].get<std::string>() +
                        (r["in_flight"].get<bool>() ? ", in " : ", last ") + r["op"].get<std::string>() + " #" +
                        std::to_string(r["seq"].get<uint64_t>()) + ")";
          }
        }
        std::string line = std::string(signal_name(sig)) + ": the run was interrupted " + what;
        if (!inside.empty()) line += "; arrived: " + in_list + "; missing: " + (out_list.empty() ? "none" : out_list);
        inc["message"] = line;
        inc["in_flight"] = what;
        nlohmann::json dead = nlohmann::json::array();
        for (const auto& r : ranks)
          if (r["state"].get<std::string>().rfind("dead", 0) == 0)
            dead.push_back({{"rank", r["rank"]}, {"host", r["host"]}});
        inc["dead_ranks"] = dead;
        inc["ranks"] = ranks;
        if (!dead.empty()) {
          std::string list;
          for (const auto& d : dead)
            list += (list.empty() ? "" : ", ") + std::to_string(d["rank"].get<int>()) + " (host " +
                    d["host"].get<std::string>() + ")";
          inc["message"] = "rank(s) " + list + " died; mpirun ended the others";
          std::fprintf(stderr, "commscript: rank(s) %s died; partial report in %s/report.json\n", list.c_str(),
                       s->out_dir.c_str());
        } else {
          std::fprintf(stderr, "commscript: %s\n", line.c_str());
        }
      } else {
        std::fprintf(stderr, "commscript: %s\n", inc["message"].get<std::string>().c_str());
      }
      save(inc, 128 + sig);
    } else if (s->rank() != 0) {
      std::this_thread::sleep_for(kSignalLinger);
    }
  }
  std::fflush(nullptr);
  guardian::release();  // ended on purpose, with its own record written
  _exit(128 + sig);
}

}  // namespace

void attach(Session* s, const PageRenderer* pages) {
  g_outcome_saved = false;  // a process may run several recipes (embedding)
  g_pages = pages;
  g_session = s;
}

void attach_control_plane(Coordinator* c, HeartbeatClient* hb) {
  g_coordinator = c;
  g_heartbeat = hb;
}

void detach() {
  g_heartbeat = nullptr;
  g_coordinator = nullptr;
  g_session = nullptr;
  g_pages = nullptr;
}

bool outcome_saved() { return g_outcome_saved; }

namespace {
// The status of the chaos exit the dead rank of `inc` recorded, or -1 (issue 30: report.json said
// exit_code null while mpirun passed on the injected status).
int chaos_exit_status(const nlohmann::json& inc) {
  Coordinator* c = g_coordinator.load();
  if (!c || !inc.contains("dead_ranks") || !inc["dead_ranks"].is_array() || inc["dead_ranks"].empty()) return -1;
  const int rank = inc["dead_ranks"][0].value("rank", -1);
  for (const auto& ev : c->events())
    if (ev.is_object() && ev.value("kind", "") == "exit" && ev.value("rank", -2) == rank && ev.contains("status") &&
        ev["status"].is_number_integer())
      return ev["status"].get<int>();
  return -1;
}
}  // namespace

void rank_died(nlohmann::json inc) {
  Session* s = g_session.load();
  if (!s) return;
  g_death_pending = true;
  int status = chaos_exit_status(inc);
  try {
    const int rank = inc["dead_ranks"][0].value("rank", -1);
    const auto file = std::filesystem::path(s->out_dir) / "flight" / ("rank-" + std::to_string(rank) + ".json");
    guardian::Death d;
    nlohmann::json ended;
    for (int waited = 0; waited <= kGuardianWaitMs; waited += 20) {
      std::ifstream in(file);
      if (in) {
        try {
          const nlohmann::json f = nlohmann::json::parse(in);
          if (guardian::death_from_flight_file(f, &d)) {
            ended = f["ended"];
            break;
          }
        } catch (const nlohmann::json::exception&) {  // being written: read it again
        }
      }
      d.rank = -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (d.rank == rank) {
      if (d.host.empty() || d.host == "?") d.host = inc["dead_ranks"][0].value("host", "?");
      const std::string launcher = s->launcher.is_object() ? s->launcher.value("kind", std::string("mpi")) : "mpi";
      inc["message"] = guardian::death_message(d) + "; " + coord::launcher_aftermath(launcher);
      inc["ended"] = ended;
      inc["site"] = d.site;
      inc["last_completed"] = nullptr;
      inc["in_flight"] = nullptr;
      for (const auto& r : d.ops) (r.value("state", "") == "in flight" ? inc["in_flight"] : inc["last_completed"]) = r;
      if (!d.lua_site.empty()) inc["lua_site"] = {{"site", d.lua_site}, {"seen_s_ago", d.lua_age_s}};
      inc["flight_recorder"] = nlohmann::json::array({file.string()});
      // What its guardian saw it end with, as mpirun passes it on: 128 + the signal (a kill -9:
      // 137), else its exit status (report.json said exit_code null while mpirun exited 137).
      if (status < 0) status = d.signal > 0 ? 128 + d.signal : d.status;
    }
  } catch (const std::exception&) {  // keep the coordinator's words
  }
  std::fprintf(stderr, "commscript: %s\n", inc.value("message", std::string("a rank died")).c_str());
  // The job's exit code is the dead rank's status, which mpirun passes on: known here when the
  // rank died of a chaos exit (its injection, with the status, reached the coordinator first) or
  // its guardian recorded how it ended.
  save(inc, status);
  g_death_pending = false;
}

void save(const nlohmann::json& incident, int exit_code) {
  Session* s = g_session.load();
  if (!s || !s->report || !s->report->writer()) return;
  try {
    std::lock_guard<std::recursive_mutex> g(s->report->mutex());
    auto& d = s->report->doc();
    d["incidents"].push_back(incident);
    if (Coordinator* c = g_coordinator.load()) {
      const auto ev = c->events();
      if (!ev.empty()) d["chaos"] = ev;
    }
    // The first outcome's code is the job's: what follows it (a sender whose peer left after the
    // peer's desync, exit 2 after the desync's 5) is its aftermath, and the launcher passes on
    // the first failing rank's code too. A death (no code: its status is mpirun's) or a kill
    // may still be followed by a code.
    const bool decided = g_outcome_saved && d["run"].contains("exit_code") && !d["run"]["exit_code"].is_null();
    if (!decided) d["run"]["exit_code"] = exit_code >= 0 ? nlohmann::json(exit_code) : nlohmann::json(nullptr);
    s->report->write(/*sync=*/false);  // in place at once; the disk is waited for below
    // Saved: a SIGTERM from here on (the failing rank gave up waiting for its ACK while this
    // renders report.html, and mpirun ends the job) is the aftermath, not a "killed" over it.
    if (incident.value("kind", "") != "killed") g_outcome_saved = true;
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      std::fprintf(stderr, "commscript: report written to %s\n", (s->report->dir() / "report.json").c_str());
      std::fflush(stderr);
    }
    s->report->sync();
    if (const PageRenderer* pages = g_pages.load()) run::write_html_on_the_way_out(*pages, *s->report);
  } catch (const Error& e) {  // the output directory failed: say so, never throw from here
    std::fprintf(stderr, "commscript: report.json not saved: %s\n", e.what());
  } catch (const std::exception&) {  // on the way out: never throw from here
  }
}

void announce_comm(const std::string& name) {
  if (HeartbeatClient* hb = g_heartbeat.load()) hb->announce_comm(name);
}

void add_flight_files(const nlohmann::json& files) {
  Session* s = g_session.load();
  if (!s || !s->report || !s->report->writer()) return;
  try {
    std::lock_guard<std::recursive_mutex> g(s->report->mutex());
    auto& incs = s->report->doc()["incidents"];
    for (auto it = incs.rbegin(); it != incs.rend(); ++it)
      if (it->value("kind", "") == "timeout" || it->value("kind", "") == "desync") {  // the coordinator's verdicts
        (*it)["flight_recorder"] = files;
        s->report->write();
        return;
      }
  } catch (const std::exception&) {  // on the way out: never throw from here
  }
}

namespace {
// Records a failure: rank 0 saves it as the run's error; another rank hands it to rank 0 over its
// heartbeat. Returns true on rank 0 (false too when no run is open).
bool record_failure(ExitCode code, const std::string& full_message) {
  const std::string message = coord::cap_message(full_message);
  Session* s = g_session.load();
  if (!s) return false;
  if (s->rank() == 0) {
    save({{"kind", "error"}, {"rank", 0}, {"exit_code", static_cast<int>(code)}, {"message", message}},
         static_cast<int>(code));
    return true;
  }
  if (HeartbeatClient* hb = g_heartbeat.load()) hb->report_failure(static_cast<int>(code), message, kFailureAckMs);
  return false;
}
}  // namespace

void on_abort(ExitCode code, const std::string& full_message) { record_failure(code, full_message); }

void fail_run(ExitCode code, const std::string& full_message) {
  if (!record_failure(code, full_message)) return;
  if (Coordinator* c = g_coordinator.load()) c->cancel_all(static_cast<int>(code));
}

void start_signal_thread() {
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&sigs, sig);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::thread([sigs] {
    int sig = 0;
    if (sigwait(&sigs, &sig) == 0) on_signal(sig);
  }).detach();
}

}  // namespace cs::incidents
