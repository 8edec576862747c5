/* Handles that survive a host's mistakes (issue 30, class 6): closing or freeing twice, using a
 * handle after that, a handle of another kind, a made-up one and NULL each return an error code;
 * the host goes on. Before the handle table, the second cs_session_close aborted the host
 * ("double free"). C99, one rank: mpirun -np 1 handles SRCDIR (SRCDIR: tests/embed, for
 * barriers.lua). Prints "handles: passed", or each failed check and "handles: FAILED".
 * "handles SRCDIR fuzz SEED N": N random calls on handles live, closed and made up, each checked
 * against a model of which are live (scripts/attack_pass.py runs it). */
#include <mpi.h>
/* after mpi.h */
#include <commscript/commscript.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "handles: FAILED: %s\n", what);
    failed = 1;
  }
}

static cs_session* open_session(void) {
  cs_session_options o;
  cs_session* s = NULL;
  cs_session_options_init(&o);
  o.deadline_s = 30;
  o.out_dir = "handles-runs";
  if (cs_session_open(&o, &s) != CS_OK) fprintf(stderr, "handles: cs_session_open: %s\n", cs_last_error(NULL));
  return s;
}

/* A session closed twice, and used after close: CS_E_HANDLE from every call, nothing freed twice. */
static void sessions(void) {
  cs_result* r = NULL;
  int by_host = -7, level = -7;
  cs_session* s = open_session();
  expect(s != NULL, "a session opens");
  expect(cs_session_close(s) == CS_OK, "the first close is CS_OK");
  expect(cs_session_close(s) == CS_E_HANDLE, "a second close is CS_E_HANDLE (was: double free, the host aborted)");
  expect(cs_run(s, "env_audit", NULL, 0, NULL, 0, NULL, NULL, &r) == CS_E_HANDLE && r == NULL,
         "cs_run on a closed session is CS_E_HANDLE");
  expect(cs_session_attach_comm_f(s, (int64_t)MPI_Comm_c2f(MPI_COMM_WORLD)) == CS_E_HANDLE,
         "attach on a closed session is CS_E_HANDLE");
  expect(cs_session_attach_world(s, NULL, NULL, NULL) == CS_E_HANDLE, "attach_world on a closed session");
  expect(cs_session_mpi_info(s, &by_host, &level) == CS_E_HANDLE && by_host == -7,
         "mpi_info on a closed session is CS_E_HANDLE and writes nothing");
  expect(strstr(cs_last_error(s), "not a live session") != NULL, "cs_last_error of a closed session says so");
  expect(cs_last_exit_code(s) == -1, "cs_last_exit_code of a closed session is -1");
}

/* A slot used again: the old handle stays dead, the new one works. */
static void reuse(void) {
  cs_session* a = open_session();
  cs_session* b;
  cs_session_close(a);
  b = open_session();
  expect(b != NULL && b != a, "a new session gets a new handle");
  expect(cs_session_close(a) == CS_E_HANDLE, "the old handle stays dead after its slot is reused");
  expect(cs_session_mpi_info(b, NULL, NULL) == CS_OK, "the new session is untouched");
  expect(cs_session_close(b) == CS_OK, "and closes");
}

/* Plans and results freed twice or used after that; a plan given as a session. */
static void plans_and_results(const char* recipe) {
  cs_session* s = open_session();
  cs_run_options ro;
  cs_plan* p = NULL;
  cs_result* r = NULL;
  int code = -7;
  cs_run_options_init(&ro);
  ro.recipe = recipe;
  expect(cs_plan_open(s, &ro, &p) == CS_OK && p != NULL, "a plan opens");
  expect(cs_session_close((cs_session*)p) == CS_E_HANDLE, "a plan's handle is no session's");
  expect(cs_plan_wants_help(p) == 0, "the plan is still live");
  expect(cs_plan_free(p) == CS_OK, "the first plan free is CS_OK");
  expect(cs_plan_free(p) == CS_E_HANDLE, "a second plan free is CS_E_HANDLE");
  expect(cs_plan_check(s, p, 0, &code) == CS_E_HANDLE && code == -7, "check of a freed plan");
  expect(cs_plan_run(s, p, &r) == CS_E_HANDLE && r == NULL, "run of a freed plan");
  expect(cs_session_attach_world(s, p, NULL, NULL) == CS_E_HANDLE, "attach_world with a freed plan");
  expect(cs_run(s, recipe, NULL, 0, NULL, 0, NULL, NULL, &r) == CS_OK && r != NULL, "a run returns a result");
  expect(cs_result_exit_code(r) == 0, "the run's exit code is 0");
  expect(cs_result_free(r) == CS_OK, "the first result free is CS_OK");
  expect(cs_result_free(r) == CS_E_HANDLE, "a second result free is CS_E_HANDLE");
  expect(cs_result_exit_code(r) == -1 && strcmp(cs_result_report_json(r), "") == 0 &&
             strcmp(cs_result_out_dir(r), "") == 0 && strcmp(cs_result_error(r), "") == 0,
         "a freed result reads as -1 and empty strings");
  expect(cs_session_close(s) == CS_OK, "the session closes");
}

/* NULL and made-up handles. */
static void null_and_made_up(void) {
  cs_result* r = NULL;
  static char not_ours[64];
  cs_session* fake = (cs_session*)(void*)not_ours;
  expect(cs_session_close(NULL) == CS_E_INVALID, "close(NULL) is CS_E_INVALID");
  expect(cs_plan_free(NULL) == CS_E_INVALID && cs_result_free(NULL) == CS_E_INVALID, "free(NULL) is CS_E_INVALID");
  expect(cs_run(NULL, "env_audit", NULL, 0, NULL, 0, NULL, NULL, &r) == CS_E_INVALID, "cs_run(NULL) is CS_E_INVALID");
  expect(cs_session_close(fake) == CS_E_HANDLE, "a pointer that is no handle is CS_E_HANDLE");
  expect(cs_session_close((cs_session*)(uintptr_t)0x1234) == CS_E_HANDLE, "a made-up number is CS_E_HANDLE");
}

