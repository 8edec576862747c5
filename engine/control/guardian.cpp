#include "guardian.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "clock.hpp"
#include "flight_recorder.hpp"
#include "json_text.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "run_html.hpp"

namespace cs::guardian {

namespace {

int g_fd = -1;  // the rank's end of the socket pair (-1: no guardian)
// What rank 0's guardian renders report.html with (given to start(): the guardian is a fork).
const PageRenderer* g_pages = nullptr;

// How long the guardian may take once its rank is gone: it holds rank 0's stderr, which mpirun
// waits for; an alarm ends it whatever happens.
constexpr unsigned kGuardianAlarmS = 20;
// How long rank 0's guardian waits for the other ranks' flight recorders (mpirun sends them
// SIGTERM when rank 0 dies; their signal threads or guardians write the files).
constexpr double kWaitForOthersS = 2.0;
// How long rank 0's guardian lets report.html render (well inside its alarm).
constexpr double kRenderS = 8.0;

void send_msg(const nlohmann::json& m) {
  if (g_fd < 0) return;
  const std::string line = json_text(m) + "\n";
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::send(g_fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // the guardian is gone: carry on without it
      close(g_fd);
      g_fd = -1;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGKILL:
      return "SIGKILL";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return nullptr;
  }
}

std::string signal_text(int sig) {
  if (const char* n = signal_name(sig)) return n;
  return "signal " + std::to_string(sig);
}

// How the rank ended: /proc/PID/stat's 52nd field is its wait status, set when the kernel starts
// ending the process (before it closes its files, which is when the guardian hears of it) and
// readable until its parent (orted) reaps it. Returns false when it is gone already or the
// status reads 0 (then how it ended is unknown).
bool exit_status_of(int pid, int* status) {
  // The main thread's own stat: the process's file shows 0 while other threads still exit.
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(text.substr(paren + 1));
  std::vector<std::string> f;
  for (std::string w; rest >> w;) f.push_back(w);
  // f[0] is field 3 (state); the exit code is field 52.
  if (f.size() < 50) return false;
  *status = std::atoi(f[49].c_str());
  return *status != 0 || f[0] == "Z";
}

nlohmann::json read_json_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return nullptr;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

// Every whole line of results.jsonl that is a JSON value (a line cut by the kill is skipped).
nlohmann::json read_results(const std::filesystem::path& p) {
  nlohmann::json out = nlohmann::json::array();
  std::ifstream in(p, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
    }
  }
  return out;
}

std::string op_text(const nlohmann::json& r) {
  return r.value("op", "?") + " #" + std::to_string(r.value("seq", 0ULL)) + " on " + r.value("comm", "?");
}

// One line on another rank's state from its flight recorder file.
nlohmann::json rank_summary(const nlohmann::json& f) {
  nlohmann::json s = {{"rank", f.value("rank", -1)}, {"host", f.value("host", "?")}};
  const auto ops = f.value("ops", nlohmann::json::array());
  if (ops.is_array() && !ops.empty()) {
    const auto& last = ops.back();
    s["op"] = last.value("op", "?");
    s["seq"] = last.value("seq", 0ULL);
    s["comm"] = last.value("comm", "?");
    s["in_flight"] = last.value("state", "") == "in flight";
  }
  if (f.contains("ended")) s["ended"] = f["ended"];
  return s;
}

[[noreturn]] void guardian_main(int fd, int parent) {
  prctl(PR_SET_NAME, "cs-guardian", 0, 0, 0);  // what ps and /proc/PID/comm show
  setsid();  // its own session: the terminal's Ctrl-C and mpirun's kill of the rank's group miss it
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT, SIGUSR1, SIGUSR2}) signal(sig, SIG_IGN);
  if (const int null = open("/dev/null", O_RDWR); null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    if (null > 2) close(null);
  }
  // Nothing of the rank's but the socket and stderr: no listening sockets or files kept open.
  for (int i = 3; i < 1024; ++i)
    if (i != fd) close(i);
  Death d;
  d.pid = parent;
  bool released = false;
  std::string buf;
  char tmp[65536];
  while (true) {
    const ssize_t n = read(fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      nlohmann::json m;
      try {
        m = nlohmann::json::parse(buf.substr(0, nl));
      } catch (const nlohmann::json::exception&) {
      }
      buf.erase(0, nl + 1);
      if (!m.is_object()) continue;
      const std::string t = m.value("t", "");
      if (t == "watch") {
        d.out_dir = m.value("dir", "");
        d.rank = m.value("rank", 0);
        d.size = m.value("size", 1);
        d.host = m.value("host", "");
      } else if (t == "header") {
        d.header = m["doc"];
      } else if (t == "release") {
        released = true;
      }
    }
  }
  if (released || d.out_dir.empty()) _exit(0);
  alarm(kGuardianAlarmS);
  int status = 0;
  if (exit_status_of(parent, &status)) {
    if (WIFSIGNALED(status))
      d.signal = WTERMSIG(status);
    else if (WIFEXITED(status))
      d.status = WEXITSTATUS(status);
  }
  const Progress& p = Progress::instance();
  d.ops = flight_ring_json(p.recent_left(), p.in_flight());
  d.site = p.site_left();
  int64_t at = 0;
  d.lua_site = p.lua_site(&at);
  if (!d.lua_site.empty() && at > 0) d.lua_age_s = static_cast<double>(now_ns() - at) * 1e-9;
  try {
    write_after_death(d, kWaitForOthersS);
  } catch (const std::exception&) {
  }
  std::fflush(nullptr);
  _exit(0);
}

}  // namespace

