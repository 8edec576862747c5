// libcommscript's C API (include/commscript/commscript.h): a host program's session, the
// communicator it lends, and runs of recipes through the same run_recipe() the command line
// uses, with Session::embedded set so that a failure ends the run and never the process.
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commscript/commscript.h"
#include "commscript_version.hpp"
#include "error.hpp"
#include "job.hpp"
#include "mpi_communicator.hpp"
#include "recipe_run.hpp"
#include "run_inputs.hpp"
#include "session.hpp"

struct cs_session {
  cs_session_options opts{};
  std::string recipe_path, out_dir;
  MPI_Comm comm = MPI_COMM_NULL;  // our duplicate of the host's communicator (null: the world)
  int initialized_by_host = 1;
  int thread_level = MPI_THREAD_SINGLE;
  unsigned runs = 0;
  std::string error;
};

struct cs_result {
  int exit_code = -1;
  std::string report, out_dir, error;
};

namespace {

thread_local std::string t_open_error;
bool g_we_initialised_mpi = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int fail(cs_session* s, int code, const std::string& msg) {
  if (s) s->error = msg;
  return code;
}

// NAME in the session's search path, then what the command line finds (a file, a bundled name).
std::optional<cs::RecipeSource> locate(const cs_session& s, const std::string& name, std::string* why) {
  namespace fs = std::filesystem;
  if (name.find('/') == std::string::npos && !s.recipe_path.empty()) {
    const std::string file = name.size() > 4 && name.substr(name.size() - 4) == ".lua" ? name : name + ".lua";
    size_t start = 0;
    while (start <= s.recipe_path.size()) {
      const size_t end = std::min(s.recipe_path.find(':', start), s.recipe_path.size());
      const std::string dir = s.recipe_path.substr(start, end - start);
      std::error_code ec;
      if (!dir.empty() && fs::is_regular_file(fs::path(dir) / file, ec))
        return cs::find_recipe((fs::path(dir) / file).string(), why);
      start = end + 1;
    }
  }
  return cs::find_recipe(name, why);
}

std::string run_dir(cs_session& s, const std::string& recipe) {
  std::string base = std::filesystem::path(recipe).filename().string();
  if (base.size() > 4 && base.substr(base.size() - 4) == ".lua") base.resize(base.size() - 4);
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  // Several runs of one process in the same second must not share a directory.
  return (s.out_dir.empty() ? std::string("commscript-runs") : s.out_dir) + "/" + base + "-" + stamp + "-" +
         std::to_string(getpid()) + "-" + std::to_string(++s.runs);
}

}  // namespace

extern "C" {

int cs_api_version(void) { return COMMSCRIPT_API_VERSION; }

const char* cs_version(void) { return COMMSCRIPT_VERSION; }

void cs_session_options_init(cs_session_options* o) {
  if (!o) return;
  *o = cs_session_options{};
  o->struct_size = sizeof(cs_session_options);
  o->deadline_s = -1;
  o->init_mpi = 1;
}

int cs_session_open(const cs_session_options* opts, cs_session** out) {
  t_open_error.clear();
  if (!out) {
    t_open_error = "cs_session_open: out is NULL";
    return CS_E_INVALID;
  }
  *out = nullptr;
  try {
    auto s = std::make_unique<cs_session>();
    cs_session_options_init(&s->opts);
    if (opts) {
      if (opts->struct_size != static_cast<int>(sizeof(cs_session_options))) {
        t_open_error =
            "cs_session_open: opts->struct_size is not sizeof(cs_session_options) "
            "(call cs_session_options_init)";
        return CS_E_INVALID;
      }
      s->opts = *opts;
    }
    if (s->opts.deadline_s != s->opts.deadline_s) {  // NaN
      t_open_error = "cs_session_open: deadline_s is not a number";
      return CS_E_INVALID;
    }
    if (s->opts.recipe_path) s->recipe_path = s->opts.recipe_path;
    if (s->opts.out_dir) s->out_dir = s->opts.out_dir;
    s->opts.recipe_path = s->opts.out_dir = nullptr;  // owned copies above
    int init = 0, finalized = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&finalized);
    if (finalized) {
      t_open_error = "cs_session_open: MPI is already finalized";
      return CS_E_MPI;
    }
    if (!init) {
      if (!s->opts.init_mpi) {
        t_open_error = "cs_session_open: MPI is not initialised (and init_mpi is 0)";
        return CS_E_MPI;
      }
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (!g_we_initialised_mpi) std::atexit(finalize_at_exit);
      g_we_initialised_mpi = true;
    }
    s->initialized_by_host = g_we_initialised_mpi ? 0 : 1;
    MPI_Query_thread(&s->thread_level);
    *out = s.release();
    return CS_OK;
  } catch (const std::exception& e) {
    t_open_error = std::string("cs_session_open: ") + e.what();
    return CS_E_INTERNAL;
  }
}

int cs_session_attach_comm_f(cs_session* s, int64_t fortran_comm) {
  if (!s) return CS_E_INVALID;
  s->error.clear();
  MPI_Comm c = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm));
  if (c == MPI_COMM_NULL) return fail(s, CS_E_MPI, "cs_session_attach_comm: the communicator is MPI_COMM_NULL");
  int inter = 0;
  if (MPI_Comm_test_inter(c, &inter) != MPI_SUCCESS)
    return fail(s, CS_E_MPI, "cs_session_attach_comm: not a valid communicator");
  if (inter) return fail(s, CS_E_MPI, "cs_session_attach_comm: intercommunicators are not supported");
  MPI_Comm dup = MPI_COMM_NULL;  // a collective over the host's communicator
  if (MPI_Comm_dup(c, &dup) != MPI_SUCCESS) return fail(s, CS_E_MPI, "cs_session_attach_comm: MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
  s->comm = dup;
  return CS_OK;
}

