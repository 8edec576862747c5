#pragma once
// The C API's option structs as the engine's plan reads them (engine/control/plan.hpp): C
// strings and arrays become owned strings and vectors, after refusal() has checked them.
#include <string>

#include "commscript/commscript.h"
#include "plan.hpp"

namespace cs::embed {

// Why run options `ro` cannot make a plan ("" when they can): NULL entries, negative counts, a
// fail_below out of range, a recipe beside a replay.
std::string refusal(const cs_run_options& ro, bool replay);

// The run options as the plan reads them (checked by refusal() first).
PlanRequest request(const cs_run_options& ro);

// The session options as the plan reads them. The backend is resolved here, once (InputError
// says why not); o's strings are cleared (d holds copies).
void read_defaults(cs_session_options& o, PlanDefaults& d);

}  // namespace cs::embed
