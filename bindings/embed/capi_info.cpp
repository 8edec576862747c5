// The C API's questions to the build (API 2.2; include/commscript/commscript.h): the backends and
// launchers it knows, its versions, the bundled recipes, the launcher's rank, and commscript's
// own command-line options. What the commscript command needs to parse its command line through
// the public header alone; each answer is the one table of its fact.
#include <algorithm>
#include <cstddef>
#include <string>

#include "backends.hpp"
#include "cli_options.hpp"
#include "commscript/commscript.h"
#include "edit_distance.hpp"
#include "job.hpp"
#include "launch_env.hpp"
#include "recipe_run.hpp"
#include "versions.hpp"

namespace {

template <class Names>
const char* nth(const Names& names, int i) {
  return i >= 0 && static_cast<size_t>(i) < names.size() ? names[static_cast<size_t>(i)].c_str() : nullptr;
}

}  // namespace

extern "C" {

const char* cs_backend_name(int i) { return nth(cs::backend_names(), i); }

const char* cs_launcher_name(int i) { return nth(cs::launcher_names(), i); }

const char* cs_version_text(void) {
  static const std::string text = cs::version_text();
  return text.c_str();
}

int cs_list_recipes(void) { return cs::list_recipes(); }

int cs_launcher_rank(void) { return cs::job::launcher_rank(); }

int cs_cli_option(int i, const char** name, int* takes_value, const char** help) {
  constexpr int n = static_cast<int>(sizeof cs::kCliOptions / sizeof cs::kCliOptions[0]);
  if (i < 0 || i >= n) return CS_E_NOT_FOUND;
  const cs::CliOption& o = cs::kCliOptions[i];
  if (name) *name = o.name;
  if (takes_value) *takes_value = o.value ? 1 : 0;
  if (help) *help = o.help;
  return CS_OK;
}

const char* cs_cli_option_nearest(const char* given) {
  if (!given) return nullptr;
  const std::string g = given;
  const std::string name = g.substr(0, g.find('='));
  if (name.size() > 64) return nullptr;
  const char* best = nullptr;
  size_t best_d = 0;
  for (const auto& o : cs::kCliOptions) {
    const size_t d = cs::edit_distance(name, o.name);
    if (d <= std::max<size_t>(1, name.size() / 3) && (!best || d < best_d)) best = o.name, best_d = d;
  }
  return best;
}

}  // extern "C"
