// marshal.hpp: cs_run_options and cs_session_options into the plan's inputs.
#include "marshal.hpp"

#include "backends.hpp"

namespace cs::embed {

std::string refusal(const cs_run_options& ro, bool replay) {
  if (!replay && (!ro.recipe || !*ro.recipe)) return "cs_run: no recipe given";
  if (replay && ro.recipe && *ro.recipe)
    return std::string("--replay takes the recipe and its options from the report; remove '") + ro.recipe + "'";
  if (ro.argc < 0 || ro.nsets < 0 || ro.command_line_n < 0)
    return "cs_run: argc, nsets and command_line_n must not be negative";
  if ((ro.argc > 0 && !ro.argv) || (ro.nsets > 0 && !ro.sets) || (ro.command_line_n > 0 && !ro.command_line))
    return "cs_run: argv, sets or command_line is NULL";
  for (int i = 0; i < ro.argc; ++i)
    if (!ro.argv[i]) return "cs_run: argv[" + std::to_string(i) + "] is NULL";
  for (int i = 0; i < ro.nsets; ++i)
    if (!ro.sets[i]) return "cs_run: sets[" + std::to_string(i) + "] is NULL";
  for (int i = 0; i < ro.command_line_n; ++i)
    if (!ro.command_line[i]) return "cs_run: command_line[" + std::to_string(i) + "] is NULL";
  if (ro.fail_below != ro.fail_below || ro.fail_below > 100)
    return "cs_run: fail_below must be a number from 0 to 100 (or < 0: none)";
  return "";
}

namespace {

std::string text(const char* c) { return c ? std::string(c) : std::string(); }

}  // namespace

PlanRequest request(const cs_run_options& ro) {
  PlanRequest r;
  r.recipe = text(ro.recipe);
  r.replay = text(ro.replay);
  r.config = text(ro.config);
  r.has_config = ro.config != nullptr;
  r.baseline = text(ro.baseline);
  r.out_dir = text(ro.out_dir);
  r.metrics_file = text(ro.metrics_file);
  r.metrics_listen = text(ro.metrics_listen);
  if (ro.argc > 0) r.args.assign(ro.argv, ro.argv + ro.argc);
  if (ro.nsets > 0) r.sets.assign(ro.sets, ro.sets + ro.nsets);
  if (ro.command_line) r.command_line.emplace(ro.command_line, ro.command_line + ro.command_line_n);
  r.fail_below = ro.fail_below;
  return r;
}

void read_defaults(cs_session_options& o, PlanDefaults& d) {
  d.recipe_path = text(o.recipe_path);
  d.out_dir = text(o.out_dir);
  d.launcher = o.launcher ? o.launcher : "auto";
  d.backend_given = o.backend != nullptr;
  d.trusted = o.trusted != 0;
  d.verify = o.verify != 0;
  d.own_process = o.own_process != 0;
  if (o.deadline_s >= 0) d.deadline_s = o.deadline_s;
  if (o.seed_given) d.seed = o.seed;
  const std::optional<std::string> backend = o.backend ? std::optional<std::string>(o.backend) : std::nullopt;
  o.recipe_path = o.out_dir = o.backend = o.launcher = nullptr;
  d.backend = resolve_backend(backend, std::nullopt, "");
}

}  // namespace cs::embed
