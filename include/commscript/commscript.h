/* libcommscript: run commscript recipes inside another program, on a communicator that program
 * already has (docs/embedding.md).
 *
 * A C API (any language can bind it): opaque handles, int return codes (CS_OK or a negative
 * CS_E_* code) and a message for the last failure; no exception crosses it, and it never ends the
 * host's process (no exit(), no MPI_Abort) unless the host asks for that. A recipe's own outcome is
 * not an API failure: cs_run() succeeds and cs_result_exit_code() says what the command line's
 * exit code would have been: one of the CS_EXIT_* codes below (CS_EXIT_OK, CS_EXIT_BAD_INPUT ...).
 *
 * Runs are collective: every rank of the attached communicator calls cs_run() with the same
 * arguments. Only the thread that called MPI_Init calls MPI from inside commscript; the threads a
 * run starts (coordinator, heartbeat, watchdog) use TCP, not MPI, and end with the run.
 */
#ifndef COMMSCRIPT_COMMSCRIPT_H
#define COMMSCRIPT_COMMSCRIPT_H

#include <stdint.h>

/* The exit codes of a run, CS_EXIT_OK = 0 ... CS_EXIT_INTERNAL = 70: generated at build time from
 * the engine's list (engine/core/error.hpp) and installed beside this header. */
#include "commscript_exit_codes.h"

#define COMMSCRIPT_API_VERSION_MAJOR 2
#define COMMSCRIPT_API_VERSION_MINOR 2
#define COMMSCRIPT_API_VERSION_PATCH 0
#define COMMSCRIPT_API_VERSION \
  (COMMSCRIPT_API_VERSION_MAJOR * 10000 + COMMSCRIPT_API_VERSION_MINOR * 100 + COMMSCRIPT_API_VERSION_PATCH)

#if defined(__GNUC__)
#define CS_API __attribute__((visibility("default")))
#else
#define CS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of the API calls (a recipe's exit code is separate: cs_result_exit_code). */
enum {
  CS_OK = 0,
  CS_E_INVALID = -1,   /* a null pointer, a bad argument or option (the message says which) */
  CS_E_NOT_FOUND = -2, /* no such recipe (file, search path, or bundled) */
  CS_E_MPI = -3,       /* MPI refused (MPI_COMM_NULL, an intercommunicator, MPI finalized ...) */
  CS_E_STATE = -4,     /* the call does not fit the session's state (no communicator attached ...) */
  CS_E_BACKEND = -5,   /* (1.1) the backend's communicator could not be set up (Gloo, NCCL: the message says why) */
  CS_E_HANDLE = -6,    /* (2.1) a handle that is not live: closed or freed already, or not one this library gave */
  CS_E_INTERNAL = -70  /* a failure inside commscript; the message says what */
};

typedef struct cs_session cs_session; /* one host-side session: options + communicator */
typedef struct cs_result cs_result;   /* one finished run: exit code, report, output directory */
/* Handles (2.1) are entries of the library's tables, never dereferenced by the host: a handle
 * closed or freed twice, used after that, or given as another kind (a plan as a session) is found
 * dead and the call returns CS_E_HANDLE (pointer results: "", -1); a NULL handle is CS_E_INVALID.
 * Nothing is freed twice and the host is never ended. Closing a handle while another thread is
 * inside a call on it remains an error of the host's. */

/* The API this library implements (compare with COMMSCRIPT_API_VERSION from the header you
 * compiled against: the same major is compatible) and commscript's own version ("0.1.0"). */
CS_API int cs_api_version(void);
CS_API const char* cs_version(void);

typedef struct cs_session_options {
  int struct_size;         /* sizeof(cs_session_options): set by cs_session_options_init */
  const char* recipe_path; /* ':'-separated directories searched for NAME.lua before the bundled
                              recipes; NULL: bundled recipes and file paths only */
  const char* out_dir;     /* parent of each run's output directory; NULL: commscript-runs/ */
  int trusted;             /* 1 lifts the recipe sandbox (like --trusted); 0 by default */
  double deadline_s;       /* each operation's deadline in s (like --timeout); < 0: the default (300) */
  uint64_t seed;           /* seed of everything random */
  int seed_given;          /* 1 when seed above is to be used */
  int init_mpi;            /* 1 (default): if MPI is not initialised, initialise it (FUNNELED) and finalize at exit */
  /* ---- API 1.1 (a 1.0 caller's smaller struct_size is accepted: these then keep their defaults) ---- */
  const char* backend;  /* "mpi" (NULL: the default; a --replay'd report's backend when it names one), "gloo",
                           "nccl" or "self": what moves the data (docs/embedding.md "Backends") */
  const char* launcher; /* cs_session_attach_world only: how the ranks were started, "auto" (NULL: the default),
                           "mpi", "env" (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or "slurm" */
  int verify;           /* 1 (default): call verification; 0 like --no-verify */
  int own_process;      /* 0 (default). 1: the host hands its process to commscript, as the commscript command
                           does: messages go to stderr as the command line prints them, a recipe error or a hang
                           ends every rank (MPI_Abort with the exit code), SIGTERM/SIGINT/SIGHUP are handled by a
                           thread that saves the report and ends the process with 128+signal, and MPI is
                           initialised by cs_session_attach_world and finalized by cs_session_close. */
} cs_session_options;

