#pragma once
// The deadline of each operation, in seconds: its default and its bounds, in the lowest layer
// that waits on one (the Gloo store's setup waits here; the control plane's coordinator and the
// run's plan above). The one function that resolves a run's deadline from its inputs is
// resolve_deadline (engine/control/run_inputs.hpp).

namespace cs {

// The default deadline of each operation when neither --timeout, a replayed report nor [run]
// says (and the setup's deadline when operations have none: a world's ranks must meet).
inline constexpr double kDefaultTimeoutS = 300;

// Deadlines: 0 means none; otherwise between these (a deadline of 1e10 s overflowed the clock
// and fired at once; one of 1e-300 s fires before anything can arrive).
inline constexpr double kMinTimeoutS = 0.001;
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;

// How long a world's setup waits for its ranks to meet: the operations' deadline, or the
// default when they have none (0).
inline constexpr double setup_deadline_s(double timeout_s) { return timeout_s > 0 ? timeout_s : kDefaultTimeoutS; }

}  // namespace cs
