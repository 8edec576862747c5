// The phases of a run (control/run.hpp) driven through a RecipeHost that is not Lua: what the
// engine asks of the recipe's side, and what it writes from the answers (report.json, report.html,
// the agreed exit code), on a one-rank SelfCommunicator. And incidents render report.html through
// the PageRenderer the run attached (no renderer registered by the bindings).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "incidents.hpp"
#include "run.hpp"
#include "self_communicator.hpp"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A recipe host that records what the engine asked, and answers from its fields.
class FakeHost final : public cs::RecipeHost {
 public:
  bool declare_ok = true;
  int exit_code = 3;
  std::string page_why;  // render_html refuses with this when set
  std::vector<std::string> calls;
  std::vector<std::string> args;

  bool declare(const cs::RecipeSource& src, bool, cs::RecipeFailure* f) override {
    calls.push_back("declare " + src.name);
    if (!declare_ok) *f = {cs::ExitCode::bad_input, src.name + ":1: no recipe here", ""};
    return declare_ok;
  }
  std::string name() const override { return "fake"; }
  std::string version() const override { return "1.2.3"; }
  bool resolve_options(const nlohmann::json&, const std::vector<std::string>& a, cs::RecipeFailure*) override {
    calls.push_back("resolve_options");
    args = a;
    return true;
  }
  nlohmann::json options() const override { return {{"n", static_cast<int>(args.size())}}; }
  bool run(cs::Session& s, int* code, cs::RecipeFailure*) override {
    calls.push_back("run on " + std::to_string(s.world->size()) + " rank(s)");
    *code = exit_code;
    return true;
  }
  std::string render_html(const nlohmann::json& doc, std::string* why) const override {
    if (!page_why.empty()) {
      *why = page_why;
      return "";
    }
    const nlohmann::json& inc = doc.contains("incidents") ? doc["incidents"] : nlohmann::json::array();
    return "<p>" + doc["recipe"].value("name", "?") + " " + std::to_string(inc.size()) + "</p>";
  }
  nlohmann::json versions() const override { return {{"version", "test"}}; }
};

cs::Session self_session() {
  cs::Session s;
  s.world = std::make_shared<cs::SelfCommunicator>();
  s.backend = "self";
  return s;
}

}  // namespace

TEST_CASE("run_recipe: the phases through a RecipeHost, report.json and report.html from its answers") {
  const fs::path dir = temp_dir("cs-run-phases");
  cs::Session s = self_session();
  FakeHost host;
  cs::RunInfo info;
  info.out = dir.string();
  const int code = cs::run::run_recipe(s, host, {"fake.lua", "-- source", false}, {"--a", "--b"}, info);
  CHECK(code == 3);
  CHECK(host.calls == std::vector<std::string>{"declare fake.lua", "resolve_options", "run on 1 rank(s)"});
  std::ifstream in(dir / "report.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  CHECK(doc["commscript"]["version"] == "test");
  CHECK(doc["recipe"]["name"] == "fake");
  CHECK(doc["recipe"]["version"] == "1.2.3");
  CHECK(doc["recipe"]["options"]["n"] == 2);
  CHECK(doc["recipe"]["source"] == "-- source");
  CHECK(doc["run"]["exit_code"] == 3);
  CHECK(doc["run"]["backend"] == "self");
  CHECK(read_text(dir / "report.html") == "<p>fake 0</p>");
  fs::remove_all(dir);
}

TEST_CASE("run_recipe: a recipe that does not declare is bad input, and no report is opened") {
  const fs::path dir = temp_dir("cs-run-undeclared");
  cs::Session s = self_session();
  FakeHost host;
  host.declare_ok = false;
  cs::RunInfo info;
  info.out = dir.string();
  CHECK(cs::run::run_recipe(s, host, {"bad.lua", "", false}, {}, info) == 1);
  CHECK(host.calls == std::vector<std::string>{"declare bad.lua"});
  CHECK(s.last_error == "bad.lua:1: no recipe here");
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("run_recipe: a page that does not render is a warning, never a failed run") {
  const fs::path dir = temp_dir("cs-run-nopage");
  cs::Session s = self_session();
  FakeHost host;
  host.exit_code = 0;
  host.page_why = "render: field run is not an object";
  cs::RunInfo info;
  info.out = dir.string();
  CHECK(cs::run::run_recipe(s, host, {"fake.lua", "", false}, {}, info) == 0);
  CHECK(fs::exists(dir / "report.json"));
  CHECK_FALSE(fs::exists(dir / "report.html"));
  fs::remove_all(dir);
}

TEST_CASE("incidents: a saved incident renders report.html through the run's PageRenderer") {
  const fs::path dir = temp_dir("cs-run-incident");
  cs::Session s = self_session();
  s.report = std::make_unique<cs::Report>(dir.string(), true);
  s.report->doc()["recipe"] = {{"name", "fake"}};
  FakeHost pages;
  cs::incidents::attach(&s, &pages);
  cs::incidents::save({{"kind", "error"}, {"rank", 0}, {"exit_code", 2}, {"message", "boom"}}, 2);
  cs::incidents::detach();
  CHECK(read_text(dir / "report.html") == "<p>fake 1</p>");
  std::ifstream in(dir / "report.json");
  CHECK(nlohmann::json::parse(in)["run"]["exit_code"] == 2);
  fs::remove_all(dir);
}
