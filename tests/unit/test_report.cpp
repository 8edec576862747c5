// report.json's one writer (control/report.hpp, write_report_json): the run's Report and rank 0's
// guardian both write through it.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report.hpp"

namespace fs = std::filesystem;

namespace {

// A fresh directory of this process's, removed at the end of the test.
struct ScratchDir {
  explicit ScratchDir(const char* name)
      : path(fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
  fs::path path;
};

}  // namespace

TEST_CASE("write_report_json: indented, renamed into place from its temporary, bytes not UTF-8 replaced") {
  const ScratchDir scratch("cs-report-writer");
  const fs::path& dir = scratch.path;
  const nlohmann::json doc = {{"run", {{"exit_code", 137}}}, {"note", std::string("a\xff")}};
  CHECK(cs::write_report_json(dir, doc, true, "report.json.guardian.tmp").empty());
  std::stringstream text;
  text << std::ifstream(dir / "report.json").rdbuf();
  CHECK(text.str() == "{\n  \"note\": \"a\xef\xbf\xbd\",\n  \"run\": {\n    \"exit_code\": 137\n  }\n}\n");
  CHECK_FALSE(fs::exists(dir / "report.json.guardian.tmp"));
}

TEST_CASE("write_report_json: a directory that cannot be written is said, with the OS's reason, and nothing is left") {
  fs::path dir;
  {
    const ScratchDir gone("cs-report-writer-gone");
    dir = gone.path;
  }  // removed here
  const std::string why = cs::write_report_json(dir, nlohmann::json::object(), false, "report.json.tmp");
  CHECK(why == "cannot write " + (dir / "report.json.tmp").string() + ": No such file or directory");
  CHECK_FALSE(fs::exists(dir));
}
