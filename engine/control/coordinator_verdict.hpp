#pragma once
// The coordinator's judgement as pure functions (docs/hangs-chaos-replay.md): given what rank 0
// last heard from every rank and the clock, who is missing, stuck, slow or dead, which ranks
// called different operations, and what a long wait looks like. No sockets, no threads, no
// clock reads: `now` is an argument, so every verdict can be unit-tested (tests/unit).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator_wire.hpp"

namespace cs::coord {

// What rank 0 knows of one rank.
struct RankView {
  bool hello = false;  // it said HELLO (directly or through its host's relay)
  bool dead = false;   // its connection closed without a goodbye
  bool bye = false;    // it said goodbye (a clean end or a signal)
  std::string host = "?";
  int pid = 0;
  int64_t last_hb_ns = 0;   // when its latest heartbeat was sent (rank 0's clock)
  int64_t progress_ns = 0;  // when it was last seen starting a new operation
  Beat beat;                // its latest heartbeat
  int via = -1;             // the host leader whose relay carries it (-1: connected directly)
  int orphaned_by = -1;     // the leader whose relay it lost; it has not reconnected since
  // Rank 0 only: the coordinator, which runs in its process, found the process frozen this long
  // just now (SIGSTOP): it is the rank the others waited for, whatever its fresh beat says.
  int64_t frozen_ns = 0;
  // The communicators made by split/shrink that this rank is a member of, as it announced them
  // (COMM lines). A timeout on such a communicator judges its members only: another
  // communicator's ranks, busy or waiting elsewhere, are not missing from it.
  std::vector<std::string> comms;
};
// At most this many announced communicators are kept per rank.
inline constexpr size_t kMaxCommsPerRank = 1024;
using Ranks = std::vector<RankView>;

// Input.
void apply_hello(RankView& r, const std::string& host, int pid, int via, int64_t now);
void apply_beat(RankView& r, const Beat& b, int64_t sent_ns);
// Per-host aggregated input: leader `leader`'s forwarded beats, received at `now` (each was
// sent `hold_ms` earlier). Beats for ranks that this relay does not carry (one that moved to a
// direct connection after the relay went silent) are ignored. Returns how many were applied.
size_t apply_host_beats(Ranks& ranks, int leader, const std::vector<RelayedBeat>& beats, int64_t now);
// Leader `leader`'s relay connection closed: the ranks it carried are orphaned until they
// reconnect directly. (Whether the leader itself died is its own goodbye's business.)
void relay_lost(Ranks& ranks, int leader);

// One word for a rank's liveness: "never connected", "dead (connection closed)", "no heartbeat",
// "unreachable" (its host relay is gone and it has not reconnected) or "alive".
std::string liveness(const RankView& r, int64_t now);
// Every rank's liveness and last operation (for the report); "via" is the host leader whose
// relay carries its heartbeat (-1: connected to rank 0 directly).
nlohmann::json snapshot(const Ranks& ranks, int64_t now);

// Deadlines. The rank whose operation is furthest past its own deadline, or -1. Only ranks whose
// latest beat is fresh (kFreshNs) count while one of them is in an operation: a quiet rank's
// stale beat would name an operation the others have long left (the verdict waits for theirs).
int overdue_rank(const Ranks& ranks, int64_t now);
// When the earliest operation in flight passes its deadline after `after` (INT64_MAX: none).
int64_t next_deadline_ns(const Ranks& ranks, int64_t after);
// The timeout verdict when rank `over` is overdue (its wait is `after_s`): who arrived, who is
// missing and why (dead / stuck / slow / never connected / unreachable), who called something
// else. Judged from `over`'s collective, or from an earlier one on the same communicator that
// fresh ranks have waited in about as long (pipelined loops: the ranks still in it wait for the
// missing rank, not for the ones ahead). `run_timeout_s` caps the "still progressing" window at
// half of it.
nlohmann::json timeout_verdict(const Ranks& ranks, int over, int64_t now, double run_timeout_s);
// Setup has a deadline too: the first rank that never connected within `run_timeout_s` of
// `start_ns`, as a timeout incident, or null.
nlohmann::json never_connected(const Ranks& ranks, int64_t now, int64_t start_ns, double run_timeout_s);

// Ranks at the same sequence number of a communicator calling different things. `memo` keeps
// when the disagreement was first seen (a verdict waits kDesyncSettleNs). Null when none (yet).
struct DesyncMemo {
  std::string key;
  int64_t seen_ns = 0;
};
nlohmann::json desync_verdict(const Ranks& ranks, int64_t now, DesyncMemo& memo);

// A long wait is not silent: who arrived and who is missing, every so often. Empty when there is
// nothing to say now.
struct WaitMemo {
  std::string op;
  int64_t noted_ns = 0;
};
std::string waiting_note(const Ranks& ranks, int64_t now, WaitMemo& memo, double run_timeout_s);

// A rank died: the incident. `launcher`: "mpi", "env", "slurm" (who ends the job, if anyone).
nlohmann::json death_incident(const Ranks& ranks, int rank, const std::string& launcher);
// What happens to the job after a death, in the launcher's words.
std::string launcher_aftermath(const std::string& launcher);

}  // namespace cs::coord
