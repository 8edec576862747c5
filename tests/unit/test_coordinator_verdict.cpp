// The coordinator's pure verdict (control/coordinator_verdict.hpp) and its wire protocol
// (control/coordinator_wire.hpp): who is missing, stuck, slow, dead or unreachable, given what
// rank 0 last heard from every rank and the clock. No sockets, no threads.
#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "coordinator_timing.hpp"
#include "coordinator_verdict.hpp"
#include "coordinator_wire.hpp"

using namespace cs::coord;

namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kT0 = 1000 * 1000 * kMs;  // an arbitrary clock origin

Beat in_op(uint64_t seq, double age_ms, double deadline_s, uint64_t started) {
  Beat b;
  b.started = started;
  b.in_flight = true;
  b.seq = seq;
  b.cseq = seq;  // no sends or receives in between unless a test says so
  b.coll = "allreduce";
  b.bytes = 4096;
  b.age_ms = age_ms;
  b.comm = "world";
  b.deadline_s = deadline_s;
  b.count = 1024;
  b.dtype = 0;
  b.site = "recipe.lua:7";
  return b;
}

Beat idle_after(uint64_t seq, uint64_t started) {
  Beat b = in_op(seq, 0, 0, started);
  b.in_flight = false;
  return b;
}

// n ranks on hosts of `per_host`, all connected at kT0.
Ranks world(int n, int per_host) {
  Ranks r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    apply_hello(r[static_cast<size_t>(i)], "h" + std::to_string(i / per_host), 100 + i, -1, kT0);
  return r;
}

// Every rank beats at `at`: all in allreduce #5 since `op_start` (deadline 2 s) except `others`.
void beat_all(Ranks& r, int64_t at, int64_t op_start) {
  for (auto& v : r) apply_beat(v, in_op(5, static_cast<double>(at - op_start) / kMs, 2, 5), at);
}

nlohmann::json missing_of(const nlohmann::json& v, int rank) {
  for (const auto& m : v["missing"])
    if (m["rank"].get<int>() == rank) return m;
  return nullptr;
}

}  // namespace

TEST_CASE("verdict: all ranks fine, nobody overdue", "[coordinator]") {
  Ranks r = world(8, 4);
  const int64_t start = kT0 + 100 * kMs;
  beat_all(r, start + 500 * kMs, start);
  CHECK(overdue_rank(r, start + 1500 * kMs) == -1);
  CHECK(next_deadline_ns(r, start) == start + 2000 * kMs);
  CHECK(next_deadline_ns(r, start + 2000 * kMs) == std::numeric_limits<int64_t>::max());  // judged
  for (const auto& s : snapshot(r, start + 600 * kMs)) CHECK(s["state"] == "alive");
  DesyncMemo dm;
  CHECK(desync_verdict(r, start + 600 * kMs, dm).is_null());
}

TEST_CASE("verdict: one stuck rank is the only one missing", "[coordinator]") {
  Ranks r = world(8, 4);
  const int64_t start = kT0 + 100 * kMs;
  beat_all(r, start + 1900 * kMs, start);
  // Rank 6 finished op #4 long ago and never started #5: heartbeats, but no progress.
  apply_beat(r[6], idle_after(4, 4), start + 1900 * kMs);
  r[6].progress_ns = kT0;
  const int64_t now = start + 2050 * kMs;
  const int stuck = overdue_rank(r, now);
  REQUIRE(stuck >= 0);
  REQUIRE(stuck != 6);
  const auto v = timeout_verdict(r, stuck, now, 300);
  REQUIRE(v["missing"].size() == 1);
  CHECK(v["missing"][0]["rank"] == 6);
  CHECK(v["missing"][0]["state"] == "stuck");
  CHECK(v["missing"][0]["host"] == "h1");
  CHECK(v["arrived"].size() == 7);
  CHECK(v["after_s"].get<double>() == Approx(2.05).margin(0.001));
  CHECK(v["line"].get<std::string>().find("missing ranks: 6 (host h1, stuck)") != std::string::npos);
}

