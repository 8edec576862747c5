#pragma once
// Every timing constant of the control plane (coordinator, host relays, heartbeat clients,
// watchdog) in one place (docs/hangs-chaos-replay.md, "The control plane at scale").
#include <cstdint>

namespace cs::coord {

// A rank sends a heartbeat this often.
inline constexpr int kHeartbeatMs = 100;
// A host leader forwards its host's heartbeats to rank 0 as one message this often.
inline constexpr int kRelayForwardMs = kHeartbeatMs;
// The coordinator re-judges (deadlines, desync, long waits) at least this often, and also at the
// moment the earliest operation in flight passes its deadline.
inline constexpr int kJudgeTickMs = kHeartbeatMs;
// No heartbeat for this long: the rank is stuck (stopped or frozen), not just slow.
inline constexpr int64_t kSilentNs = 1500LL * 1000 * 1000;
// A beat at most this old is current (a heartbeat interval, a relay's hold, scheduling): only such
// ranks' operations set the time of a timeout verdict (coordinator_verdict.hpp, overdue_rank).
inline constexpr int64_t kFreshNs = 3LL * kHeartbeatMs * 1000 * 1000;
// A rank counts as "still progressing" when it started an operation within this window (capped at
// half the run's timeout).
inline constexpr int64_t kProgressWindowNs = 2000LL * 1000 * 1000;
// Different calls at one sequence number: wait this long (a few heartbeats) for the ranks still on
// their way, so that every rank is on a side or named as elsewhere.
inline constexpr int64_t kDesyncSettleNs = 4LL * kHeartbeatMs * 1000 * 1000;
// A rank out of any operation whose latest Lua sample (LuaJIT's profiler, every 100 ms of its CPU
// time) is at most this old is busy in Lua; older, it is blocked outside the engine.
inline constexpr int64_t kLuaFreshNs = 2000LL * 1000 * 1000;
// A long wait is reported every max(kWaitNoteMinS, kWaitNoteFraction x deadline).
inline constexpr double kWaitNoteMinS = 10;
inline constexpr double kWaitNoteFraction = 0.1;
// The coordinator thread found this much more time gone than it waited for: its process (rank 0)
// was stopped or frozen meanwhile (SIGSTOP, a debugger). It then judges on what it knew before
// the freeze, ahead of the backlog that piled up (the frozen rank's own fresh beat, the others'
// local timeouts), and a signal that arrives with the resumption waits for that verdict.
inline constexpr int64_t kStallNs = 1000LL * 1000 * 1000;
// How long a SIGTERM to rank 0 waits for a verdict being given after such a freeze.
inline constexpr int kVerdictWaitMs = 2000;
// After a verdict, the flight recorders are collected for up to this long, looking every kRingPollMs.
inline constexpr int64_t kRingCollectNs = 1500LL * 1000 * 1000;
inline constexpr int kRingPollMs = 20;
// Connecting to the coordinator or a host relay gives up after this long.
inline constexpr int kConnectTimeoutMs = 1000;
// A write that finds the socket full waits this long for room before it gives up.
inline constexpr int kWriteStallMs = 200;
// A failing rank looks for the coordinator's ACK this often.
inline constexpr int kAckPollMs = 10;
// A follower whose host relay has said nothing for this long (it sends a TICK every forward
// interval) stops trusting it and connects to the coordinator directly.
inline constexpr int kRelaySilentFailoverMs = 6 * kRelayForwardMs;
// Each rank's own watchdog (watchdog.hpp) looks at the operation in flight this often.
inline constexpr int kWatchdogPollMs = 50;
// listen() backlog of the coordinator (the kernel caps it at net.core.somaxconn).
inline constexpr int kListenBacklog = 8192;
// Open files the coordinator keeps for itself beyond one per connection it expects.
inline constexpr int kSpareFiles = 64;

}  // namespace cs::coord
