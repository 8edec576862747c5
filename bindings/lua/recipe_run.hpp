#pragma once
// The Lua side of a run: a RecipeHost (engine/control/run_host.hpp) over a Lua state and the
// stdlib's cs.runner, which the engine's phases of a run (engine/control/run.hpp) drive. Also
// what needs no ranks: finding a recipe, --list, --help and --check. The command line
// (bindings/cli) and the C API (bindings/embed) are the callers.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "run.hpp"
#include "run_host.hpp"
#include "session.hpp"

namespace cs {

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

// report.html in a fresh, sandboxed Lua state (cs.html): nothing of a recipe's state, nor
// --trusted. What rank 0's guardian renders with (guardian::start); lives as long as the process.
const PageRenderer& sandboxed_pages();

// A fresh Lua host for one run's recipe over `s` (engine/control/plan.hpp's RecipeLibrary).
std::unique_ptr<RecipeHost> make_recipe_host(Session* s);

// Runs the recipe on every rank of s.world (collective): run::run_recipe with the Lua host.
// Returns the agreed exit code; a recipe error on any rank ends the job through job::abort with
// that rank's message.
int run_recipe(Session& s, const RecipeSource& src, const std::vector<std::string>& rargs, const RunInfo& info);

}  // namespace cs