TEST_CASE("verdict: a quiet rank's stale beat does not set the verdict's operation or time", "[coordinator]") {
  // Rank 6 was stopped at `stop` (SIGSTOP, or its host relay froze): its last beat, sent 150 ms
  // earlier, shows allreduce #4 in flight, which it finished before the others entered #5 at
  // `stop`. By rank 0's arithmetic #4 passes its 1 s deadline at stop + 850 ms: too early, and
  // the wrong operation (every other rank, already past #4, would count as arrived).
  Ranks r = world(8, 2);
  const int64_t stop = kT0 + 1000 * kMs;
  apply_beat(r[6], in_op(4, 0, 1, 4), stop - 150 * kMs);
  for (int t = 0; t <= 1000; t += 100)
    for (int i = 0; i < 8; ++i)
      if (i != 6) apply_beat(r[static_cast<size_t>(i)], in_op(5, t, 1, 5), stop + t * kMs);
  CHECK(overdue_rank(r, stop + 900 * kMs) == -1);
  CHECK(next_deadline_ns(r, stop + 900 * kMs) == stop + 1000 * kMs);
  const int64_t now = stop + 1010 * kMs;
  const int ref = overdue_rank(r, now);
  REQUIRE(ref >= 0);
  CHECK(ref != 6);
  const auto v = timeout_verdict(r, ref, now, 300);
  CHECK(v["seq"] == 5);
  CHECK(v["after_s"].get<double>() == Approx(1.01).margin(0.001));
  REQUIRE(v["missing"].size() == 1);
  CHECK(missing_of(v, 6)["host"] == "h3");
  CHECK(missing_of(v, 6)["detail"].get<std::string>().find("no heartbeat for 1160 ms") != std::string::npos);
  CHECK(v["arrived"].size() == 7);
  // With nobody fresh in an operation, the quiet rank's own overdue operation is all there is.
  Ranks alone = world(2, 1);
  apply_beat(alone[1], in_op(4, 0, 1, 4), stop);
  apply_beat(alone[0], idle_after(3, 3), stop + 1100 * kMs);
  CHECK(overdue_rank(alone, stop + 1100 * kMs) == 1);
}

TEST_CASE("verdict: a rank that still progresses is slow, not stuck", "[coordinator]") {
  Ranks r = world(4, 4);
  const int64_t start = kT0 + 100 * kMs;
  beat_all(r, start + 1900 * kMs, start);
  Beat b = in_op(3, 10, 2, 9);  // behind, but just started another op
  b.seq = b.cseq = 3;
  apply_beat(r[2], b, start + 1950 * kMs);
  const int64_t now = start + 2100 * kMs;
  const auto v = timeout_verdict(r, overdue_rank(r, now), now, 300);
  REQUIRE(v["missing"].size() == 1);
  CHECK(missing_of(v, 2)["state"] == "slow");
}

TEST_CASE("verdict: one dead rank", "[coordinator]") {
  Ranks r = world(4, 2);
  const int64_t start = kT0 + 100 * kMs;
  beat_all(r, start + 1900 * kMs, start);
  r[3].dead = true;
  const int64_t now = start + 2100 * kMs;
  const auto v = timeout_verdict(r, overdue_rank(r, now), now, 300);
  REQUIRE(v["missing"].size() == 1);
  CHECK(missing_of(v, 3)["state"] == "dead");
  CHECK(snapshot(r, now)[3]["state"] == "dead (connection closed)");
  const auto d = death_incident(r, 3, "env");
  CHECK(d["kind"] == "rank_died");
  CHECK(d["message"].get<std::string>().find("mpirun") == std::string::npos);
  CHECK(d["message"].get<std::string>().find("--launcher env") != std::string::npos);
  CHECK(death_incident(r, 3, "mpi")["message"].get<std::string>().find("mpirun ends the job") != std::string::npos);
}

