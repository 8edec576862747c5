/* The header as C (C99, -pedantic), built with the MPI wrapper and the installed pkg-config file
 * (tests/embed/install_test.cmake): a run on a communicator the host split, and MPI_COMM_NULL
 * refused with a code and a message. */
#include <mpi.h>
/* after mpi.h: cs_session_attach_comm(MPI_Comm) */
#include <commscript/commscript.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  int rank = 0, failed = 0, all = 0, rc, code = -1;
  MPI_Comm sub;
  cs_session_options o;
  cs_session* s = NULL;
  cs_result* r = NULL;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &sub);
  if (cs_api_version() / 10000 != COMMSCRIPT_API_VERSION_MAJOR) failed = 1;
  cs_session_options_init(&o);
  o.deadline_s = 60;
  if (cs_session_open(&o, &s) != CS_OK) {
    fprintf(stderr, "c_host: FAILED: cs_session_open: %s\n", cs_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  rc = cs_session_attach_comm(s, MPI_COMM_NULL);
  if (rc != CS_E_MPI || !strstr(cs_last_error(s), "MPI_COMM_NULL")) failed = 1;
  if (cs_session_attach_comm(s, sub) != CS_OK) failed = 1;
  rc = cs_run(s, "env_audit", NULL, 0, NULL, 0, NULL, NULL, &r);
  if (rc == CS_OK) {
    code = cs_result_exit_code(r);
    if (!strstr(cs_result_report_json(r), "\"embedded\"")) failed = 1;
  }
  if (rc != CS_OK || (code != CS_EXIT_OK && code != CS_EXIT_HEALTH)) failed = 1; /* env_audit found something here */
  if (rank == 0) printf("c_host: env_audit rc %d, exit code %d\n", rc, code);
  cs_result_free(r);
  cs_session_close(s);
  MPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Comm_free(&sub);
  MPI_Finalize();
  if (rank == 0) printf("c_host: %s\n", all ? "FAILED" : "passed");
  return all;
}