bool render_html_bounded(HtmlRenderer render, const std::string& dir, double timeout_s, std::string* why) {
  namespace fs = std::filesystem;
  auto say = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (!render) return say("no renderer");
  const fs::path json = fs::path(dir) / "report.json";
  const fs::path html = fs::path(dir) / "report.html";
  const fs::path tmp = fs::path(dir) / "report.html.guardian.tmp";
  int pipefd[2];
  if (pipe(pipefd) != 0) return say(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return say(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {  // the renderer's process: whatever it does, it ends here
    close(pipefd[0]);
    alarm(static_cast<unsigned>(timeout_s) + 2);  // in case the parent is gone
    std::string w;
    bool ok = false;
    try {
      ok = render(json.string(), tmp.string(), &w);
    } catch (const std::exception& e) {
      w = e.what();
    }
    if (!ok && !w.empty()) (void)!write(pipefd[1], w.data(), std::min<size_t>(w.size(), 512));
    _exit(ok ? 0 : 1);
  }
  close(pipefd[1]);
  const int64_t deadline = deadline_ns(timeout_s);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && now_ns() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::string w;
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    char t[32];
    std::snprintf(t, sizeof t, "%g", timeout_s);
    w = std::string("rendering took longer than ") + t + " s";
  } else if (done < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char buf[513];
    const ssize_t n = read(pipefd[0], buf, 512);
    w = n > 0                             ? std::string(buf, static_cast<size_t>(n))
        : done > 0 && WIFSIGNALED(status) ? "the renderer was ended by " + signal_text(WTERMSIG(status))
                                          : "the renderer failed";
  }
  close(pipefd[0]);
  std::error_code ec;
  if (!w.empty()) {
    fs::remove(tmp, ec);
    return say(w);
  }
  fs::rename(tmp, html, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return say("cannot write " + html.string() + ": " + ec.message());
  }
  return true;
}

bool start(const PageRenderer* pages) {
  if (g_fd >= 0) return true;
  g_pages = pages;
  if (const char* v = std::getenv("COMMSCRIPT_NO_GUARDIAN"); v && *v && std::strcmp(v, "0") != 0) return false;
  (void)Progress::instance();  // the shared flight recorder exists before the fork
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  const int parent = static_cast<int>(getpid());
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return false;
  }
  if (pid == 0) {
    close(sv[1]);
    guardian_main(sv[0], parent);
  }
  close(sv[0]);
  g_fd = sv[1];
  return true;
}

void watch(const std::string& out_dir, int rank, int size, const std::string& host) {
  send_msg({{"t", "watch"}, {"dir", out_dir}, {"rank", rank}, {"size", size}, {"host", host}});
}