TEST_CASE("verdict: a rank seen just inside / just outside the silence limit", "[coordinator]") {
  Ranks r = world(4, 4);
  const int64_t start = kT0 + 100 * kMs;
  beat_all(r, start + 1900 * kMs, start);
  // Rank 1's latest beat (not in the op) is exactly kSilentNs old at `now`: still heard.
  const int64_t now = start + 2100 * kMs;
  apply_beat(r[1], idle_after(4, 4), now - kSilentNs);
  r[1].last_hb_ns = now - kSilentNs;
  r[1].progress_ns = kT0;
  auto v = timeout_verdict(r, 0, now, 300);
  CHECK(missing_of(v, 1)["state"] == "stuck");
  CHECK(missing_of(v, 1)["detail"].get<std::string>().rfind("no progress", 0) == 0);
  CHECK(snapshot(r, now)[1]["state"] == "alive");
  // One millisecond more: no heartbeat, i.e. stopped or frozen.
  r[1].last_hb_ns = now - kSilentNs - kMs;
  v = timeout_verdict(r, 0, now, 300);
  CHECK(missing_of(v, 1)["state"] == "stuck");
  CHECK(missing_of(v, 1)["detail"].get<std::string>().find("no heartbeat for 1501 ms") != std::string::npos);
  CHECK(snapshot(r, now)[1]["state"] == "no heartbeat");
}

TEST_CASE("verdict: the deadline, just inside and just outside", "[coordinator]") {
  Ranks r = world(2, 2);
  const int64_t start = kT0 + 100 * kMs;
  beat_all(r, start + 1000 * kMs, start);
  CHECK(overdue_rank(r, start + 2000 * kMs - kMs) == -1);
  CHECK(overdue_rank(r, start + 2000 * kMs + kMs) >= 0);
}

TEST_CASE("verdict: never connected within the run's timeout", "[coordinator]") {
  Ranks r(3);
  apply_hello(r[0], "h0", 1, -1, kT0);
  apply_hello(r[2], "h0", 3, -1, kT0);
  CHECK(never_connected(r, kT0 + 9 * 1000 * kMs, kT0, 10).is_null());
  const auto v = never_connected(r, kT0 + 11 * 1000 * kMs, kT0, 10);
  REQUIRE(!v.is_null());
  CHECK(v["missing"][0]["rank"] == 1);
  CHECK(v["line"] == "timeout: rank 1 never reached the coordinator within 10 s");
}

TEST_CASE("verdict: per-host aggregated input is exact", "[coordinator]") {
  // 8 ranks, 2 hosts of 4: host h1's ranks 4..7 reach rank 0 through leader 4's relay.
  Ranks r = world(8, 4);
  for (int i = 4; i < 8; ++i) r[static_cast<size_t>(i)].via = 4;
  const int64_t start = kT0 + 100 * kMs;
  for (int i = 0; i < 4; ++i) apply_beat(r[static_cast<size_t>(i)], in_op(5, 1800, 2, 5), start + 1800 * kMs);
  // The relay's message arrives at start+1900 ms; it held each beat for a different time.
  std::vector<RelayedBeat> agg;
  agg.push_back({4, 90, in_op(5, 1810, 2, 5)});
  agg.push_back({5, 10, in_op(5, 1890, 2, 5)});
  agg.push_back({6, 50, idle_after(4, 4)});       // rank 6 is behind
  agg.push_back({7, 1600, in_op(5, 200, 2, 5)});  // rank 7's latest beat is 1.6 s old: silent
  agg.push_back({2, 0, idle_after(0, 0)});        // not carried by this relay: ignored
  const std::string wire = encode_host_beats(4, agg);
  int leader = -1;
  std::vector<RelayedBeat> got;
  REQUIRE(decode_host_beats(wire, &leader, &got));
  CHECK(leader == 4);
  REQUIRE(got.size() == agg.size());
  const int64_t recv = start + 1900 * kMs;
  CHECK(apply_host_beats(r, 4, got, recv) == 4);
  r[6].progress_ns = kT0;
  CHECK(r[4].last_hb_ns == recv - 90 * kMs);
  CHECK(r[7].last_hb_ns == recv - 1600 * kMs);
  CHECK(r[2].beat.in_flight);  // untouched
  // The op's start seen through the relay is the same as seen directly.
  CHECK(next_deadline_ns(r, recv) == start + 2000 * kMs);
  const int64_t now = start + 2050 * kMs;
  const auto v = timeout_verdict(r, overdue_rank(r, now), now, 300);
  REQUIRE(v["missing"].size() == 2);
  CHECK(missing_of(v, 6)["state"] == "stuck");
  CHECK(missing_of(v, 7)["state"] == "stuck");
  CHECK(missing_of(v, 7)["detail"].get<std::string>().find("no heartbeat") != std::string::npos);
  CHECK(v["arrived"].size() == 6);
}

