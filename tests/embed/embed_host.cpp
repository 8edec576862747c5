// A host program for the embedding tests (tests/embed/CMakeLists.txt), linked against
// libcommscript through its C API only. Modes:
//   failures DIR      an embedded recipe error and an embedded hang return 2 and 5; bad input
//                     through the API returns error codes; the host then does its own MPI work
//   hygiene N         N consecutive runs (every other one on a new session on a split communicator):
//                     open fds, threads, RSS, communicators and signal state before and after (printed)
//   api               versions and the MPI state the session reports
//   backends          API 1.1: bw_sweep on gloo over a split communicator, nccl's refusal without a
//                     device, the plan steps (check, replay), cs_last_exit_code, a 1.0-sized options struct
#include <dirent.h>
#include <mpi.h>
#include <pthread.h>
#include <unistd.h>
// after mpi.h
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "commscript/commscript.h"

namespace {

int g_rank = 0, g_failed = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "embed_host: rank %d: FAILED: %s\n", g_rank, what.c_str());
    g_failed = 1;
  } else if (g_rank == 0) {
    std::printf("ok: %s\n", what.c_str());
  }
}

int count_dir(const char* path) {
  int n = 0;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

int run(cs_session* s, const char* recipe, std::vector<const char*> args, const char* config, std::string* report,
        std::string* err = nullptr) {
  cs_result* r = nullptr;
  const int rc = cs_run(s, recipe, args.data(), static_cast<int>(args.size()), nullptr, 0, config, nullptr, &r);
  if (rc != CS_OK) {
    if (err) *err = cs_last_error(s);
    return rc;
  }
  const int code = cs_result_exit_code(r);
  if (report) *report = cs_result_report_json(r);
  if (err) *err = cs_result_error(r);
  cs_result_free(r);
  return code;
}

int failures(const std::string& dir, cs_session* s) {
  std::string rep, err;
  // 1. A recipe error on rank 1 ends the run with 2 on every rank; the report says so.
  int code = run(s, (dir + "/fail_error.lua").c_str(), {}, nullptr, &rep, &err);
  expect(code == 2, "embedded Lua error returns exit code 2 (got " + std::to_string(code) + ")");
  expect(rep.find("deliberate failure on rank 1") != std::string::npos,
         "the report names the error (rank 0 saved the incident)");
  expect(rep.find("\"exit_code\":2") != std::string::npos, "report.json run.exit_code is 2");
  // 2. A hang on rank 1: the coordinator judges it, the run ends with 5, every rank returns.
  code = run(s, (dir + "/barriers.lua").c_str(), {}, (dir + "/hang.toml").c_str(), &rep, &err);
  expect(code == 5, "embedded hang returns exit code 5 (got " + std::to_string(code) + ")");
  expect(rep.find("\"kind\":\"timeout\"") != std::string::npos, "the report holds the timeout incident");
  expect(rep.find("missing ranks: 1") != std::string::npos, "the verdict names rank 1 as missing");
  // 3. After both, a clean run on the same session.
  code = run(s, "env_audit", {}, nullptr, &rep, &err);
  expect(code == 0 || code == 3, "a run after the failures works (env_audit exit " + std::to_string(code) + ")");
  // 4. Bad input through the API: codes and messages, the host survives.
  cs_result* r = nullptr;
  expect(cs_run(nullptr, "env_audit", nullptr, 0, nullptr, 0, nullptr, nullptr, &r) == CS_E_INVALID,
         "null session refused");
  expect(cs_run(s, nullptr, nullptr, 0, nullptr, 0, nullptr, nullptr, &r) == CS_E_INVALID, "null recipe refused");
  expect(cs_run(s, "env_audit", nullptr, 0, nullptr, 0, nullptr, nullptr, nullptr) == CS_E_INVALID,
         "null result pointer refused");
  expect(cs_run(s, "env_audit", nullptr, 2, nullptr, 0, nullptr, nullptr, &r) == CS_E_INVALID,
         "argc 2 with argv NULL refused");
  // (each call first, then its message: the message is part of what is checked)
  int rc = run(s, "no_such_recipe", {}, nullptr, nullptr, &err);
  expect(rc == CS_E_NOT_FOUND && err.find("not found") != std::string::npos,
         "unknown recipe: CS_E_NOT_FOUND (" + err + ")");
  rc = run(s, "bw_sweep", {"--max", "banana"}, nullptr, nullptr, &err);
  expect(rc == CS_E_INVALID && err.find("banana") != std::string::npos,
         "bad recipe option: CS_E_INVALID (" + err + ")");
  rc = run(s, "bw_sweep", {"--no-such-option", "1"}, nullptr, nullptr, &err);
  expect(rc == CS_E_INVALID && err.find("no-such-option") != std::string::npos,
         "unknown recipe option: CS_E_INVALID (" + err + ")");
  const char* badset[] = {"run.timeout=-3"};
  rc = cs_run(s, "env_audit", nullptr, 0, badset, 1, nullptr, nullptr, &r);
  expect(rc == CS_E_INVALID && std::strstr(cs_last_error(s), "timeout"),
         std::string("bad config value: CS_E_INVALID (") + cs_last_error(s) + ")");
  rc = cs_session_attach_comm(s, MPI_COMM_NULL);
  expect(rc == CS_E_MPI && std::strstr(cs_last_error(s), "MPI_COMM_NULL"),
         std::string("MPI_COMM_NULL refused (") + cs_last_error(s) + ")");
  expect(cs_session_attach_comm_f(nullptr, 0) == CS_E_INVALID, "attach on a null session refused");
  cs_session* bad = nullptr;
  expect(cs_session_open(nullptr, nullptr) == CS_E_INVALID && std::strlen(cs_last_error(nullptr)) > 0,
         "open with a null out pointer refused");
  cs_session_options o{};
  o.struct_size = 3;
  expect(cs_session_open(&o, &bad) == CS_E_INVALID && bad == nullptr, "open with unset options refused");
  cs_result_free(nullptr);
  cs_session_close(nullptr);
  expect(cs_result_exit_code(nullptr) == -1, "a null result reads as -1");
#ifdef OPEN_MPI
  // A handle that is no live communicator's (here a freed one): refused, not MPI_ERR_COMM's abort.
  MPI_Comm gone = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &gone);
  const int64_t gone_f = MPI_Comm_c2f(gone);
  MPI_Comm_free(&gone);
  rc = cs_session_attach_comm_f(s, gone_f);
  expect(rc == CS_E_MPI && std::strstr(cs_last_error(s), "no live communicator"),
         std::string("a freed communicator's handle refused (") + cs_last_error(s) + ")");
#endif
  // 5. Two new sessions' first runs of one recipe (in the same second, mostly) get two directories:
  // the second report must not replace the first.
  std::string dirs[2];
  for (auto& d : dirs) {
    cs_session* t = nullptr;
    cs_session_options to;
    cs_session_options_init(&to);
    to.out_dir = "embed-runs";
    cs_result* tr = nullptr;
    if (cs_session_open(&to, &t) == CS_OK &&
        cs_run(t, "env_audit", nullptr, 0, nullptr, 0, nullptr, nullptr, &tr) == CS_OK)
      d = cs_result_out_dir(tr);
    cs_result_free(tr);
    cs_session_close(t);
  }
  expect(!dirs[0].empty() && !dirs[1].empty() && dirs[0] != dirs[1],
         "two sessions' runs write two directories (" + dirs[0] + ", " + dirs[1] + ")");
  return 0;
}