void header(const nlohmann::json& doc) { send_msg({{"t", "header"}, {"doc", doc}}); }

void release() {
  send_msg({{"t", "release"}});
  if (g_fd >= 0) {
    close(g_fd);
    g_fd = -1;
  }
}

bool death_from_flight_file(const nlohmann::json& f, Death* d) {
  if (!f.is_object() || !f.contains("ended") || !f["ended"].is_object()) return false;
  const auto& e = f["ended"];
  d->rank = f.value("rank", 0);
  d->host = f.value("host", "?");
  d->pid = e.value("pid", 0);
  d->signal = 0;
  if (e.contains("by") && e["by"].is_string())
    for (int sig = 1; sig < 32; ++sig)
      if (signal_text(sig) == e["by"].get<std::string>()) d->signal = sig;
  d->status = e.contains("exit_status") && e["exit_status"].is_number_integer() ? e["exit_status"].get<int>() : -1;
  d->ops = f.value("ops", nlohmann::json::array());
  d->site = f.value("site", "");
  if (f.contains("lua_site") && f["lua_site"].is_object()) {
    d->lua_site = f["lua_site"].value("site", "");
    d->lua_age_s = f["lua_site"].value("seen_s_ago", -1.0);
  }
  return true;
}

std::string death_message(const Death& d) {
  std::string how = d.signal        ? "was killed by " + signal_text(d.signal)
                    : d.status >= 0 ? "exited with status " + std::to_string(d.status) + " without a goodbye"
                                    : "ended without a goodbye (killed, crashed or exited; mpirun reports its status)";
  std::string m = "rank " + std::to_string(d.rank) + " (host " + d.host + ", pid " + std::to_string(d.pid) + ") " + how;
  const nlohmann::json ops = d.ops.is_array() ? d.ops : nlohmann::json::array();
  const nlohmann::json* flying = nullptr;
  const nlohmann::json* done = nullptr;
  for (const auto& r : ops) {
    if (r.value("state", "") == "in flight")
      flying = &r;
    else
      done = &r;
  }
  // Inside a timed loop (one record for its calls): the call it died in, and the one before it
  // as the last completed, not the operation before the loop.
  const uint64_t loop_calls = flying ? flying->value("loop_calls", uint64_t{1}) : 1;
  if (flying) {
    char age[32];
    std::snprintf(age, sizeof age, "%.1f", flying->value("started_ms_ago", 0.0) * 1e-3);
    m += " in " + op_text(*flying) +
         (loop_calls > 1 ? " (call " + std::to_string(loop_calls) + " of a timed loop that had run for " + age + " s)"
                         : " (in flight for " + std::string(age) + " s)");
  } else if (d.lua_age_s >= 0 && !d.lua_site.empty()) {
    char age[32];
    std::snprintf(age, sizeof age, "%.1f", d.lua_age_s);
    m += " busy in Lua at " + d.lua_site + " (seen " + age + " s before)";
  } else {
    // LuaJIT's profiler sees no compiled loop that never exits its trace: then only "outside".
    m += " outside any operation (running Lua or blocked outside the engine since its last operation)";
  }
  if (loop_calls > 1)
    m += "; last completed: #" + std::to_string(flying->value("seq", uint64_t{0}) - 1) + ", the call before it";
  else if (done)
    m += "; last completed: " + op_text(*done);
  if (!d.site.empty()) m += "; its latest verified call was at " + d.site;
  return m;
}

