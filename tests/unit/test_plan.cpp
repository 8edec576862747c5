// The run's plan (control/plan.hpp): each input resolved once, in the engine. The deadline's and
// the backend's precedence, the launcher's names, the recipe found through the library (triage's
// positional words read as --paths), and the output directory. No communication: open_plan only.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "backends.hpp"
#include "error.hpp"
#include "launch_env.hpp"
#include "plan.hpp"
#include "run_inputs.hpp"

namespace {

// A library of one recipe, "r" (and the bundled triage's name), that never runs anything.
class OneRecipe final : public cs::RecipeLibrary {
 public:
  std::optional<cs::RecipeSource> find(const std::string& name, std::string* why) const override {
    if (name == "r" || name == "triage") return cs::RecipeSource{name, "return {}", false};
    *why = name + ": recipe file not found";
    return std::nullopt;
  }
  std::optional<cs::RecipeSource> bundled(const std::string&) const override { return std::nullopt; }
  std::unique_ptr<cs::RecipeHost> host(cs::Session*) const override { return nullptr; }
  const cs::PageRenderer& pages() const override { throw std::logic_error("no pages here"); }
};

cs::PlanRequest recipe(const std::string& name, std::vector<std::string> args = {}) {
  cs::PlanRequest r;
  r.recipe = name;
  r.args = std::move(args);
  return r;
}

}  // namespace

TEST_CASE("plan: the deadline is --timeout, else [run], else the one default", "[plan]") {
  const OneRecipe lib;
  cs::PlanDefaults d;
  CHECK(cs::open_plan(d, recipe("r"), lib)->session.timeout_s == cs::kDefaultTimeoutS);
  cs::PlanRequest r = recipe("r");
  r.sets = {"run.timeout=7"};
  CHECK(cs::open_plan(d, r, lib)->session.timeout_s == 7);
  d.deadline_s = 3;
  CHECK(cs::open_plan(d, r, lib)->session.timeout_s == 3);
  // The same function with nothing but the session's (a world joined without a plan).
  CHECK(cs::resolve_deadline(cs::Config(), std::nullopt, std::nullopt, "") == cs::kDefaultTimeoutS);
  CHECK(cs::resolve_deadline(cs::Config(), std::nullopt, 9.0, "") == 9);
  CHECK(cs::resolve_deadline(cs::Config(), 2.0, 9.0, "") == 2);
  d.deadline_s = 1e12;
  try {
    (void)cs::open_plan(d, r, lib);
    FAIL("a deadline beyond 7 days was taken");
  } catch (const cs::PlanError& e) {
    CHECK(e.kind == cs::PlanFailure::invalid);
    CHECK(std::string(e.what()).find("--timeout") != std::string::npos);
  }
}

TEST_CASE("plan: the backend is the one given, else a replayed report's, else mpi", "[plan]") {
  CHECK(cs::resolve_backend(std::nullopt, std::nullopt, "") == "mpi");
  CHECK(cs::resolve_backend(std::string("self"), std::string("mpi"), "r.json") == "self");
  CHECK(cs::resolve_backend(std::nullopt, std::string("self"), "r.json") == "self");
  CHECK_THROWS_WITH(cs::resolve_backend(std::string("tcp"), std::nullopt, ""),
                    Catch::Contains("backend 'tcp' is none of self, mpi, gloo, nccl"));
  CHECK_THROWS_WITH(cs::resolve_backend(std::nullopt, std::string("tcp"), "r.json"),
                    Catch::StartsWith("replay r.json: backend 'tcp'"));
  const OneRecipe lib;
  cs::PlanDefaults d;
  d.backend = "self";
  CHECK(cs::open_plan(d, recipe("r"), lib)->session.backend == "self");
}

TEST_CASE("plan: launcher names, one list", "[plan]") {
  std::string why;
  for (const auto& n : cs::launcher_names()) CHECK(cs::launcher_known(n, &why));
  CHECK_FALSE(cs::launcher_known("pbs", &why));
  CHECK(why == "launcher 'pbs' is none of auto, mpi, env, slurm");
  CHECK_THROWS_WITH(cs::read_launch_env("pbs"), "--launcher pbs: expected auto, mpi, env or slurm");
}

TEST_CASE("plan: the recipe through the library; triage's positional paths as --paths", "[plan]") {
  const OneRecipe lib;
  const cs::PlanDefaults d;
  auto p = cs::open_plan(d, recipe("triage", {"a.log", "--rank", "1", "dumps"}), lib);
  CHECK(p->rargs == std::vector<std::string>{"--rank", "1", "--paths=a.log,dumps"});
  CHECK(p->session.argv == std::vector<std::string>{"libcommscript", "triage", "a.log", "--rank", "1", "dumps"});
  CHECK(cs::open_plan(d, recipe("r", {"--help"}), lib)->help);
  try {
    (void)cs::open_plan(d, recipe("nope"), lib);
    FAIL("an unknown recipe was found");
  } catch (const cs::PlanError& e) {
    CHECK(e.kind == cs::PlanFailure::not_found);
    CHECK(e.print == cs::PlanPrint::launcher_root);
  }
}

TEST_CASE("plan: the output directory", "[plan]") {
  cs::PlanDefaults d;
  CHECK(cs::plan_out_dir(d, "mine", "r") == "mine");
  const std::string a = cs::plan_out_dir(d, "", "dir/r.lua"), b = cs::plan_out_dir(d, "", "dir/r.lua");
  CHECK(a.rfind("commscript-runs/r-", 0) == 0);
  CHECK(a != b);  // two runs of one process in one second
  d.own_process = true;
  CHECK(cs::plan_out_dir(d, "", "r").empty());  // the command line's: named after the declared recipe
  d.out_dir = "runs";
  CHECK(cs::plan_out_dir(d, "", "r").rfind("runs/r-", 0) == 0);
}
