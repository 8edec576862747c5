// An MPI application that checks its own communication before its real work: it splits off a
// sub-communicator (here: every rank but the last when there are more than 2), runs commscript's
// bw_sweep and env_audit on it, reads the verdict from the report and carries on either way.
//
//   mpirun -np 4 health_check [--max 1M]
#include <mpi.h>
// after mpi.h: commscript.h then offers cs_session_attach_comm(MPI_Comm)
#include <commscript/commscript.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

// One recipe on `comm`; returns its exit code (or -1 when the API refused) and prints the verdict.
int check(cs_session* s, const char* recipe, const std::vector<const char*>& args, int rank) {
  cs_result* r = nullptr;
  const int rc = cs_run(s, recipe, args.data(), static_cast<int>(args.size()), nullptr, 0, nullptr, nullptr, &r);
  if (rc != CS_OK) {
    if (rank == 0) std::fprintf(stderr, "health_check: %s refused: %s\n", recipe, cs_last_error(s));
    return -1;
  }
  const int code = cs_result_exit_code(r);
  const auto rep = nlohmann::json::parse(cs_result_report_json(r));
  if (rank == 0) {
    std::printf("health_check: %s %s: exit code %d, %zu finding(s)", recipe,
                rep["recipe"].value("version", "?").c_str(), code, rep["findings"].size());
    if (rep.contains("scorecard") && rep["scorecard"].is_object() && rep["scorecard"].contains("total"))
      std::printf(", score %s", rep["scorecard"]["total"].dump().c_str());
    std::printf(" (report in %s)\n", cs_result_out_dir(r));
    for (const auto& f : rep["findings"])
      if (f.value("severity", "") == "error") std::printf("  error: %s\n", f.value("message", "").c_str());
    // The busiest result of a bandwidth sweep: the largest message's bus bandwidth.
    double best = 0;
    for (const auto& x : rep["results"])
      if (x.contains("busbw") && x["busbw"].is_number()) best = std::max(best, x["busbw"].get<double>());
    if (best > 0) std::printf("  best busbw %.3f GB/s\n", best);
  }
  cs_result_free(r);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* max = argc > 2 && std::string(argv[1]) == "--max" ? argv[2] : "256K";

  // The application's own sub-communicator: the last rank sits out when there are more than 2.
  const int color = size > 2 && rank == size - 1 ? 1 : 0;
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &sub);

  int verdict = 0;
  if (color == 0) {
    cs_session_options o;
    cs_session_options_init(&o);
    o.deadline_s = 60;
    cs_session* s = nullptr;
    if (cs_session_open(&o, &s) != CS_OK || cs_session_attach_comm(s, sub) != CS_OK) {
      std::fprintf(stderr, "health_check: %s\n", s ? cs_last_error(s) : cs_last_error(nullptr));
      MPI_Abort(MPI_COMM_WORLD, 1);  // the host's own decision
    }
    int sub_rank = 0;
    MPI_Comm_rank(sub, &sub_rank);
    const int bw = check(s, "bw_sweep", {"--ops", "allreduce", "--min", "1K", "--max", max, "--iters", "5"}, sub_rank);
    const int env = check(s, "env_audit", {}, sub_rank);
    verdict = bw == 0 && env == 0 ? 0 : 1;
    cs_session_close(s);
  }

  // The application's own work goes on, on the world, whatever the verdict was.
  int sum = 0, one = 1, unhealthy = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&verdict, &unhealthy, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("health_check: application work done on %d ranks (health check %s)\n", sum,
                unhealthy ? "reported problems" : "passed");
  MPI_Comm_free(&sub);
  MPI_Finalize();
  return sum == size ? 0 : 1;
}
