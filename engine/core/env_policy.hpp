#pragma once
// The one policy for environment variables (docs/stdlib.md, "One home per concept"): which
// families the environment audit lints, which the topology records for every rank, which a
// report's snapshot keeps, and which names are credentials whose values are never copied. The Lua
// stdlib reads the same lists through native.env_policy (cs.env.registry), so the audit, the
// topology's comparison between ranks and report.json cannot disagree on what they look at.
#include <string>
#include <vector>

namespace cs {

// The families the environment audit lints (cs.env.registry.AUDITED_PREFIXES). Each is also
// recorded by the topology (compared between ranks) and kept by the snapshot.
const std::vector<std::string>& env_audited_prefixes();
// What local_topology() records per rank: the audited families, and CUDA_VISIBLE_DEVICES (the
// exact name: per rank by design, reported but not compared).
const std::vector<std::string>& env_topology_names();
// What a report's "env" snapshot keeps: the audited families, then the launchers' and CUDA's.
const std::vector<std::string>& env_snapshot_prefixes();
// Name fragments that mark a credential: such a variable's value is never recorded.
const std::vector<std::string>& env_secret_patterns();
bool is_secret_env_name(const std::string& name);
// True when `name` is named by `list`: an entry ending in '_' is a prefix, any other entry an
// exact name.
bool env_name_in(const std::string& name, const std::vector<std::string>& list);

}  // namespace cs
