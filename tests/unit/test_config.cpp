// A run's TOML file: parsing, errors with FILE:LINE:COL, --set overrides, [env].
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "config.hpp"
#include "error.hpp"

namespace {

// The InputError message of parsing `text` as `name`; fails the test when nothing is thrown.
std::string parse_error(const std::string& text, const std::string& name = "name.toml") {
  try {
    cs::Config::parse(text, name);
  } catch (const cs::InputError& e) {
    CHECK(e.code() == cs::ExitCode::bad_input);
    return e.what();
  }
  FAIL("no InputError for:\n" << text);
  return {};
}

// "FILE:LINE:COL: ..." -> LINE (0 when the message has another shape).
int error_line(const std::string& msg, const std::string& name = "name.toml") {
  std::smatch m;
  const std::regex re("^" + std::regex_replace(name, std::regex(R"([.^$|()\[\]{}*+?\\/])"), R"(\$&)") +
                      R"(:([0-9]+):([0-9]+): .+)");
  if (!std::regex_search(msg, m, re)) return 0;
  return std::stoi(m[1].str());
}

std::string set_error(cs::Config& c, const std::string& a) {
  try {
    c.set(a);
  } catch (const cs::InputError& e) {
    return e.what();
  }
  FAIL("no InputError for --set " << a);
  return {};
}

std::string temp_path(const char* tag) {
  return "/tmp/commscript_unit_" + std::to_string(::getpid()) + "_" + tag + ".toml";
}

}  // namespace

TEST_CASE("Config::parse: options, env and run sections", "[config]") {
  const std::string text = R"(# a run
[options]
min = "64K"
iters = 20
ops = ["allreduce", "allgather"]
check = true
ratio = 0.5

[env]
NCCL_DEBUG = "INFO"
NCCL_NTHREADS = 512
NCCL_IB_DISABLE = true
NCCL_P2P_DISABLE = false

[run]
timeout = 30
seed = 7
)";
  const cs::Config c = cs::Config::parse(text, "run.toml");
  CHECK(c.path() == "run.toml");
  const auto& d = c.data();
  CHECK(d["options"]["min"] == "64K");
  CHECK(d["options"]["iters"].is_number_integer());
  CHECK(d["options"]["iters"] == 20);
  CHECK(d["options"]["ops"] == nlohmann::json::array({"allreduce", "allgather"}));
  CHECK(d["options"]["check"].is_boolean());
  CHECK(d["options"]["check"] == true);
  CHECK(d["options"]["ratio"] == 0.5);
  CHECK(d["run"]["timeout"].is_number_integer());
  CHECK(d["run"]["timeout"] == 30);
  CHECK(c.section("run")["seed"] == 7);
  CHECK(c.section("thresholds") == nlohmann::json::object());  // absent: {}
  CHECK(c.section("env")["NCCL_NTHREADS"] == 512);
  CHECK(c.section("env")["NCCL_IB_DISABLE"] == true);
}

// Regression: Config::env() once iterated items() of a temporary json (a use-after-free that
// crashed whenever [env] was not empty).
TEST_CASE("Config::env: [env] values as strings", "[config]") {
  const cs::Config c = cs::Config::parse(R"([env]
NCCL_DEBUG = "INFO"
NCCL_NTHREADS = 512
NCCL_IB_DISABLE = true
NCCL_P2P_DISABLE = false
)",
                                         "env.toml");
  auto env = c.env();
  std::sort(env.begin(), env.end());
  using P = std::pair<std::string, std::string>;
  CHECK(env ==
        std::vector<P>{
            {"NCCL_DEBUG", "INFO"}, {"NCCL_IB_DISABLE", "1"}, {"NCCL_NTHREADS", "512"}, {"NCCL_P2P_DISABLE", "0"}});
  CHECK(cs::Config::parse("[options]\na = 1\n", "none.toml").env().empty());
}

TEST_CASE("Config::parse: the other known sections are accepted", "[config]") {
  const cs::Config c = cs::Config::parse(R"(
[thresholds]
busbw_min = 100.0
[scorecard]
weight = 2
[baseline]
file = "b.json"
[[chaos]]
kind = "delay"
[[chaos]]
kind = "hang"
[rules]
files = ["site.lua"]
[recipe]
name = "r"
)",
                                         "k.toml");
  CHECK(c.data()["chaos"].is_array());
  CHECK(c.data()["chaos"].size() == 2);
  CHECK(c.data()["chaos"][1]["kind"] == "hang");
  CHECK(c.env().empty());
}

TEST_CASE("Config::parse: malformed TOML names FILE:LINE:COL", "[config]") {
  SECTION("a bad value on line 3") {
    const std::string msg = parse_error("[options]\na = 1\nb = = 2\nc = 3\n");
    INFO(msg);
    CHECK(error_line(msg) == 3);
  }
  SECTION("an unterminated string on line 5") {
    const std::string msg = parse_error("[options]\n\n\n# comment\nname = \"abc\nx = 1\n");
    INFO(msg);
    CHECK(error_line(msg) == 5);
  }
  SECTION("a duplicate key on line 4") {
    const std::string msg = parse_error("[run]\ntimeout = 1\nseed = 2\ntimeout = 3\n");
    INFO(msg);
    CHECK(error_line(msg) == 4);
  }
  SECTION("a broken table header on line 1") {
    const std::string msg = parse_error("[options\na = 1\n");
    INFO(msg);
    CHECK(error_line(msg) == 1);
  }
  SECTION("the source name is the one given") {
    const std::string msg = parse_error("\n\nx = \n", "other/dir/my run.toml");
    INFO(msg);
    CHECK(error_line(msg, "other/dir/my run.toml") == 3);
  }
}