/* Fills *opts with the defaults. */
CS_API void cs_session_options_init(cs_session_options* opts);

/* Opens a session (opts may be NULL: the defaults). No collective; does not touch MPI unless MPI
 * is not initialised and opts->init_mpi is set. *out is NULL on failure. */
CS_API int cs_session_open(const cs_session_options* opts, cs_session** out);

/* Attaches the host's communicator, given by its Fortran handle (MPI_Comm_c2f(comm); mpi4py:
 * comm.py2f()). The session uses duplicates of it, never the host's own traffic. Without a call,
 * the session runs on MPI_COMM_WORLD. MPI_COMM_NULL and intercommunicators are refused (CS_E_MPI), and so,
 * with Open MPI, is a handle that is no live communicator's (a freed one); with other MPIs such a
 * handle is that MPI's error.
 * (1.1) Each run builds the session's backend over it: mpi uses the duplicate itself, gloo connects
 * its ranks over TCP after telling them rank 0's store address over it, nccl sends its unique id
 * over it (and keeps it as its control plane). */
CS_API int cs_session_attach_comm_f(cs_session* s, int64_t fortran_comm);

/* The message of the last failed call on this session ("" when none); valid until the next
 * call on it. cs_last_error(NULL) gives the last failure of cs_session_open on this thread; a
 * closed session's handle gives a message saying so. */
CS_API const char* cs_last_error(const cs_session* s);

/* What the host's MPI is: initialised by the host (1) or by commscript (0), and the thread level
 * MPI provides (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE). Any pointer may be NULL. */
CS_API int cs_session_mpi_info(const cs_session* s, int* initialized_by_host, int* thread_level);

/* Runs a recipe on every rank of the attached communicator (a collective).
 *   recipe:  a bundled name ("bw_sweep"), NAME searched in recipe_path, or a file path
 *   argv:    the recipe's options as on the command line ({"--max", "1M"}), argc entries
 *   sets:    config overrides "key=value" (like --set; no section means options.KEY), nsets entries
 *   config:  a TOML config file (like --config), or NULL
 *   out_dir: this run's output directory, or NULL for a new one under the session's out_dir
 * On CS_OK, *result holds the run (free it with cs_result_free); the recipe's outcome is its exit
 * code. A run that a recipe error or a hang ended returns here too, on every rank, with its code
 * (2, 5) and its report. Input refused before anything ran (a recipe that does not load, an
 * unknown or invalid recipe option, a bad config value) is CS_E_INVALID; an unknown recipe is
 * CS_E_NOT_FOUND; cs_last_error() says why. */
CS_API int cs_run(cs_session* s, const char* recipe, const char* const* argv, int argc, const char* const* sets,
                  int nsets, const char* config, const char* out_dir, cs_result** result);

/* ---- API 1.1: a run in steps (what the commscript command does), the launcher's world ---- */

/* The exit code the command line would end with for the last failed call on this session
 * (CS_EXIT_BAD_INPUT, CS_EXIT_RUNTIME, CS_EXIT_HANG_OR_DESYNC, CS_EXIT_INTERNAL ...); 0 when the last call succeeded.
 * cs_last_exit_code(NULL) is that of the last failure of cs_session_open on this thread; -1 for a
 * closed session's handle. */
CS_API int cs_last_exit_code(const cs_session* s);

typedef struct cs_run_options {
  int struct_size;         /* sizeof(cs_run_options): set by cs_run_options_init */
  const char* recipe;      /* as cs_run's recipe; NULL when replay is given */
  const char* const* argv; /* the recipe's options, argc entries */
  int argc;
  const char* const* sets; /* "key=value" overrides (like --set), nsets entries */
  int nsets;
  const char* config;              /* a TOML config file (like --config), or NULL */
  const char* out_dir;             /* as cs_run's out_dir */
  const char* replay;              /* an earlier report.json to run again (like --replay): recipe source, options,
                                      config, seed and timeout come from it; recipe must be NULL */
  const char* baseline;            /* an earlier report.json to compare against (like --baseline), or NULL */
  double fail_below;               /* exit 3 when the scorecard's total is below this (like --fail-below); < 0 none */
  const char* const* command_line; /* recorded as the run's command line in report.json; NULL: "libcommscript"
                                      RECIPE ARGS. command_line_n entries */
  int command_line_n;
  /* 2.1: */
  const char* metrics_file;   /* rank 0 writes the run's metrics here (like --metrics; Prometheus text, renamed
                                 into place), per recipe interval and at the end; NULL: none */
  const char* metrics_listen; /* "ADDRESS:PORT": rank 0 serves GET /metrics there while the run lasts (like
                                 --metrics-listen); NULL: none */
} cs_run_options;

typedef struct cs_plan cs_plan; /* one run's inputs, read and checked, not yet run */

/* Fills *opts with the defaults (fail_below -1, everything else empty). */
CS_API void cs_run_options_init(cs_run_options* opts);