TEST_CASE("verdict: a host leader lost, its ranks are unreachable until they reconnect", "[coordinator]") {
  Ranks r = world(6, 3);
  for (int i = 3; i < 6; ++i) r[static_cast<size_t>(i)].via = 3;
  const int64_t start = kT0 + 100 * kMs;
  beat_all(r, start + 100 * kMs, start);
  // Leader 3 dies (the server marks it dead); its relay is lost.
  relay_lost(r, 3);
  r[3].dead = true;
  r[3].orphaned_by = -1;
  CHECK(r[4].orphaned_by == 3);
  CHECK(r[4].via == -1);
  // Rank 4 reconnects directly; rank 5 (its host gone too) never does.
  apply_hello(r[4], "h1", 104, -1, start + 300 * kMs);
  for (int i : {0, 1, 2, 4}) apply_beat(r[static_cast<size_t>(i)], in_op(5, 1900, 2, 5), start + 1900 * kMs);
  const int64_t now = start + 2100 * kMs;
  const auto v = timeout_verdict(r, overdue_rank(r, now), now, 300);
  REQUIRE(v["missing"].size() == 2);
  CHECK(missing_of(v, 3)["state"] == "dead");
  CHECK(missing_of(v, 5)["state"] == "unreachable");
  CHECK(missing_of(v, 5)["detail"].get<std::string>().find("host leader (rank 3)") != std::string::npos);
  CHECK(missing_of(v, 4).is_null());
  CHECK(snapshot(r, now)[5]["state"] == "unreachable");
  // Beats that a late relay message still carries for rank 4 are ignored (it is direct now).
  std::vector<RelayedBeat> late = {{4, 0, idle_after(1, 1)}};
  CHECK(apply_host_beats(r, 3, late, now) == 0);
}

TEST_CASE("verdict: desync waits for the stragglers, then names both sides", "[coordinator]") {
  Ranks r = world(3, 3);
  const int64_t t = kT0 + 100 * kMs;
  for (auto& v : r) apply_beat(v, in_op(5, 10, 2, 5), t);
  Beat other = in_op(5, 10, 2, 5);
  other.count = 8;
  other.site = "recipe.lua:9";
  apply_beat(r[2], other, t);
  DesyncMemo dm;
  CHECK(desync_verdict(r, t, dm).is_null());
  CHECK(desync_verdict(r, t + kDesyncSettleNs - kMs, dm).is_null());
  const auto v = desync_verdict(r, t + kDesyncSettleNs, dm);
  REQUIRE(!v.is_null());
  CHECK(v["sides"].size() == 2);
  CHECK(v["line"].get<std::string>().find("rank 2 at recipe.lua:9 called allreduce count=8") != std::string::npos);
}

TEST_CASE("verdict: a long wait is noted, then not again until the next interval", "[coordinator]") {
  Ranks r = world(2, 2);
  const int64_t t = kT0 + 100 * kMs;
  apply_beat(r[0], in_op(5, 11000, 100, 5), t);
  apply_beat(r[1], idle_after(4, 4), t);
  WaitMemo wm;
  const std::string note = waiting_note(r, t, wm, 300);
  CHECK(note.rfind("waiting 11 s in allreduce #5", 0) == 0);
  CHECK(note.find("arrived: 0; missing: 1 (host h0") != std::string::npos);
  CHECK(waiting_note(r, t + 1000 * kMs, wm, 300).empty());
  CHECK(!waiting_note(r, t + 10001 * kMs, wm, 300).empty());
}

