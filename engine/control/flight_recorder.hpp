#pragma once
// The flight recorder on disk: one writer for every path that dumps it (the coordinator's
// timeout verdict, a rank ended by a signal). Each file is
//   <out>/flight/rank-<N>.json = {rank, host, ops: [{seq, op, bytes, comm, started_ms_ago, state}]}
// with state "completed" or "in flight" (the last record, while its operation runs).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "progress.hpp"

namespace cs {

// This rank's ring (comm/progress.hpp), oldest first, as the records above.
nlohmann::json flight_ring_json();
// The same from records read elsewhere (the guardian reads a dead rank's ring); the last one is
// "in flight" when `in_flight`.
nlohmann::json flight_ring_json(const std::vector<OpRecord>& recs, bool in_flight);

// Writes one rank's file and returns its path; "" when it could not be written, or when
// `overwrite` is false and the file is already there (the coordinator's copy wins).
// `extra` (an object) adds keys to the file (the guardian: how the rank ended, its recipe site).
std::string write_flight_record(const std::string& out_dir, int rank, const std::string& host,
                                const nlohmann::json& ops, bool overwrite = true,
                                const nlohmann::json& extra = nlohmann::json());

}  // namespace cs
