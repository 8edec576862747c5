// The guardian's writing side (control/guardian.hpp) and the memory share (core/memory_share.hpp):
// what a dead rank 0's guardian makes of the header, results.jsonl (a line cut by the kill
// included) and the flight recorders, report.html rendered in a bounded child, and the memory a
// rank may use under a cgroup limit.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "guardian.hpp"
#include "memory_share.hpp"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

nlohmann::json ring() {
  return nlohmann::json::array({{{"seq", 41},
                                 {"op", "allreduce"},
                                 {"bytes", 32},
                                 {"comm", "world"},
                                 {"started_ms_ago", 5.0},
                                 {"state", "completed"}},
                                {{"seq", 42},
                                 {"op", "allreduce"},
                                 {"bytes", 32},
                                 {"comm", "world"},
                                 {"started_ms_ago", 1500.0},
                                 {"state", "in flight"}}});
}

}  // namespace

TEST_CASE("a dead rank 0's guardian writes report.json from the header and results.jsonl") {
  const fs::path dir = temp_dir("cs-guardian");
  write_text(dir / "results.jsonl", "{\"kind\":\"tick\",\"i\":1}\n{\"kind\":\"tick\",\"i\":2}\n{\"kind\":\"ti");
  write_text(dir / "flight" / "rank-1.json", nlohmann::json{{"rank", 1}, {"host", "h1"}, {"ops", ring()}}.dump());
  cs::guardian::Death d;
  d.out_dir = dir.string();
  d.rank = 0;
  d.size = 2;
  d.host = "h0";
  d.pid = 4242;
  d.signal = 9;
  d.header = {{"schema", "commscript.report/2"},
              {"recipe", {{"name", "spin"}}},
              {"run", {{"ranks", 2}}},
              {"results", nlohmann::json::array()},
              {"incidents", nlohmann::json::array()}};
  d.ops = ring();
  d.site = "spin.lua:6";
  const nlohmann::json inc = cs::guardian::write_after_death(d, 0.5);
  const nlohmann::json rep = read_json(dir / "report.json");
  CHECK(rep["recipe"]["name"] == "spin");
  REQUIRE(rep["results"].size() == 2);  // the line the kill cut is not a result
  CHECK(rep["results"][1]["i"] == 2);
  CHECK(rep["run"]["partial"] == true);
  CHECK(rep["run"]["exit_code"] == 137);
  REQUIRE(rep["incidents"].size() == 1);
  CHECK(rep["incidents"][0]["kind"] == "rank_died");
  CHECK(rep["incidents"][0]["in_flight"]["seq"] == 42);
  CHECK(rep["incidents"][0]["last_completed"]["seq"] == 41);
  CHECK(rep["incidents"][0]["ranks"].size() == 2);
  CHECK(inc["message"] ==
        "rank 0 (host h0, pid 4242) was killed by SIGKILL in allreduce #42 on world (in flight for 1.5 s); last "
        "completed: allreduce #41 on world; its latest verified call was at spin.lua:6");
  const nlohmann::json fr = read_json(dir / "flight" / "rank-0.json");
  CHECK(fr["state"] == "died");
  CHECK(fr["ended"]["by"] == "SIGKILL");
  cs::guardian::Death back;
  REQUIRE(cs::guardian::death_from_flight_file(fr, &back));
  CHECK(back.signal == 9);
  CHECK(back.site == "spin.lua:6");

  SECTION("a report that rank 0 finished is left as it is") {
    write_text(dir / "report.json", R"({"run": {"exit_code": 5}, "incidents": []})");
    cs::guardian::write_after_death(d, 0);
    CHECK(read_json(dir / "report.json")["incidents"].empty());
  }
  fs::remove_all(dir);
}

// Renderers for render_html_bounded: one that works, one that hangs, one that crashes, one that
// refuses.
bool render_ok(const std::string& json, const std::string& html, std::string*) {
  std::ifstream in(json);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::ofstream(html) << "<p>" << doc["incidents"][0]["kind"].get<std::string>() << "</p>";
  return true;
}
bool render_hangs(const std::string&, const std::string& html, std::string*) {
  std::ofstream(html) << "<p>half a page";
  for (;;) pause();
}
bool render_crashes(const std::string&, const std::string& html, std::string*) {
  std::ofstream(html) << "<p>half a page";
  std::abort();
}
bool render_refuses(const std::string&, const std::string&, std::string* why) {
  *why = "report.json: field run is not an object";
  return false;
}

TEST_CASE("report.html after a guardian's report: rendered in a child bounded in time, never half a page") {
  const fs::path dir = temp_dir("cs-guardian-html");
  write_text(dir / "report.json", R"({"incidents":[{"kind":"rank_died"}]})");
  std::string why;
  REQUIRE(cs::guardian::render_html_bounded(render_ok, dir.string(), 5, &why));
  std::ifstream in(dir / "report.html");
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(page == "<p>rank_died</p>");
  fs::remove(dir / "report.html");

  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(cs::guardian::render_html_bounded(render_hangs, dir.string(), 0.5, &why));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s >= 0.5);
  CHECK(s < 3.0);
  CHECK(why == "rendering took longer than 0.5 s");
  CHECK_FALSE(fs::exists(dir / "report.html"));

  CHECK_FALSE(cs::guardian::render_html_bounded(render_crashes, dir.string(), 5, &why));
  CHECK(why == "the renderer was ended by SIGABRT");
  CHECK_FALSE(fs::exists(dir / "report.html"));

  CHECK_FALSE(cs::guardian::render_html_bounded(render_refuses, dir.string(), 5, &why));
  CHECK(why == "report.json: field run is not an object");
  CHECK_FALSE(fs::exists(dir / "report.html"));
  CHECK_FALSE(fs::exists(dir / "report.html.guardian.tmp"));
  fs::remove_all(dir);
}

TEST_CASE("the memory share is the cgroup's limit less its usage, divided among the local ranks") {
  // This process's cgroup path, recreated under a fake root with a 100 MiB limit and 30 MiB used.
  std::ifstream in("/proc/self/cgroup");
  std::string line, path = "/";
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  const fs::path root = temp_dir("cs-cgroup");
  const fs::path cg = root / fs::path(path).relative_path();
  write_text(cg / "memory.max", "104857600\n");
  write_text(cg / "memory.current", "31457280\n");
  if (!fs::path(path).relative_path().empty()) write_text(root / "memory.max", "max\n");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  const cs::MemoryShare m = cs::memory_share(root.string());
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  CHECK(m.cgroup_left == 73400320u);
  CHECK(m.available == 73400320u);  // far below MemAvailable
  CHECK(m.local_ranks == 2);
  CHECK(m.per_rank == 36700160u);
  CHECK(m.source == "the cgroup's memory limit");
  fs::remove_all(root);
}