TEST_CASE("verdict: a rank spinning in Lua is named busy in Lua at its line; a stale sample is not", "[coordinator]") {
  Ranks r = world(3, 3);
  const int64_t start = kT0 + 100 * kMs;
  const int64_t at = start + 2100 * kMs;
  beat_all(r, at, start);
  Beat spin = idle_after(4, 4);
  spin.lua = "spin.lua:8";
  spin.lua_for_ms = 2500;
  spin.lua_age_ms = 40;
  apply_beat(r[2], spin, at);
  r[2].progress_ns = kT0;
  auto v = timeout_verdict(r, 0, at + 50 * kMs, 300);
  auto m = missing_of(v, 2);
  REQUIRE(!m.is_null());
  CHECK(m["state"] == "busy in Lua");
  CHECK(m["lua"]["site"] == "spin.lua:8");
  CHECK(m["lua"]["for_s"].get<double>() == Approx(2.55));
  CHECK(v["line"].get<std::string>().find("missing ranks: 2 (host h0, busy in Lua at spin.lua:8 for 3 s (last: "
                                          "allreduce #4 on world))") != std::string::npos);
  // The same beat with its latest sample 2.5 s old: blocked outside the engine, not busy in Lua.
  spin.lua_age_ms = 2500;
  apply_beat(r[2], spin, at);
  v = timeout_verdict(r, 0, at + 50 * kMs, 300);
  m = missing_of(v, 2);
  REQUIRE(!m.is_null());
  CHECK(m["state"] == "stuck");
  CHECK(!m.contains("lua"));
}

TEST_CASE("wire: beats, hellos and addressed lines round-trip", "[coordinator]") {
  Beat b = in_op(42, 12.5, 3, 99);
  b.site = "my recipe.lua:3";  // spaces become '_'
  Beat back;
  b.cseq = 17;
  REQUIRE(decode_beat(encode_beat(b), &back));
  CHECK(back.seq == 42);
  CHECK(back.cseq == 17);
  CHECK(back.started == 99);
  CHECK(back.age_ms == Approx(12.5));
  CHECK(back.site == "my_recipe.lua:3");
  CHECK(back.lua == "-");
  CHECK(back.lua_for_ms == -1);
  b.lua = "a b.lua:8";
  b.lua_for_ms = 1234.5;
  b.lua_age_ms = 12;
  REQUIRE(decode_beat(encode_beat(b), &back));
  CHECK(back.lua == "a_b.lua:8");
  CHECK(back.lua_for_ms == Approx(1234.5));
  CHECK(back.lua_age_ms == Approx(12));
  CHECK(!decode_beat("HB 1 2 3", &back));
  int rank = -1, pid = 0;
  std::string host;
  REQUIRE(decode_hello(encode_hello(7, "node 1", 1234), &rank, &host, &pid));
  CHECK((rank == 7 && host == "node_1" && pid == 1234));
  CHECK(!decode_hello("HELLO -1 x 3", &rank, &host, &pid));
  std::string rest;
  REQUIRE(decode_addressed(encode_addressed("FWD", 12, "BYE signal"), "FWD", &rank, &rest));
  CHECK((rank == 12 && rest == "BYE signal"));
  CHECK(!decode_addressed("FWD x BYE", "FWD", &rank, &rest));
  CHECK(!decode_addressed("TO 3 DUMP", "FWD", &rank, &rest));
  int leader = -1;
  std::vector<RelayedBeat> got;
  CHECK(!decode_host_beats("AGG 1 2;3 0 1 1 1 x 1 1 c 1 1 1 s", &leader, &got));  // says 2, carries 1
  LineBuffer lb;
  lb.append("A\nB", 3);
  std::string line;
  REQUIRE(lb.next(&line));
  CHECK(line == "A");
  CHECK(!lb.next(&line));
  lb.append("C\n", 2);
  REQUIRE(lb.next(&line));
  CHECK(line == "BC");
}

