// The CLI's Lua-free input phase (control/run_inputs.hpp): [run] validation, the chaos plan,
// replay and baseline loading, and the environment snapshot.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "chaos.hpp"
#include "env_policy.hpp"
#include "error.hpp"
#include "run_inputs.hpp"

namespace {

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const cs::InputError& e) {
    CHECK(e.code() == cs::ExitCode::bad_input);
    return e.what();
  }
  FAIL("no InputError");
  return {};
}

std::string temp_file(const std::string& text) {
  char name[] = "/tmp/cs_run_inputs_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  FILE* f = fdopen(fd, "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return name;
}

}  // namespace

TEST_CASE("[run]: defaults, precedence of the command line, and refusals naming the field") {
  const cs::Config empty = cs::Config::parse("", "t.toml");
  cs::RunSettings r = cs::run_settings(empty, std::nullopt, std::nullopt, "");
  CHECK(r.timeout_s == cs::kDefaultTimeoutS);
  CHECK(r.seed == 0);

  const cs::Config cfg = cs::Config::parse("[run]\ntimeout = 12.5\nseed = 7\n", "t.toml");
  r = cs::run_settings(cfg, std::nullopt, std::nullopt, "");
  CHECK(r.timeout_s == 12.5);
  CHECK(r.seed == 7);
  r = cs::run_settings(cfg, 3.0, uint64_t{9}, "");
  CHECK(r.timeout_s == 3.0);
  CHECK(r.seed == 9);

  CHECK(input_error([] {
          cs::run_settings(cs::Config::parse("[run]\ntimeout = -1\n", "t.toml"), std::nullopt, std::nullopt,
                           " (in t.toml)");
        }) == "run.timeout must not be negative (0 for none), not -1 (in t.toml)");
  // deadlines that overflowed the clock, fired at once, or were NaN
  for (const char* v : {"nan", "inf", "1e10", "1e-300"})
    CHECK(input_error([v] {
            cs::run_settings(cs::Config::parse(std::string("[run]\ntimeout = ") + v + "\n", "t.toml"), std::nullopt,
                             std::nullopt, "");
          }).find("run.timeout") == 0);
  CHECK(input_error([] {
          cs::run_settings(cs::Config::parse("", "t.toml"), 1e300, std::nullopt, "");
        }).find("--timeout 1e+300 s is beyond the longest deadline") == 0);
  CHECK(cs::run_settings(cs::Config::parse("", "t.toml"), 0.0, std::nullopt, "").timeout_s == 0);
  CHECK(input_error([] {
          cs::run_settings(cs::Config::parse("[run]\nseed = \"x\"\n", "t.toml"), std::nullopt, std::nullopt, "");
        }).find("run.seed must be a non-negative integer") == 0);
  CHECK(input_error([] {
          cs::run_settings(cs::Config::parse("[run]\ntimeuot = 3\n", "t.toml"), std::nullopt, std::nullopt, "");
        }) == "unknown setting run.timeuot (known: timeout, seed)");
}

TEST_CASE("chaos plan: parsed rules, a non-array refused, corrupt refused under nccl") {
  const cs::Config cfg =
      cs::Config::parse("[[chaos]]\nkind = \"delay\"\nranks = [1]\nms = 5\n[[chaos]]\nkind = \"corrupt\"\n", "t.toml");
  const auto rules = cs::chaos_plan(cfg, "mpi", "");
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].kind == cs::ChaosKind::delay);
  CHECK(rules[0].ms == 5);
  CHECK(rules[0].ranks == std::set<int>{1});
  CHECK(rules[1].kind == cs::ChaosKind::corrupt);
  CHECK(input_error([&] { cs::chaos_plan(cfg, "nccl", ""); }).find("'corrupt' is not supported with --backend nccl") !=
        std::string::npos);
  // (a non-array chaos is refused when the config is read: Config::check)
  CHECK(input_error([] { cs::Config::parse("chaos = 3\n", "t.toml"); }) ==
        "t.toml: chaos must be an array of tables ([[chaos]] in TOML)");
  const cs::Config unknown = cs::Config::parse("[[chaos]]\nkind = \"explode\"\n", "t.toml");
  CHECK(input_error([&] { cs::chaos_plan(unknown, "mpi", " (in t.toml)"); }).find("(in t.toml)") != std::string::npos);
  // Found by fuzz_config: a kind that is not a string was a JSON type_error (abort), not an InputError.
  const cs::Config numeric = cs::Config::parse("[[chaos]]\nkind = 10.0\n", "t.toml");
  CHECK(input_error([&] { cs::chaos_plan(numeric, "mpi", ""); }).find("needs kind = ") != std::string::npos);
  const cs::Config missing = cs::Config::parse("[[chaos]]\nms = 5\n", "t.toml");
  CHECK(input_error([&] { cs::chaos_plan(missing, "mpi", ""); }).find("needs kind = ") != std::string::npos);
}