TEST_CASE("Config::parse: an unknown section is rejected by name", "[config]") {
  const std::string msg = parse_error("[options]\na = 1\n\n[optoins]\nb = 2\n");
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("optoins"));
  CHECK(error_line(msg) == 4);

  const std::string top = parse_error("timeout = 5\n");  // a key outside any section
  INFO(top);
  CHECK_THAT(top, Catch::Contains("timeout"));
  CHECK(error_line(top) == 1);
}

TEST_CASE("Config::parse: [env] values must be scalars", "[config]") {
  SECTION("an inline table") {
    const std::string msg = parse_error("[env]\nA = \"1\"\nNCCL_X = { a = 1 }\n");
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains("NCCL_X"));
    CHECK(error_line(msg) == 3);
  }
  SECTION("a sub-table") {
    const std::string msg = parse_error("[env]\nA = 1\n[env.SUB]\nb = 2\n");
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains("SUB"));
    CHECK(error_line(msg) > 0);
  }
  SECTION("an array") {
    const std::string msg = parse_error("[env]\nNCCL_LIST = [1, 2]\n");
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains("NCCL_LIST"));
    CHECK(error_line(msg) == 2);
  }
  SECTION("env itself not a table") {
    const std::string msg = parse_error("env = 5\n");
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains("env"));
    CHECK(error_line(msg) == 1);
  }
}

TEST_CASE("Config::set: --set key=value", "[config]") {
  cs::Config c = cs::Config::parse("[env]\nNCCL_DEBUG = \"WARN\"\n[options]\niters = 20\n", "s.toml");

  c.set("min=64K");  // no section: options; not a TOML value: a string
  CHECK(c.data()["options"]["min"].is_string());
  CHECK(c.data()["options"]["min"] == "64K");

  c.set("env.NCCL_DEBUG=INFO");  // overrides the file; INFO is not a TOML value: a string
  CHECK(c.data()["env"]["NCCL_DEBUG"].is_string());
  CHECK(c.data()["env"]["NCCL_DEBUG"] == "INFO");

  c.set("run.timeout=5");  // a TOML integer
  CHECK(c.data()["run"]["timeout"].is_number_integer());
  CHECK(c.data()["run"]["timeout"] == 5);

  c.set("iters=40");
  CHECK(c.data()["options"]["iters"] == 40);
  c.set("options.ratio=1.5");
  CHECK(c.data()["options"]["ratio"] == 1.5);
  c.set("options.check=false");
  CHECK(c.data()["options"]["check"] == false);
  c.set("options.ops=[\"allreduce\", \"broadcast\"]");
  CHECK(c.data()["options"]["ops"] == nlohmann::json::array({"allreduce", "broadcast"}));
  c.set("options.name=\"a b\"");
  CHECK(c.data()["options"]["name"] == "a b");
  c.set("options.path=/tmp/x=y");  // only the first '=' separates
  CHECK(c.data()["options"]["path"] == "/tmp/x=y");
  c.set("thresholds.allreduce.busbw=100");  // nested tables are created
  CHECK(c.data()["thresholds"]["allreduce"]["busbw"] == 100);
  c.set("env.NCCL_NTHREADS=256");
  CHECK(c.data()["env"]["NCCL_NTHREADS"] == 256);
  CHECK(c.data()["options"]["iters"] == 40);  // untouched by later sets
}

// Fails with the Config::env bug above (engine/config.cpp:126).
TEST_CASE("Config::set: env overrides reach env()", "[config]") {
  cs::Config c = cs::Config::parse("[env]\nNCCL_DEBUG = \"WARN\"\n", "s.toml");
  c.set("env.NCCL_DEBUG=INFO");
  c.set("env.NCCL_NTHREADS=256");
  auto env = c.env();
  std::sort(env.begin(), env.end());
  using P = std::pair<std::string, std::string>;
  CHECK(env == std::vector<P>{{"NCCL_DEBUG", "INFO"}, {"NCCL_NTHREADS", "256"}});
}

TEST_CASE("Config::set: malformed assignments throw InputError", "[config]") {
  cs::Config c = cs::Config::parse("", "empty.toml");
  CHECK_THAT(set_error(c, "x"), Catch::Contains("'x'"));
  CHECK_THAT(set_error(c, "bogus.k=1"), Catch::Contains("bogus"));
  set_error(c, "=1");
  set_error(c, "options..a=1");
  set_error(c, "options.=1");
  CHECK(c.data().find("bogus") == c.data().end());
}