TEST_CASE("verdict: ranks are matched by collective number, not by sequence number", "[coordinator]") {
  // full_diag's re-tests: ranks 0 and 1 measured a pair (sendrecv, 30 operations) that ranks 2
  // and 3 had no part in; all four then entered the same barrier, collective #9, at different
  // sequence numbers. Rank 3 never arrives: it is still in the barrier before (#8).
  Ranks r = world(4, 2);
  const int64_t start = kT0 + 100 * kMs;
  auto barrier = [&](uint64_t seq, uint64_t cseq) {
    Beat b = in_op(seq, 1900, 2, seq);
    b.coll = "barrier";
    b.bytes = b.count = 0;
    b.cseq = cseq;
    return b;
  };
  const int64_t at = start + 1900 * kMs;
  apply_beat(r[0], barrier(40, 9), at);
  apply_beat(r[1], barrier(40, 9), at);
  apply_beat(r[2], barrier(10, 9), at);
  apply_beat(r[3], barrier(9, 8), at);  // same seq as nobody, an earlier collective
  r[3].progress_ns = kT0;
  auto v = timeout_verdict(r, 0, start + 2050 * kMs, 300);
  CHECK(v["arrived"] == nlohmann::json::array({0, 1, 2}));
  REQUIRE(v["missing"].size() == 1);
  CHECK(missing_of(v, 3)["state"] == "stuck");
  CHECK(v["mismatch"].empty());
  // The other way round: rank 2 in barrier #10 of its own count is the collective after rank
  // 0's (#40 = collective 9), not the same operation: arrived, not a mismatch, and rank 3 at
  // seq 40 but collective 8 is missing, not arrived.
  apply_beat(r[2], barrier(40, 10), at);
  apply_beat(r[3], barrier(40, 8), at);
  v = timeout_verdict(r, 0, start + 2050 * kMs, 300);
  CHECK(v["arrived"] == nlohmann::json::array({0, 1, 2}));
  CHECK(!missing_of(v, 3).is_null());
  // A rank in a send after the barrier (collective count unchanged) has passed it.
  Beat send = in_op(41, 5, 2, 41);
  send.coll = "sendrecv";
  send.cseq = 9;
  apply_beat(r[3], send, at);
  v = timeout_verdict(r, 0, start + 2050 * kMs, 300);
  CHECK(v["missing"].empty());
}

TEST_CASE("desync: different collectives at the same sequence number are not a desync", "[coordinator]") {
  // Rank 0 sent to rank 1 first, so its barrier (collective 4) has the seq of rank 2's
  // allreduce (collective 5): different operations, but not at the same point of the program.
  Ranks r = world(3, 3);
  const int64_t at = kT0 + 100 * kMs;
  Beat a = in_op(6, 10, 300, 6);
  a.coll = "barrier";
  a.cseq = 4;
  Beat b = in_op(6, 10, 300, 6);
  b.cseq = 5;
  auto beat_at = [&](int64_t t) {
    apply_beat(r[0], a, t);
    apply_beat(r[1], a, t);
    apply_beat(r[2], b, t);
  };
  DesyncMemo dm;
  for (int64_t t = at; t <= at + 2000 * kMs; t += 500 * kMs) {  // past the settling time, still nothing
    beat_at(t);
    CHECK(desync_verdict(r, t, dm).is_null());
  }
  // The same collective number with different calls is one.
  b.cseq = 4;
  const int64_t t2 = at + 2500 * kMs;
  beat_at(t2);
  DesyncMemo dm2;
  CHECK(desync_verdict(r, t2, dm2).is_null());  // settling
  beat_at(t2 + 500 * kMs);
  const auto v = desync_verdict(r, t2 + 500 * kMs, dm2);
  REQUIRE(!v.is_null());
  CHECK(v["cseq"] == 4);
  CHECK(v["line"].get<std::string>().rfind("desync: world collective #4: the ranks called different operations", 0) ==
        0);
}