TEST_CASE("chaos ranks: a rule naming a rank the job does not have is refused, naming the rank and the size") {
  const cs::Config cfg = cs::Config::parse("[[chaos]]\nkind = \"delay\"\nranks = [1, 5]\n", "t.toml");
  const auto rules = cs::chaos_plan(cfg, "mpi", "");
  REQUIRE(rules.size() == 1);
  cs::check_chaos_ranks(rules[0], 6);  // ranks 0-5: fits
  cs::check_chaos_ranks(rules[0], 0);  // size unknown: nothing to check
  CHECK(input_error([&] { cs::check_chaos_ranks(rules[0], 4); }) ==
        "chaos delay: 'ranks' names rank 5, which this job does not have: it runs 4 ranks (0-3); a triage repro "
        "written for more ranks is written again for this job by `commscript triage ... --ranks 4`");
  CHECK(input_error([&] { cs::check_chaos_ranks(rules[0], 1); })
            .find("names rank 1, which this job does not have: it "
                  "runs 1 rank (rank 0)") != std::string::npos);
  // cs.chaos.inject's path: Chaos::add refuses it once the run's size is known.
  cs::Chaos::instance().install({}, 0, 2);
  CHECK(input_error([&] { cs::Chaos::instance().add(rules[0]); }).find("it runs 2 ranks (0-1)") != std::string::npos);
  cs::Chaos::instance().install({}, 0, 0);
}

TEST_CASE("replay: a report with its source loads; anything else is refused with the reason") {
  const std::string good = temp_file(
      R"({"schema":"commscript.report/1","recipe":{"source":"return 1","file":"x.lua"},)"
      R"("run":{"seed":42,"timeout_s":7,"backend":"self","trusted":true,"config":{"options":{"max":"1K"}}}})");
  const nlohmann::json rep = cs::load_replay(good);
  CHECK(rep["recipe"]["source"] == "return 1");
  const cs::Replayed r = cs::replay_settings(rep, good);
  CHECK(r.seed == uint64_t{42});
  CHECK(r.timeout_s == 7.0);
  CHECK(r.backend == std::string("self"));
  CHECK(r.was_trusted);
  CHECK(r.config.section("options")["max"] == "1K");

  CHECK(input_error([] { cs::load_replay("/nonexistent/report.json"); }).find("cannot open") != std::string::npos);
  const std::string not_json = temp_file("{not json");
  CHECK(input_error([&] { cs::load_replay(not_json); }).find(": not JSON: ") != std::string::npos);
  const std::string other = temp_file(R"({"schema":"something/2","recipe":{"source":"x"}})");
  CHECK(input_error([&] { cs::load_replay(other); }).find("field schema must be") != std::string::npos);
  const std::string no_source = temp_file(R"({"schema":"commscript.report/1","recipe":"x"})");
  CHECK(input_error([&] { cs::load_replay(no_source); }).find("with the recipe's source") != std::string::npos);
  for (const auto& f : {good, not_json, other, no_source}) std::remove(f.c_str());
}

