#pragma once
// The recipe's side of a run as the engine sees it: run.hpp drives the phases of a run and calls
// the recipe only through this interface, which bindings/lua implements (the engine never
// knows that recipes are Lua), as an ops table filled by the scripting side.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error.hpp"
#include "session.hpp"

namespace cs {

struct RecipeSource {
  std::string name;  // as shown in messages: the path, or "recipes/x.lua" when bundled
  std::string text;
  bool bundled = false;
};

// Why a recipe could not be declared, resolved or run.
struct RecipeFailure {
  ExitCode code = ExitCode::runtime;
  std::string message;    // "recipes/x.lua:12: ..."
  std::string traceback;  // "stack traceback: ..." (runtime errors)
};

// report.html from a report's document. Every call renders in a fresh state of its own, never
// the recipe's (a recipe that replaced the renderer would write the shared page): safe from any
// thread, and from a forked child (rank 0's guardian).
class PageRenderer {
 public:
  virtual ~PageRenderer() = default;
  // The page, or "" and *why. "" with *why left empty: this build has no renderer (no error).
  virtual std::string render_html(const nlohmann::json& doc, std::string* why) const = 0;
};

// One recipe, from its declarations to its exit code. Used from the rank's main thread only,
// apart from render_html (above).
class RecipeHost : public PageRenderer {
 public:
  // Loads the recipe's declarations (its table, `requires`). Errors are bad input (exit 1).
  virtual bool declare(const RecipeSource& src, bool trusted, RecipeFailure* f) = 0;
  // After declare: the recipe's declared name and version.
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  // After declare: the recipe's options from the config's [options] and the recipe's arguments.
  // Errors are bad input (exit 1).
  virtual bool resolve_options(const nlohmann::json& configured, const std::vector<std::string>& args,
                               RecipeFailure* f) = 0;
  // After resolve_options: the resolved options, for report.json.
  virtual nlohmann::json options() const = 0;
  // Runs the recipe on s.world: true and *code (its exit code), or false and *f.
  virtual bool run(Session& s, int* code, RecipeFailure* f) = 0;
  // report.json's "commscript" section: this build's versions, the host's runtime included.
  virtual nlohmann::json versions() const = 0;
};

}  // namespace cs