// The process's signal state: every signal's disposition (handler and flags) and the calling
// thread's mask. A run must leave both as it found them (no handler or mask left behind).
std::string signal_state() {
  std::string out;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction a {};
    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, nullptr, &a) != 0) continue;
    const auto h = reinterpret_cast<uintptr_t>(a.sa_handler);
    if (h != reinterpret_cast<uintptr_t>(SIG_DFL))
      out += std::to_string(sig) + ":" + std::to_string(h) + "/" + std::to_string(a.sa_flags) + " ";
  }
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  out += "blocked:";
  for (int sig = 1; sig < NSIG; ++sig)
    if (sigismember(&mask, sig) == 1) out += " " + std::to_string(sig);
  return out;
}

// The Fortran index a new communicator gets: Open MPI hands out the lowest free one, so a
// communicator a run left behind shows as a higher index afterwards.
int next_comm_index() {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  const int f = MPI_Comm_c2f(c);
  MPI_Comm_free(&c);
  return f;
}

// N runs, one after another: the even ones on the host's session (on the world), the odd ones each
// on a new session lent a communicator the host split (opened, attached, run, closed).
int hygiene(cs_session* s, int n) {
  std::string rep;
  long rss0 = 0;
  int fds0 = 0, thr0 = 0, comm0 = 0;
  const int warm = 5;
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, 0, -g_rank, &sub);  // the ranks in reverse order
  const std::string sig0 = signal_state();           // before any run: a handler left by the first one counts
  for (int i = 0; i < n + warm; ++i) {
    if (i == warm) {
      MPI_Barrier(MPI_COMM_WORLD);
      fds0 = count_dir("/proc/self/fd");
      thr0 = count_dir("/proc/self/task");
      rss0 = rss_kb();
      comm0 = next_comm_index();
    }
    cs_session* run_on = s;
    if (i % 2) {
      cs_session_options o;
      cs_session_options_init(&o);
      o.out_dir = "embed-runs";
      o.deadline_s = 30;
      if (cs_session_open(&o, &run_on) != CS_OK || cs_session_attach_comm(run_on, sub) != CS_OK) {
        expect(false, "run " + std::to_string(i) + ": a new session on the split communicator");
        return 1;
      }
    }
    const int code =
        run(run_on, "bw_sweep", {"--ops", "allreduce", "--min", "8", "--max", "1K", "--iters", "2", "--warmup", "1"},
            nullptr, &rep);
    if (run_on != s) cs_session_close(run_on);
    if (code != 0) {
      expect(false, "run " + std::to_string(i) + " exit code " + std::to_string(code));
      return 1;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const int fds1 = count_dir("/proc/self/fd"), thr1 = count_dir("/proc/self/task");
  const long rss1 = rss_kb();
  const int comm1 = next_comm_index();
  const std::string sig1 = signal_state();
  MPI_Comm_free(&sub);
  std::printf(
      "rank %d: %d runs after %d warm-up (half on new sessions): open fds %d -> %d, threads %d -> %d, RSS %ld -> %ld "
      "KiB (%+ld KiB, %+.1f KiB/run), next communicator index %d -> %d, signal handlers/mask %s\n",
      g_rank, n, warm, fds0, fds1, thr0, thr1, rss0, rss1, rss1 - rss0, static_cast<double>(rss1 - rss0) / n, comm0,
      comm1, sig0 == sig1 ? "unchanged" : ("changed: [" + sig0 + "] -> [" + sig1 + "]").c_str());
  std::fflush(stdout);
  expect(fds1 == fds0, "no growth in open file descriptors");
  expect(thr1 == thr0, "no growth in threads");
  // Noise: the allocator's arenas and MPI's caches settle in the warm-up; a leak of one report
  // (tens of KiB) per run would show as several MiB over 100 runs.
  expect(rss1 - rss0 < 4096, "RSS growth under 4 MiB over " + std::to_string(n) + " runs");
#ifdef OPEN_MPI
  expect(comm1 == comm0, "no communicator left behind (the next one's index is the same)");
#endif
  expect(sig1 == sig0, "signal handlers and mask as before the first run");
  return 0;
}

// The report's "backend" as recorded in run.backend (a plain search: the report is one line).
bool report_backend_is(const std::string& rep, const std::string& b) {
  return rep.find("\"backend\":\"" + b + "\"") != std::string::npos;
}

int backends(const std::string& dir) {
  // 1. gloo over a communicator the host split (the upper half of the ranks when there are 4).
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, size >= 4 && g_rank >= size / 2 ? 1 : 0, g_rank, &half);
  cs_session_options o;
  cs_session_options_init(&o);
  o.out_dir = "embed-runs";
  o.deadline_s = 30;
  o.backend = "gloo";
  cs_session* g = nullptr;
  std::string rep, err;
  const int grc = cs_session_open(&o, &g);  // (its message is read after the call)
  const bool no_gloo = grc == CS_E_INVALID && std::strstr(cs_last_error(nullptr), "without Gloo");
  if (no_gloo && g_rank == 0) std::printf("skipped: gloo (%s)\n", cs_last_error(nullptr));
  if (!no_gloo) {
    expect(grc == CS_OK, std::string("gloo session opened ") + cs_last_error(nullptr));
    expect(cs_session_attach_comm(g, half) == CS_OK, "gloo session attached to the split communicator");
  }
  for (int i = 0; i < (no_gloo ? 0 : 2); ++i) {  // twice: each run sets up and tears down its Gloo context
    const int code = run(g, "bw_sweep", {"--ops", "allreduce,broadcast", "--min", "1K", "--max", "64K", "--iters", "3"},
                         nullptr, &rep, &err);
    expect(code == 0, "embedded bw_sweep on gloo exits 0 (got " + std::to_string(code) + " " + err + ")");
    expect(report_backend_is(rep, "gloo"), "its report records backend gloo");
    expect(rep.find("\"busbw\"") != std::string::npos, "its report holds busbw results");
  }
  cs_session_close(g);
  MPI_Comm_free(&half);

  // 2. nccl without a GPU: the backend cannot be set up; an error code on every rank, the host goes on.
  o.backend = "nccl";
  cs_session* n = nullptr;
  const int open_rc = cs_session_open(&o, &n);
  if (open_rc == CS_OK) {
    const int rc = run(n, "bw_sweep", {"--max", "1K"}, nullptr, nullptr, &err);
    expect(rc == CS_E_BACKEND || rc == 0,
           "nccl: a run with no usable GPU is CS_E_BACKEND (got " + std::to_string(rc) + ": " + err + ")");
    if (rc == CS_E_BACKEND)
      expect(cs_last_exit_code(n) == 1 || cs_last_exit_code(n) == 2,
             "its cs_last_exit_code is the command line's (" + std::to_string(cs_last_exit_code(n)) + ")");
    cs_session_close(n);
  } else {
    expect(open_rc == CS_E_INVALID && std::strstr(cs_last_error(nullptr), "nccl"),
           std::string("nccl refused by a build without it: ") + cs_last_error(nullptr));
  }

  // 3. The plan steps on the mpi backend, and the exit codes of failures.
  o.backend = nullptr;
  cs_session* s = nullptr;
  expect(cs_session_open(&o, &s) == CS_OK, "mpi session opened");
  cs_run_options ro;
  cs_run_options_init(&ro);
  cs_plan* p = nullptr;
  ro.recipe = "no_such_recipe";
  expect(cs_plan_open(s, &ro, &p) == CS_E_NOT_FOUND && p == nullptr && cs_last_exit_code(s) == 1,
         "plan of an unknown recipe: CS_E_NOT_FOUND, exit code 1");
  const char* bad[] = {"run.timeout=banana"};
  ro.recipe = "env_audit";
  ro.sets = bad;
  ro.nsets = 1;
  int rc = cs_plan_open(s, &ro, &p);  // the call first, then its message
  expect(rc == CS_E_INVALID && cs_last_exit_code(s) == 1 && std::strstr(cs_last_error(s), "banana"),
         std::string("plan with a bad --set: CS_E_INVALID, exit code 1 (") + cs_last_error(s) + ")");
  ro.nsets = 0;
  const char* args[] = {"--ops", "allreduce", "--min", "1K", "--max", "4K", "--iters", "2"};
  ro.recipe = "bw_sweep";
  ro.argv = args;
  ro.argc = 8;
  expect(cs_plan_open(s, &ro, &p) == CS_OK && !cs_plan_wants_help(p), "plan of bw_sweep opened");
  int code = -1;
  expect(cs_plan_check(s, p, 0, &code) == CS_OK && code == 0, "cs_plan_check: bw_sweep and its options are valid");
  cs_result* r = nullptr;
  expect(cs_plan_run(s, p, &r) == CS_OK && cs_result_exit_code(r) == 0, "the plan runs (exit 0)");
  const std::string out = cs_result_out_dir(r);
  cs_result_free(r);
  expect(cs_plan_run(s, p, &r) == CS_E_STATE, "a plan runs once (CS_E_STATE the second time)");
  cs_plan_free(p);
  // --replay through the API: the recorded recipe runs again.
  cs_run_options rp;
  cs_run_options_init(&rp);
  const std::string recorded = out + "/report.json";
  rp.replay = recorded.c_str();
  rp.recipe = "env_audit";
  expect(cs_plan_open(s, &rp, &p) == CS_E_INVALID && std::strstr(cs_last_error(s), "--replay"),
         "replay and a recipe together refused");
  rp.recipe = nullptr;
  rc = cs_plan_open(s, &rp, &p);
  expect(rc == CS_OK, std::string("replay plan opened ") + cs_last_error(s));
  if (p) {
    expect(cs_plan_run(s, p, &r) == CS_OK && cs_result_exit_code(r) == 0, "the replayed run exits 0");
    const std::string again = cs_result_report_json(r);
    expect(again.find("\"replay_of\":\"" + recorded + "\"") != std::string::npos &&
               again.find("bw_sweep") != std::string::npos,
           "its report records the replay of bw_sweep");
    cs_result_free(r);
    cs_plan_free(p);
  }
  cs_session_close(s);

  // 4. A caller compiled against 1.0 passes the 1.0 struct size: accepted, the 1.1 fields default.
  cs_session_options old;
  cs_session_options_init(&old);
  old.struct_size = static_cast<int>(offsetof(cs_session_options, backend));
  old.backend = "not-read";
  cs_session* s10 = nullptr;
  expect(cs_session_open(&old, &s10) == CS_OK, "a 1.0-sized cs_session_options is accepted");
  const int c10 = run(s10, "bw_sweep", {"--max", "1K", "--iters", "2"}, nullptr, &rep, &err);
  expect(c10 == 0 && report_backend_is(rep, "mpi"), "and runs on the default backend (mpi)");
  cs_session_close(s10);
  (void)dir;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  const std::string mode = argc > 1 ? argv[1] : "api";
  cs_session_options o;
  cs_session_options_init(&o);
  o.out_dir = "embed-runs";
  o.deadline_s = mode == "failures" ? -1 : 30;  // failures: hang.toml's 2 s deadline applies
  cs_session* s = nullptr;
  expect(cs_session_open(&o, &s) == CS_OK, "session opened");
  int by_host = 0, level = -1;
  cs_session_mpi_info(s, &by_host, &level);
  expect(by_host == 1 && level == provided, "the session sees the host's MPI (initialised by the host, its level)");
  expect(cs_api_version() == COMMSCRIPT_API_VERSION, std::string("API version matches; commscript ") + cs_version());
  if (mode == "failures") failures(argc > 2 ? argv[2] : ".", s);
  if (mode == "hygiene") hygiene(s, argc > 2 ? std::atoi(argv[2]) : 100);
  if (mode == "backends") backends(argc > 2 ? argv[2] : ".");
  cs_session_close(s);
  // The host carries on with its own MPI work.
  int one = 1, sum = 0, size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect(sum == size, "the host's own MPI_Allreduce after the runs");
  int failed = 0;
  MPI_Allreduce(&g_failed, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (g_rank == 0) std::printf("embed_host %s: %s\n", mode.c_str(), failed ? "FAILED" : "passed");
  return failed;
}