TEST_CASE("baseline: a commscript report's text, or a refusal naming the flag") {
  const std::string good = temp_file(R"({"schema":"commscript.report/1","results":[]})");
  CHECK(cs::load_baseline(good).find("commscript.report/1") != std::string::npos);
  const std::string bad = temp_file("[1,2]");
  CHECK(input_error([&] { cs::load_baseline(bad); }) ==
        "--baseline " + bad + ": not a commscript report (schema commscript.report/1 or /2)");
  // Both schema versions are read: /2 is what this version writes.
  const std::string v2 = temp_file(R"({"schema":"commscript.report/2","results":[]})");
  CHECK(cs::load_baseline(v2).find("commscript.report/2") != std::string::npos);
  const std::string v3 = temp_file(R"({"schema":"commscript.report/3","results":[]})");
  CHECK(input_error([&] { cs::load_baseline(v3); }).find("not a commscript report") != std::string::npos);
  std::remove(v2.c_str());
  std::remove(v3.c_str());
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("JSON depth: kMaxJsonDepth levels pass, one more is refused at its byte, strings do not count") {
  const size_t n = cs::kMaxJsonDepth;
  CHECK_NOTHROW(cs::check_json_depth(std::string(n, '[') + std::string(n, ']'), "x"));
  CHECK_NOTHROW(cs::check_json_depth("[\"" + std::string(2 * n, '{') + "\\\"\"]", "x"));
  CHECK_NOTHROW(cs::check_json_depth(std::string(n * 3, ']') + std::string(n, '['), "x"));
  CHECK(input_error([&] { cs::check_json_depth("{\"a\":" + std::string(n + 5, '['), "--baseline f"); }) ==
        "--baseline f: JSON nested deeper than " + std::to_string(n) + " levels (at byte " + std::to_string(n + 4) +
            "); a commscript report nests a few levels");
}

TEST_CASE("environment snapshot: the communication prefixes, without credentials") {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_IB_SECRET_KEY", "hunter2", 1);
  setenv("COMMSCRIPT_TOKEN", "abc", 1);
  setenv("HOME_OF_NOTHING", "x", 1);
  const nlohmann::json e = cs::env_snapshot();
  CHECK(e["NCCL_DEBUG"] == "INFO");
  CHECK_FALSE(e.contains("NCCL_IB_SECRET_KEY"));
  CHECK_FALSE(e.contains("COMMSCRIPT_TOKEN"));
  CHECK_FALSE(e.contains("HOME_OF_NOTHING"));
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_IB_SECRET_KEY");
  unsetenv("COMMSCRIPT_TOKEN");
  unsetenv("HOME_OF_NOTHING");
}

// One list (env_policy.hpp): the snapshot keeps every family the audit lints and the topology
// records, so a report's "env" has every variable the audit looked at.
TEST_CASE("environment policy: the snapshot and the topology contain the audited families") {
  const auto& audited = cs::env_audited_prefixes();
  REQUIRE_FALSE(audited.empty());
  for (const auto& p : audited) {
    INFO(p);
    CHECK(cs::env_name_in(p + "X", cs::env_snapshot_prefixes()));
    CHECK(cs::env_name_in(p + "X", cs::env_topology_names()));
    setenv((p + "CS_UNIT_TEST").c_str(), "1", 1);
  }
  const nlohmann::json e = cs::env_snapshot();
  for (const auto& p : audited) {
    INFO(p);
    CHECK(e.contains(p + "CS_UNIT_TEST"));
    unsetenv((p + "CS_UNIT_TEST").c_str());
  }
  CHECK(e.contains("TORCH_FR_CS_UNIT_TEST"));
  // exact names and prefixes
  CHECK(cs::env_name_in("CUDA_VISIBLE_DEVICES", cs::env_topology_names()));
  CHECK_FALSE(cs::env_name_in("CUDA_VISIBLE_DEVICES_X", cs::env_topology_names()));
  CHECK_FALSE(cs::env_name_in("NCCLX_DEBUG", cs::env_topology_names()));
}

TEST_CASE("replay: loader-affecting [env] variables are told apart from configuration") {
  for (const char* v : {"COMMSCRIPT_STDLIB", "LD_PRELOAD", "LD_LIBRARY_PATH", "LUA_PATH", "LUA_CPATH", "PATH",
                        "GCONV_PATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_DEBUG_FILE",
                        "OMPI_MCA_plm_rsh_agent", "OMPI_MCA_orte_launch_agent", "UCX_MODULE_DIR", "PYTHONPATH",
                        // the replay environment is an allow-list: the MPI library's variables and
                        // anything unknown are dropped (OMPI_MCA_mpi_abort_delay=-1 hung a replay)
                        "OMPI_MCA_mpi_abort_delay", "OMPI_MCA_btl", "PMIX_MCA_gds", "MPICH_ASYNC_PROGRESS",
                        "I_MPI_DEBUG", "FI_PROVIDER", "NCCL_", "CUDA_HOME", "SOME_UNKNOWN"})
    CHECK(cs::env_var_unsafe_to_replay(v));
  for (const char* v : {"NCCL_DEBUG", "NCCL_IB_HCA", "NCCL_ALGO", "UCX_TLS", "CUDA_VISIBLE_DEVICES",
                        "TORCH_NCCL_ASYNC_ERROR_HANDLING", "GLOO_SOCKET_IFNAME", "CUDA_LAUNCH_BLOCKING"})
    CHECK_FALSE(cs::env_var_unsafe_to_replay(v));
}