// Fails with the Config::env bug above (engine/config.cpp:126): apply_env() calls env().
TEST_CASE("Config::apply_env sets and overrides the process environment", "[config]") {
  ::setenv("CS_UNIT_TEST_OVERRIDDEN", "old", 1);
  ::unsetenv("CS_UNIT_TEST_NEW");
  const cs::Config c = cs::Config::parse("[env]\nCS_UNIT_TEST_OVERRIDDEN = \"new\"\nCS_UNIT_TEST_NEW = 3\n", "e.toml");
  c.apply_env();
  REQUIRE(std::getenv("CS_UNIT_TEST_OVERRIDDEN") != nullptr);
  CHECK(std::string(std::getenv("CS_UNIT_TEST_OVERRIDDEN")) == "new");
  REQUIRE(std::getenv("CS_UNIT_TEST_NEW") != nullptr);
  CHECK(std::string(std::getenv("CS_UNIT_TEST_NEW")) == "3");
  ::unsetenv("CS_UNIT_TEST_OVERRIDDEN");
  ::unsetenv("CS_UNIT_TEST_NEW");
}

TEST_CASE("Config::load: files", "[config]") {
  SECTION("a missing file") {
    const std::string path = temp_path("missing");
    std::remove(path.c_str());
    try {
      cs::Config::load(path);
      FAIL("no exception");
    } catch (const cs::InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains(path));
    }
  }
  SECTION("a good file") {
    const std::string path = temp_path("good");
    {
      std::ofstream out(path);
      out << "[options]\nmax = \"1M\"\n[run]\ntimeout = 9\n";
    }
    const cs::Config c = cs::Config::load(path);
    std::remove(path.c_str());
    CHECK(c.path() == path);
    CHECK(c.data()["options"]["max"] == "1M");
    CHECK(c.data()["run"]["timeout"] == 9);
  }
  SECTION("a bad file: errors name the path") {
    const std::string path = temp_path("bad");
    {
      std::ofstream out(path);
      out << "[options]\nmax = \"1M\"\nmin = \n";
    }
    std::string msg;
    try {
      cs::Config::load(path);
    } catch (const cs::InputError& e) {
      msg = e.what();
    }
    std::remove(path.c_str());
    INFO(msg);
    CHECK(error_line(msg, path) == 3);
  }
}

// Issue 13: the sections commscript reads are type-checked when the config is read, naming the
// field, so a bad value is refused before anything is measured.
TEST_CASE("Config::check: types of [rules], [thresholds], [scorecard], [env] and every section", "[config]") {
  auto refused = [](const std::string& text) {
    try {
      cs::Config::parse(text, "c.toml");
    } catch (const cs::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  CHECK(refused("rules = 5\n") == "c.toml: [rules] must be a table, not 5");
  CHECK(refused("[rules]\nfiles = 5\n") == "c.toml: rules.files must be a file name or a list of them, not 5");
  CHECK(refused("[rules]\nfiles = [1]\n") == "c.toml: rules.files must be a file name or a list of them, not [1]");
  CHECK(refused("[rules]\nfile = \"a\"\n") == "c.toml: unknown setting rules.file (known: files)");
  CHECK(refused("[thresholds]\nbusbw_min_gbps = \"x\"\n") ==
        "c.toml: thresholds.busbw_min_gbps must be a finite number, not \"x\"");
  CHECK(refused("[thresholds]\nbusbw_min_gbps = nan\n").find("must be a finite number") != std::string::npos);
  CHECK(refused("[thresholds]\nbusbw_min_gbps = 0\n") == "c.toml: thresholds.busbw_min_gbps must be > 0, not 0");
  CHECK(refused("[thresholds.allreduce.busbw_by_size]\n\"1M\" = 3.5\n") == "(accepted)");
  CHECK(refused("[scorecard]\nbandwidth_reference_gbps = 0\n") ==
        "c.toml: scorecard.bandwidth_reference_gbps must be > 0, not 0");
  CHECK(refused("[scorecard]\nbandwidth_reference_gbps = inf\n").find("must be a finite number") != std::string::npos);
  CHECK(refused("[scorecard.weights]\nbandwidth = -1\n") ==
        "c.toml: scorecard.weights.bandwidth must not be negative, not -1");
  CHECK(refused("chaos = 3\n") == "c.toml: chaos must be an array of tables ([[chaos]] in TOML)");
  CHECK(refused("options = 3\n") == "c.toml: [options] must be a table, not 3");
  cs::Config c = cs::Config::parse("", "c.toml");
  c.set("thresholds.latency_max_us=\"x\"");
  CHECK_THROWS_AS(c.check(), cs::InputError);
}

TEST_CASE("Config::drop_env removes the named [env] entries and says which", "[config]") {
  cs::Config c = cs::Config::parse("[env]\nLD_PRELOAD = \"x\"\nNCCL_DEBUG = \"INFO\"\n", "c.toml");
  const auto dropped = c.drop_env([](const std::string& k) { return k.rfind("LD_", 0) == 0; });
  CHECK(dropped == std::vector<std::string>{"LD_PRELOAD"});
  CHECK(c.env() == std::vector<std::pair<std::string, std::string>>{{"NCCL_DEBUG", "INFO"}});
}