nlohmann::json write_after_death(const Death& d, double wait_for_others_s) {
  namespace fs = std::filesystem;
  const fs::path dir(d.out_dir);
  nlohmann::json ended = {{"by", d.signal ? nlohmann::json(signal_text(d.signal)) : nlohmann::json(nullptr)},
                          {"exit_status", d.status >= 0 ? nlohmann::json(d.status) : nlohmann::json(nullptr)},
                          {"pid", d.pid},
                          {"detected_by", "guardian"}};
  nlohmann::json extra = {{"state", "died"}, {"ended", ended}, {"site", d.site}};
  if (!d.lua_site.empty()) extra["lua_site"] = {{"site", d.lua_site}, {"seen_s_ago", d.lua_age_s}};
  // The rank's own file (written at a signal) wins: it knew more.
  write_flight_record(d.out_dir, d.rank, d.host, d.ops, /*overwrite=*/false, extra);

  const std::string message = death_message(d);
  nlohmann::json inc = {{"kind", "rank_died"},
                        {"rank", d.rank},
                        {"host", d.host},
                        {"dead_ranks", nlohmann::json::array({{{"rank", d.rank}, {"host", d.host}, {"pid", d.pid}}})},
                        {"ended", ended},
                        {"site", d.site},
                        {"message", message},
                        {"detected_by", "guardian"}};
  const nlohmann::json ops = d.ops.is_array() ? d.ops : nlohmann::json::array();
  inc["last_completed"] = nullptr;
  inc["in_flight"] = nullptr;
  for (const auto& r : ops) (r.value("state", "") == "in flight" ? inc["in_flight"] : inc["last_completed"]) = r;
  if (!d.lua_site.empty()) inc["lua_site"] = {{"site", d.lua_site}, {"seen_s_ago", d.lua_age_s}};
  if (d.rank != 0) return inc;

  // Rank 0 wrote the report; it can no longer. A report already finished (an exit code) is left.
  const fs::path report = dir / "report.json";
  nlohmann::json doc = read_json_file(report);
  if (doc.is_object() && doc.contains("run") && doc["run"].is_object() && doc["run"].contains("exit_code") &&
      !doc["run"]["exit_code"].is_null())
    return inc;
  if (!doc.is_object()) doc = d.header.is_object() ? d.header : nlohmann::json::object();
  std::fprintf(stderr, "commscript: %s\n", message.c_str());
  std::fflush(stderr);

  // The other ranks' flight recorders, as mpirun ends them.
  const int64_t t0 = now_ns();
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json files = nlohmann::json::array();
  while (true) {
    ranks = nlohmann::json::array();
    files = nlohmann::json::array();
    int have = 0;
    for (int r = 0; r < d.size; ++r) {
      const fs::path f = dir / "flight" / ("rank-" + std::to_string(r) + ".json");
      const nlohmann::json j = read_json_file(f);
      if (!j.is_object()) continue;
      ++have;
      ranks.push_back(rank_summary(j));
      files.push_back(f.string());
    }
    if (have >= d.size || seconds_since(t0) >= wait_for_others_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  inc["ranks"] = ranks;
  inc["flight_recorder"] = files;

  for (const char* k : {"results", "findings", "chaos", "incidents"})
    if (!doc.contains(k) || !doc[k].is_array()) doc[k] = nlohmann::json::array();
  if (!doc.contains("run") || !doc["run"].is_object()) doc["run"] = nlohmann::json::object();
  // Everything measured: results.jsonl has every result, flushed as it was taken.
  nlohmann::json results = read_results(dir / "results.jsonl");
  if (results.size() > doc["results"].size()) doc["results"] = std::move(results);
  doc["incidents"].push_back(inc);
  doc["run"]["partial"] = true;
  doc["run"]["exit_code"] = d.signal        ? nlohmann::json(128 + d.signal)
                            : d.status >= 0 ? nlohmann::json(d.status)
                                            : nlohmann::json(nullptr);
  // The run's own writer (report.cpp), synced: the rank is gone and this is its report.
  const std::string failed = write_report_json(dir, doc, /*sync=*/true, "report.json.guardian.tmp");
  if (!failed.empty())
    std::fprintf(stderr, "commscript: rank 0's guardian: %s\n", failed.c_str());
  else
    std::fprintf(stderr, "commscript: partial report written to %s by rank 0's guardian\n", report.c_str());
  std::fflush(stderr);
  if (failed.empty() && g_pages) {
    std::string why;
    auto render = [](const std::string& json, const std::string& html, std::string* w) {
      return run::render_html_file(*g_pages, json, html, w);
    };
    if (!render_html_bounded(render, d.out_dir, kRenderS, &why))
      std::fprintf(stderr, "commscript: warning: report.html not written: %s\n", why.c_str());
    std::fflush(stderr);
  }
  return inc;
}

}  // namespace cs::guardian