TEST_CASE("verdict: in a pipelined loop, the stopped rank's partner one collective behind is not missing",
          "[coordinator]") {
  // A timed loop of all-reduces on 4 ranks (no per-call agreement): rank 3 is stopped inside
  // collective 100 (after its first exchange, with rank 2). Rank 2 finished 100 and waits in 101
  // for rank 3, rank 0 finished 100 and waits in 101 for rank 1, and rank 1 waits in 100 for
  // rank 3. Observed starts differ by up to a heartbeat. Judged from 101, rank 1 would be named
  // missing along with rank 3 (seen in CI); judged from 100, only rank 3 is.
  Ranks r = world(4, 4);
  const int64_t stop = kT0 + 1000 * kMs;
  auto loop_op = [](uint64_t cseq, double age_ms) {
    Beat b = in_op(1000 + cseq, age_ms, 2, 7);  // one record for the loop: `started` stays
    b.cseq = cseq;
    b.bytes = 8;
    return b;
  };
  apply_beat(r[3], loop_op(100, 0), stop - 40 * kMs);
  for (int t = 0; t <= 2000; t += 100) {
    apply_beat(r[0], loop_op(101, t), stop + t * kMs);
    apply_beat(r[2], loop_op(101, t), stop + t * kMs);
    if (t >= 100) apply_beat(r[1], loop_op(100, t - 100), stop + t * kMs);  // seen 100 ms later
  }
  for (auto* v : {&r[0], &r[1], &r[2]}) v->progress_ns = stop;
  const int64_t now = stop + 2010 * kMs;
  const int over = overdue_rank(r, now);
  REQUIRE((over == 0 || over == 2));
  const auto v = timeout_verdict(r, over, now, 300);
  CHECK(v["seq"] == 1100);
  CHECK(v["after_s"].get<double>() == Approx(2.01).margin(0.001));  // the overdue rank's wait
  CHECK(v["arrived"] == nlohmann::json::array({0, 1, 2}));
  REQUIRE(v["missing"].size() == 1);
  CHECK(missing_of(v, 3)["state"] == "stuck");
  // A rank one collective behind that entered it only just (it is catching up) does not move
  // the verdict back: judged from 101, it is the one named, as slow.
  apply_beat(r[1], loop_op(100, 50), now - 10 * kMs);
  r[1].progress_ns = now - 60 * kMs;
  const auto w = timeout_verdict(r, over, now, 300);
  CHECK(w["seq"] == 1101);
  CHECK(missing_of(w, 1)["state"] == "slow");
  CHECK(missing_of(w, 3)["state"] == "stuck");
}

TEST_CASE("verdict: a stopped rank 0 is named alone, not with the ranks it could not hear", "[coordinator]") {
  // Rank 0 runs the coordinator: SIGSTOP of rank 0 freezes it too, and when it runs again every
  // rank's latest beat is as old as rank 0's own. Named before: all four ranks "stuck", three of
  // them healthy. Variations: 4 ranks on one host, 8 on two; a rank that had gone quiet 5 s
  // before rank 0 froze is still named; a rank that went quiet with rank 0 in an earlier
  // operation is judged by that beat.
  for (const int n : {4, 8}) {
    Ranks r = world(n, 4);
    const int64_t stop = kT0 + 1000 * kMs;
    for (int i = 0; i < n; ++i) apply_beat(r[static_cast<size_t>(i)], in_op(5, 100, 3, 5), stop);
    const int64_t now = stop + 10 * 1000 * kMs;
    const int ref = overdue_rank(r, now);
    REQUIRE(ref >= 0);
    const auto v = timeout_verdict(r, ref, now, 3);
    REQUIRE(v["missing"].size() == 1);
    CHECK(v["missing"][0]["rank"] == 0);
    CHECK(v["missing"][0]["state"] == "stuck");
    CHECK(v["missing"][0]["detail"].get<std::string>().find("rank 0 runs the coordinator") != std::string::npos);
    CHECK(v["arrived"].size() == static_cast<size_t>(n - 1));
    CHECK(v["line"].get<std::string>().find("missing ranks: 0 (host h0, stuck)") != std::string::npos);
  }
  Ranks r = world(4, 4);
  const int64_t stop = kT0 + 10 * 1000 * kMs;
  apply_beat(r[2], in_op(5, 100, 3, 5), stop - 5000 * kMs);  // stopped 5 s before rank 0
  apply_beat(r[3], idle_after(4, 4), stop);                  // last heard before #5
  r[3].progress_ns = stop - 9000 * kMs;
  for (int i : {0, 1}) apply_beat(r[static_cast<size_t>(i)], in_op(5, 100, 3, 5), stop);
  const int64_t now = stop + 10 * 1000 * kMs;
  const auto v = timeout_verdict(r, 1, now, 3);
  CHECK(!missing_of(v, 0).is_null());
  CHECK(!missing_of(v, 2).is_null());
  CHECK(missing_of(v, 1).is_null());
  CHECK(!missing_of(v, 3).is_null());
  CHECK(missing_of(v, 3)["detail"].get<std::string>().find("not in an operation (last: allreduce #4)") !=
        std::string::npos);
  // The same beat, but the rank was starting operations up to the moment rank 0 froze: a tight
  // barrier loop on a loaded machine runs dozens of barriers between two beats, so its last beat
  // said "between operations, 42 behind". That is a stale beat, not a stuck rank (CI: "missing
  // ranks: 0 (stuck), 2 (stuck)" in 1 of 6 runs under load).
  r[3].progress_ns = stop - 50 * kMs;
  const auto w = timeout_verdict(r, 1, now, 3);
  CHECK(!missing_of(w, 0).is_null());
  CHECK(missing_of(w, 3).is_null());
  CHECK(!missing_of(w, 2).is_null());  // quiet 5 s before rank 0 froze: still named
}

