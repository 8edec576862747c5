#pragma once
// A recipe from its source to its exit code, on a world communicator somebody else started:
// declare (the recipe table, `requires`), resolve its options, open the report, run it on every
// rank with the control plane watching, and finish the report. The command line (bindings/cli)
// is one caller.
#include <optional>
#include <string>
#include <vector>

#include "chaos.hpp"
#include "session.hpp"

namespace cs {

struct RecipeSource {
  std::string name;  // as shown in messages: the path, or "recipes/x.lua" when bundled
  std::string text;
  bool bundled = false;
};

// A file path, or a bundled recipe by name ("bw_sweep") or by its source-tree path
// ("recipes/bw_sweep.lua"). Fills *why when there is none.
std::optional<RecipeSource> find_recipe(const std::string& arg, std::string* why);

// The bundled recipe at `path` ("recipes/x.lua"), if any.
std::optional<RecipeSource> bundled_recipe(const std::string& path);

// --list: the bundled recipes with versions and summaries.
int list_recipes();

// --help after the recipe (prints its options) or --check (loads it and validates its options).
// Needs no ranks. Returns the exit code; messages go to stderr when `print` is set.
int answer_without_ranks(Session& s, const RecipeSource& src, const std::vector<std::string>& rargs, bool help,
                         bool print);

// report.html from a report.json on disk, in a fresh, sandboxed Lua state (cs.html): what rank 0's
// guardian runs (in a child it bounds in time) after writing a partial report. False and *why
// when the file does not parse or the page does not render.
bool render_html_file(const std::string& json_path, const std::string& html_path, std::string* why);

// What a run adds to report.json's "run" section beyond the session.
struct RunInfo {
  std::string replay_of;  // the replayed report's path, or ""
  std::string out;        // --out, or "" for the default directory
  std::vector<ChaosRule> chaos;
};

// Runs the recipe on every rank of s.world (collective). Returns the agreed exit code; a recipe
// error on any rank ends the job through job::abort with that rank's message.
int run_recipe(Session& s, const RecipeSource& src, const std::vector<std::string>& rargs, const RunInfo& info);

}  // namespace cs