const char* cs_last_error(const cs_session* s) { return s ? s->error.c_str() : t_open_error.c_str(); }

int cs_session_mpi_info(const cs_session* s, int* by_host, int* level) {
  if (!s) return CS_E_INVALID;
  if (by_host) *by_host = s->initialized_by_host;
  if (level) *level = s->thread_level;
  return CS_OK;
}

int cs_run(cs_session* s, const char* recipe, const char* const* argv, int argc, const char* const* sets, int nsets,
           const char* config, const char* out_dir, cs_result** result) {
  if (!s) return CS_E_INVALID;
  s->error.clear();
  if (!result) return fail(s, CS_E_INVALID, "cs_run: result is NULL");
  *result = nullptr;
  if (!recipe || !*recipe) return fail(s, CS_E_INVALID, "cs_run: no recipe given");
  if (argc < 0 || nsets < 0) return fail(s, CS_E_INVALID, "cs_run: argc and nsets must not be negative");
  if ((argc > 0 && !argv) || (nsets > 0 && !sets)) return fail(s, CS_E_INVALID, "cs_run: argv or sets is NULL");
  for (int i = 0; i < argc; ++i)
    if (!argv[i]) return fail(s, CS_E_INVALID, "cs_run: argv[" + std::to_string(i) + "] is NULL");
  for (int i = 0; i < nsets; ++i)
    if (!sets[i]) return fail(s, CS_E_INVALID, "cs_run: sets[" + std::to_string(i) + "] is NULL");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return fail(s, CS_E_MPI, "cs_run: MPI is finalized");

  try {
    cs::Session ss;
    ss.embedded = true;
    ss.backend = "mpi";
    ss.trusted = s->opts.trusted != 0;
    ss.argv = {"libcommscript", recipe};
    for (int i = 0; i < argc; ++i) ss.argv.emplace_back(argv[i]);
    cs::RunInfo info;
    try {
      if (config) ss.config = cs::Config::load(config);
      for (int i = 0; i < nsets; ++i) ss.config.set(sets[i]);
      ss.config.apply_env();
      info.chaos = cs::chaos_plan(ss.config, ss.backend, config ? std::string(" (in ") + config + ")" : "");
      const auto rs = cs::run_settings(
          ss.config, s->opts.deadline_s >= 0 ? std::optional<double>(s->opts.deadline_s) : std::nullopt,
          s->opts.seed_given ? std::optional<uint64_t>(s->opts.seed) : std::nullopt, "");
      ss.timeout_s = rs.timeout_s;
      ss.seed = rs.seed;
    } catch (const cs::Error& e) {
      return fail(s, CS_E_INVALID, e.what());
    }
    std::string why;
    auto src = locate(*s, recipe, &why);
    if (!src) return fail(s, CS_E_NOT_FOUND, why);
    std::vector<std::string> rargs;
    for (int i = 0; i < argc; ++i) rargs.emplace_back(argv[i]);
    for (const auto& a : rargs)
      if (a == "--help" || a == "-h") return fail(s, CS_E_INVALID, "cs_run: --help is for the command line");
    info.out = out_dir && *out_dir ? std::string(out_dir) : run_dir(*s, recipe);

    const MPI_Comm host = s->comm != MPI_COMM_NULL ? s->comm : MPI_COMM_WORLD;
    int provided = 0;
    MPI_Query_thread(&provided);
    ss.host_mpi = {{"initialized_by", s->initialized_by_host ? "host" : "commscript"},
                   {"thread_level", provided == MPI_THREAD_MULTIPLE     ? "multiple"
                                    : provided == MPI_THREAD_SERIALIZED ? "serialized"
                                    : provided == MPI_THREAD_FUNNELED   ? "funneled"
                                                                        : "single"},
                   {"communicator", s->comm != MPI_COMM_NULL ? "host" : "MPI_COMM_WORLD"}};
    auto res = std::make_unique<cs_result>();
    cs::job::attach(host);
    try {
      ss.world = cs::MpiCommunicator::of(host);
      ss.rank = ss.world->rank();
      ss.size = ss.world->size();
      res->exit_code = cs::run_recipe(ss, *src, rargs, info);
    } catch (...) {
      ss.world.reset();
      cs::job::detach();
      cs::job::clear_cancel();
      throw;
    }
    ss.world.reset();
    cs::job::detach();
    cs::job::clear_cancel();
    // Refused before anything ran (the recipe does not load, its options are wrong): bad input
    // to the API, not a run.
    if (!ss.report) return fail(s, CS_E_INVALID, ss.last_error.empty() ? "cs_run: bad input" : ss.last_error);
    res->report = ss.report_json;
    res->out_dir = ss.out_dir;
    res->error = ss.last_error;
    if (!ss.last_error.empty()) s->error = ss.last_error;
    *result = res.release();
    return CS_OK;
  } catch (const std::exception& e) {
    return fail(s, CS_E_INTERNAL, std::string("cs_run: ") + e.what());
  }
}

int cs_result_exit_code(const cs_result* r) { return r ? r->exit_code : -1; }
const char* cs_result_report_json(const cs_result* r) { return r ? r->report.c_str() : ""; }
const char* cs_result_out_dir(const cs_result* r) { return r ? r->out_dir.c_str() : ""; }
const char* cs_result_error(const cs_result* r) { return r ? r->error.c_str() : ""; }
void cs_result_free(cs_result* r) { delete r; }

void cs_session_close(cs_session* s) {
  if (!s) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
  delete s;
}

}  // extern "C"