/* Reads and checks everything a run needs, before anything communicates (no collective): the
 * config, its [env] (applied to this process with setenv), the --set values, the chaos plan, the
 * replayed report or the recipe. Errors as cs_run's, with cs_last_exit_code. *out is NULL on failure. */
CS_API int cs_plan_open(cs_session* s, const cs_run_options* opts, cs_plan** out);

/* 1 when the recipe's options ask for its help (--help, -h): answer it with cs_plan_check. */
CS_API int cs_plan_wants_help(const cs_plan* p);

/* Answers without ranks (no communication): the recipe's help when it was asked for, else loads the
 * recipe and validates its options (like --check). *exit_code is 0 when it loads and its options are
 * valid. With print set, the help or "ok: ..." goes to stdout and a problem to stderr. */
CS_API int cs_plan_check(cs_session* s, cs_plan* p, int print, int* exit_code);

/* Runs the plan (a collective, like cs_run) on the attached communicator or world; a plan runs once. */
CS_API int cs_plan_run(cs_session* s, cs_plan* p, cs_result** result);

/* CS_OK; CS_E_HANDLE for a plan freed already, CS_E_INVALID for NULL (2.1: returned void). */
CS_API int cs_plan_free(cs_plan* p);

/* Joins the world the launcher started (instead of attaching a communicator): reads the launch
 * environment (the session's launcher), initialises MPI when the backend needs it (own_process;
 * otherwise MPI is the host's, from cs_session_open), and sets up the backend's world: mpi
 * (MPI_COMM_WORLD), gloo (its store's address told over MPI, or at MASTER_ADDR:MASTER_PORT with the
 * env and slurm launchers, where no MPI is needed), nccl (the unique id over MPI), self. A collective
 * over the launcher's ranks. plan: the run it is for; its backend (a replayed report's when the
 * session names none) and its timeout (the setup's deadline) are used. plan may be NULL: the
 * session's backend and deadline_s. argc/argv may be NULL.
 * (2.0: the plan argument is new; 1.1 read the last plan opened on the session.) */
CS_API int cs_session_attach_world(cs_session* s, const cs_plan* plan, int* argc, char*** argv);

CS_API int cs_result_exit_code(const cs_result* r);           /* the contract's exit code; -1 if r is NULL or freed */
CS_API const char* cs_result_report_json(const cs_result* r); /* report.json (embedded: every rank gets rank 0's;
                                                                 own_process: rank 0 only) */
CS_API const char* cs_result_out_dir(const cs_result* r);     /* the directory the run wrote */
CS_API const char* cs_result_error(const cs_result* r);       /* the message of the failure, "" when none */
CS_API int cs_result_free(cs_result* r);                      /* as cs_plan_free (2.1: returned void) */

/* Closes the session: frees its duplicate communicators and its world; MPI stays as it is
 * (own_process: MPI is finalized when cs_session_attach_world initialised it). CS_OK; a session
 * closed already is CS_E_HANDLE and NULL CS_E_INVALID, nothing done (2.1: returned void). */
CS_API int cs_session_close(cs_session* s);

/* ---- API 2.2: what the build knows, as the commscript command asks it (its one table each) ---- */

/* The i-th backend commscript knows, built or not ("self", "mpi", "gloo", "nccl"); NULL past the
 * last. Whether one is built: cs_session_open refuses one that is not, saying why. */
CS_API const char* cs_backend_name(int i);

/* The i-th launcher cs_session_options.launcher takes ("auto", "mpi", "env", "slurm"); NULL past
 * the last. */
CS_API const char* cs_launcher_name(int i);

/* The lines of `commscript --version`: commscript, LuaJIT, each backend's library (or why it is
 * not built). Valid for the life of the process. */
CS_API const char* cs_version_text(void);

/* Prints the bundled recipes (name, version, summary) to stdout, as `commscript --list`; 0. */
CS_API int cs_list_recipes(void);

/* The rank the launcher gave this process (mpirun, srun, torchrun's RANK ...), read from its
 * environment before anything starts; -1 when none did. */
CS_API int cs_launcher_rank(void);

/* The i-th of commscript's own command-line options: its name ("--config"), whether it takes a
 * value, and its --help text (NULL for one registered with another: --no-check, --help). CS_OK;
 * CS_E_NOT_FOUND past the last. Any pointer may be NULL. */
CS_API int cs_cli_option(int i, const char** name, int* takes_value, const char** help);

/* The option of commscript's own closest to `given` (its text before any '='), for "did you mean
 * --timeout?"; NULL when none is close. */
CS_API const char* cs_cli_option_nearest(const char* given);

#ifdef __cplusplus
}
#endif

/* With <mpi.h> included first: attach an MPI_Comm directly. */
#if defined(MPI_VERSION)
static inline int cs_session_attach_comm(cs_session* s, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return cs_session_attach_comm_f(s, (int64_t)MPI_Comm_c2f(MPI_COMM_NULL));
  return cs_session_attach_comm_f(s, (int64_t)MPI_Comm_c2f(comm));
}
#endif

#endif /* COMMSCRIPT_COMMSCRIPT_H */