/* ---- the fuzz mode: random calls checked against a model of the live handles ---- */
enum { kMax = 64 };
static cs_session* ses[kMax];
static int ses_live[kMax], nses = 0;
static cs_plan* pl[kMax];
static int pl_live[kMax], npl = 0;
static cs_result* rs[kMax];
static int rs_live[kMax], nrs = 0;
static uint64_t rng = 1;

static unsigned draw(unsigned n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng % n);
}

static void fuzz_open_plan(const char* recipe) {
  unsigned i = draw((unsigned)nses);
  cs_run_options ro;
  cs_plan* p = NULL;
  int rc;
  cs_run_options_init(&ro);
  ro.recipe = recipe;
  rc = cs_plan_open(ses[i], &ro, &p);
  expect(rc == (ses_live[i] ? CS_OK : CS_E_HANDLE), "fuzz: cs_plan_open's code");
  if (rc == CS_OK && npl < kMax) pl[npl] = p, pl_live[npl++] = 1;
  else if (rc == CS_OK) cs_plan_free(p);
}

static void fuzz_run(const char* recipe) {
  unsigned i = draw((unsigned)nses);
  cs_result* r = NULL;
  int rc = cs_run(ses[i], recipe, NULL, 0, NULL, 0, NULL, NULL, &r);
  expect(rc == (ses_live[i] ? CS_OK : CS_E_HANDLE), "fuzz: cs_run's code");
  if (rc == CS_OK && nrs < kMax) rs[nrs] = r, rs_live[nrs++] = 1;
  else if (rc == CS_OK) cs_result_free(r);
}

static void fuzz_use(void) {
  unsigned i = draw((unsigned)nses), j = npl ? draw((unsigned)npl) : 0, k = nrs ? draw((unsigned)nrs) : 0;
  int code = -7;
  switch (draw(6)) {
    case 0:
      expect(cs_session_mpi_info(ses[i], NULL, NULL) == (ses_live[i] ? CS_OK : CS_E_HANDLE), "fuzz: mpi_info");
      break;
    case 1:
      if (npl && ses_live[i])
        expect(cs_plan_check(ses[i], pl[j], 0, &code) == (pl_live[j] ? CS_OK : CS_E_HANDLE), "fuzz: plan_check");
      break;
    case 2:
      if (nrs) expect(cs_result_exit_code(rs[k]) == (rs_live[k] ? 0 : -1), "fuzz: result_exit_code");
      break;
    case 3:
      if (npl) expect(cs_session_close((cs_session*)pl[j]) == CS_E_HANDLE, "fuzz: a plan closed as a session");
      break;
    case 4:
      expect(cs_session_close((cs_session*)(uintptr_t)(rng | 1)) == CS_E_HANDLE, "fuzz: a made-up handle");
      break;
    default:
      if (nrs) expect(cs_plan_free((cs_plan*)rs[k]) == CS_E_HANDLE, "fuzz: a result freed as a plan");
  }
}

static void fuzz_free(void) {
  unsigned i = draw((unsigned)nses), j = npl ? draw((unsigned)npl) : 0, k = nrs ? draw((unsigned)nrs) : 0;
  switch (draw(3)) {
    case 0:
      expect(cs_session_close(ses[i]) == (ses_live[i] ? CS_OK : CS_E_HANDLE), "fuzz: cs_session_close's code");
      ses_live[i] = 0;
      break;
    case 1:
      if (npl) expect(cs_plan_free(pl[j]) == (pl_live[j] ? CS_OK : CS_E_HANDLE), "fuzz: cs_plan_free's code");
      if (npl) pl_live[j] = 0;
      break;
    default:
      if (nrs) expect(cs_result_free(rs[k]) == (rs_live[k] ? CS_OK : CS_E_HANDLE), "fuzz: cs_result_free's code");
      if (nrs) rs_live[k] = 0;
  }
}

static void fuzz(const char* recipe, unsigned long seed, int n) {
  int step, i;
  rng = seed * 2654435761u + 1;
  for (step = 0; step < n; ++step) {
    unsigned what = draw(20);
    if (nses == 0 || (what == 0 && nses < kMax)) {
      cs_session* s = open_session();
      if (s) ses[nses] = s, ses_live[nses++] = 1;
    } else if (what < 4) {
      fuzz_open_plan(recipe);
    } else if (what == 4) {
      fuzz_run(recipe);
    } else if (what < 8) {
      fuzz_free();
    } else {
      fuzz_use();
    }
  }
  for (i = 0; i < nrs; ++i) cs_result_free(rs[i]);
  for (i = 0; i < npl; ++i) cs_plan_free(pl[i]);
  for (i = 0; i < nses; ++i) cs_session_close(ses[i]);
}

int main(int argc, char** argv) {
  char recipe[4096];
  MPI_Init(&argc, &argv);
  snprintf(recipe, sizeof recipe, "%s/barriers.lua", argc > 1 ? argv[1] : ".");
  if (argc > 4 && strcmp(argv[2], "fuzz") == 0) {
    fuzz(recipe, strtoul(argv[3], NULL, 10), atoi(argv[4]));
    MPI_Finalize();
    printf("handles fuzz: %s\n", failed ? "FAILED" : "passed");
    return failed;
  }
  sessions();
  reuse();
  plans_and_results(recipe);
  null_and_made_up();
  MPI_Finalize();
  printf("handles: %s\n", failed ? "FAILED" : "passed");
  return failed;
}
