// A host program for the embedding tests (tests/embed/CMakeLists.txt), linked against
// libcommscript through its C API only. Modes:
//   failures DIR      an embedded recipe error and an embedded hang return 2 and 5; bad input
//                     through the API returns error codes; the host then does its own MPI work
//   hygiene N         N consecutive runs: open fds, threads and RSS before and after (printed)
//   api               versions and the MPI state the session reports
#include <dirent.h>
#include <mpi.h>
#include <unistd.h>
// after mpi.h
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
  return 0;
}

int hygiene(cs_session* s, int n) {
  std::string rep;
  long rss0 = 0;
  int fds0 = 0, thr0 = 0;
  const int warm = 5;
  for (int i = 0; i < n + warm; ++i) {
    if (i == warm) {
      MPI_Barrier(MPI_COMM_WORLD);
      fds0 = count_dir("/proc/self/fd");
      thr0 = count_dir("/proc/self/task");
      rss0 = rss_kb();
    }
    const int code =
        run(s, "bw_sweep", {"--ops", "allreduce", "--min", "8", "--max", "1K", "--iters", "2", "--warmup", "1"},
            nullptr, &rep);
    if (code != 0) {
      expect(false, "run " + std::to_string(i) + " exit code " + std::to_string(code));
      return 1;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const int fds1 = count_dir("/proc/self/fd"), thr1 = count_dir("/proc/self/task");
  const long rss1 = rss_kb();
  std::printf(
      "rank %d: %d runs after %d warm-up: open fds %d -> %d, threads %d -> %d, RSS %ld -> %ld KiB (%+ld KiB, "
      "%+.1f KiB/run)\n",
      g_rank, n, warm, fds0, fds1, thr0, thr1, rss0, rss1, rss1 - rss0, static_cast<double>(rss1 - rss0) / n);
  std::fflush(stdout);
  expect(fds1 == fds0, "no growth in open file descriptors");
  expect(thr1 == thr0, "no growth in threads");
  // Noise: the allocator's arenas and MPI's caches settle in the warm-up; a leak of one report
  // (tens of KiB) per run would show as several MiB over 100 runs.
  expect(rss1 - rss0 < 4096, "RSS growth under 4 MiB over " + std::to_string(n) + " runs");
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