TEST_CASE("verdict: rank 0 found frozen by its coordinator is named, whatever its fresh beat says", "[coordinator]") {
  // The coordinator, resumed with rank 0, reads the backlog: every rank's beat is fresh, rank 0's
  // too (its heartbeat thread resumed with it), all in allreduce #5 or, one of them, still in #4
  // (a collective rank 0 has left may still need its messages elsewhere). Only the coordinator's
  // own clock jump (frozen_ns) shows who the others waited for. Before: nobody missing (the
  // fresh beats), or rank 0 with the rank still in #4 (in 1 of 6 runs under load).
  Ranks r = world(4, 4);
  const int64_t now = kT0 + 20 * 1000 * kMs;
  for (int i : {0, 1, 2}) apply_beat(r[static_cast<size_t>(i)], in_op(5, 10000, 3, 5), now - 50 * kMs);
  apply_beat(r[3], in_op(4, 10000, 3, 4), now - 50 * kMs);
  r[0].frozen_ns = 9000 * kMs;
  const int ref = overdue_rank(r, now);
  REQUIRE(ref >= 0);
  const auto v = timeout_verdict(r, ref, now, 3);
  REQUIRE(v["missing"].size() == 1);
  CHECK(v["missing"][0]["rank"] == 0);
  CHECK(v["missing"][0]["detail"].get<std::string>().find("stopped or frozen for 9000 ms") != std::string::npos);
  CHECK(v["arrived"].size() == 3);
  // Frozen under the silence limit (a scheduling hiccup): no longer grounds to name rank 0.
  r[0].frozen_ns = kSilentNs - kMs;
  const auto w = timeout_verdict(r, ref, now, 3);
  CHECK(missing_of(w, 0).is_null());
}

TEST_CASE("verdict: resumed rank 0 beats again; ranks unheard since it froze are not stuck", "[coordinator]") {
  // The rank whose deadline passed resumed rank 0 (SIGCONT) and the verdict came before the
  // others' backlog was read: rank 0's and rank 1's beats are fresh, ranks 2 and 3 were last heard
  // just before rank 0 froze (8 s ago, frozen_ns 7.9 s), in earlier barriers of a tight loop and
  // starting operations then. Named before: "missing ranks: 0, 2, 3 (stuck)" (CI, 1 of 10 runs
  // under load). A rank quiet for 5 s before the freeze is still named.
  Ranks r = world(4, 4);
  const int64_t now = kT0 + 30 * 1000 * kMs;
  const int64_t froze = now - 7926 * kMs;
  apply_beat(r[0], in_op(58, 9000, 3, 58), now - 50 * kMs);
  apply_beat(r[1], in_op(61, 9000, 3, 61), now - 50 * kMs);
  apply_beat(r[2], in_op(31, 1, 3, 31), froze - 92 * kMs);
  apply_beat(r[3], in_op(58, 1, 3, 58), froze - 89 * kMs);
  r[0].frozen_ns = 7926 * kMs;
  const auto v = timeout_verdict(r, 1, now, 3);
  REQUIRE(v["missing"].size() == 1);
  CHECK(v["missing"][0]["rank"] == 0);
  r[2].last_hb_ns = r[2].progress_ns = froze - 5000 * kMs;  // quiet since 5 s before
  const auto w = timeout_verdict(r, 1, now, 3);
  CHECK(!missing_of(w, 2).is_null());
  CHECK(missing_of(w, 3).is_null());
}
