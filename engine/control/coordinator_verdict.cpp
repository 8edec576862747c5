#include "coordinator_verdict.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "collective.hpp"
#include "coordinator_timing.hpp"
#include "dtype.hpp"
#include "size.hpp"

namespace cs::coord {

namespace {

bool silent(const RankView& r, int64_t now) { return r.hello && !r.dead && now - r.last_hb_ns > kSilentNs; }

// Out of any operation and running Lua lately (its latest beat's sample, aged by the time since).
bool busy_in_lua(const RankView& r, int64_t now) {
  const Beat& b = r.beat;
  return !b.in_flight && b.lua != "-" && b.lua_age_ms >= 0 &&
         b.lua_age_ms * 1e6 + static_cast<double>(now - r.last_hb_ns) <= static_cast<double>(kLuaFreshNs);
}

bool point_to_point(const std::string& coll) { return collective_name_is_pairwise(coll); }

// Connected, alive and in an operation with a deadline: a rank whose wait can become a timeout.
bool waiting_with_deadline(const RankView& r) {
  return r.hello && !r.dead && r.beat.in_flight && r.beat.deadline_s > 0;
}

// How long rank r has been in its current operation, by its latest beat and the time since.
double waited_ms(const RankView& r, int64_t now) {
  return r.beat.age_ms + static_cast<double>(now - r.last_hb_ns) * 1e-6;
}

// The rank whose collective the verdict is judged from, given the overdue rank `over`: in a
// loop without per-call agreement (a timed loop), collectives pipeline, and a rank can leave
// collective k before every rank has finished it. With one rank stopped, its partners still in k
// wait for it, while ranks already in k + 1 wait for those partners. Judged from k + 1, the
// partners would be named missing along with the stopped rank; judged from k, only the stopped
// rank is. So: among the fresh ranks waiting in a collective on the same communicator about as
// long as the deadline (less the spread of observed starts, kFreshNs), the earliest collective.
int earliest_blocked(const Ranks& ranks, int over, int64_t now) {
  int ref = over;
  const Beat& ob = ranks[static_cast<size_t>(over)].beat;
  if (point_to_point(ob.coll)) return ref;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankView& s = ranks[i];
    const Beat& b = s.beat;
    if (!waiting_with_deadline(s) || now - s.last_hb_ns > kFreshNs) continue;
    if (b.comm != ob.comm || point_to_point(b.coll) || b.cseq >= ranks[static_cast<size_t>(ref)].beat.cseq) continue;
    if (waited_ms(s, now) >= b.deadline_s * 1000 - static_cast<double>(kFreshNs) * 1e-6) ref = static_cast<int>(i);
  }
  return ref;
}

// Rank 0's own heartbeat is silent while it is connected and alive: its process (which runs the
// coordinator) did not run.
bool frozen_root(const Ranks& ranks, int64_t now) {
  return !ranks.empty() && ranks[0].hello && !ranks[0].dead &&
         (silent(ranks[0], now) || ranks[0].frozen_ns >= kSilentNs);
}

std::string dtype_text(int dtype) {
  return dtype < 0 ? std::string("?") : std::string(dtype_name(static_cast<DType>(dtype)));
}

}  // namespace

void apply_hello(RankView& r, const std::string& host, int pid, int via, int64_t now) {
  r.hello = true;
  r.dead = false;
  r.host = host;
  r.pid = pid;
  r.via = via;
  r.orphaned_by = -1;
  r.last_hb_ns = r.progress_ns = now;
}

void apply_beat(RankView& r, const Beat& b, int64_t sent_ns) {
  if (b.started != r.beat.started) r.progress_ns = sent_ns;
  r.beat = b;
  if (r.beat.site == "-") r.beat.site = "?";  // unknown with call verification off
  r.last_hb_ns = std::max(r.last_hb_ns, sent_ns);
}

size_t apply_host_beats(Ranks& ranks, int leader, const std::vector<RelayedBeat>& beats, int64_t now) {
  size_t applied = 0;
  for (const RelayedBeat& rb : beats) {
    if (rb.rank < 0 || static_cast<size_t>(rb.rank) >= ranks.size()) continue;
    RankView& r = ranks[static_cast<size_t>(rb.rank)];
    if (!r.hello || r.dead || r.via != leader) continue;
    apply_beat(r, rb.beat, now - static_cast<int64_t>(std::max(0.0, rb.hold_ms) * 1e6));
    ++applied;
  }
  return applied;
}

void relay_lost(Ranks& ranks, int leader) {
  for (RankView& r : ranks)
    if (r.via == leader) {
      r.via = -1;
      if (!r.bye && !r.dead) r.orphaned_by = leader;
    }
}

std::string liveness(const RankView& r, int64_t now) {
  if (!r.hello) return "never connected";
  if (r.dead) return "dead (connection closed)";
  if (silent(r, now)) return r.orphaned_by >= 0 ? "unreachable" : "no heartbeat";
  return "alive";
}

nlohmann::json snapshot(const Ranks& ranks, int64_t now) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankView& s = ranks[i];
    out.push_back({{"rank", i},
                   {"host", s.host},
                   {"pid", s.pid},
                   {"state", liveness(s, now)},
                   {"op", s.beat.coll},
                   {"seq", s.beat.seq},
                   {"cseq", s.beat.cseq},
                   {"comm", s.beat.comm},
                   {"in_flight", s.beat.in_flight},
                   {"ops_started", s.beat.started},
                   {"via", s.via}});
  }
  return out;
}

int overdue_rank(const Ranks& ranks, int64_t now) {
  // A rank whose beat is fresh is the reference: the beat of a rank that went quiet (stopped,
  // or behind a frozen host relay) may show an operation it finished long ago, past its deadline
  // only by rank 0's arithmetic, while the others wait in a later one. Quiet ranks are judged
  // from the fresh ranks' operation; they are the reference only when no fresh rank waits in one.
  int worst = -1, worst_quiet = -1;
  double worst_ms = 0, worst_quiet_ms = 0;
  bool fresh_waiting = false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankView& s = ranks[i];
    if (!waiting_with_deadline(s)) continue;
    const bool fresh = now - s.last_hb_ns <= kFreshNs;
    fresh_waiting = fresh_waiting || fresh;
    const double ms = waited_ms(s, now);
    if (ms <= s.beat.deadline_s * 1000) continue;
    if (fresh && ms > worst_ms) {
      worst = static_cast<int>(i);
      worst_ms = ms;
    } else if (!fresh && ms > worst_quiet_ms) {
      worst_quiet = static_cast<int>(i);
      worst_quiet_ms = ms;
    }
  }
  if (worst >= 0 || fresh_waiting) return worst;
  return worst_quiet;
}

int64_t next_deadline_ns(const Ranks& ranks, int64_t after) {
  int64_t next = std::numeric_limits<int64_t>::max();
  for (const RankView& s : ranks) {
    if (!waiting_with_deadline(s)) continue;
    const int64_t start = s.last_hb_ns - static_cast<int64_t>(s.beat.age_ms * 1e6);
    const int64_t due = start + static_cast<int64_t>(s.beat.deadline_s * 1e9);
    if (due > after) next = std::min(next, due);
  }
  return next;
}

namespace {

std::string verdict_line(const nlohmann::json& v);

nlohmann::json missing_of_rank(const nlohmann::json& v, size_t rank) {
  for (const auto& m : v["missing"])
    if (m["rank"].get<size_t>() == rank) return m;
  return nullptr;
}

// When rank 0 froze: its last beat, or, resumed and beating again, the start of the clock jump
// its coordinator found (frozen_ns).
int64_t root_froze_ns(const RankView& r0, int64_t now) {
  return r0.frozen_ns >= kSilentNs ? std::min(r0.last_hb_ns, now - r0.frozen_ns) : r0.last_hb_ns;
}

// Rank i connected, alive and silent, its last beat no earlier than rank 0 froze (give or take
// kSilentNs): the coordinator (in rank 0's process) stopped hearing it then.
bool unheard_since_root(const Ranks& ranks, size_t i, int64_t now) {
  const RankView& s = ranks[i];
  return i != 0 && s.hello && !s.dead && silent(s, now) && s.last_hb_ns >= root_froze_ns(ranks[0], now) - kSilentNs;
}

// The verdict judged from rank `stuck`'s operation, `after_s` into the wait.
nlohmann::json verdict_from(const Ranks& ranks, int stuck, double after_s, int64_t now, double run_timeout_s) {
  const RankView& ref = ranks[static_cast<size_t>(stuck)];
  const Beat& rb = ref.beat;
  const int64_t progress_window =
      std::min<int64_t>(kProgressWindowNs, static_cast<int64_t>(run_timeout_s * 5e8));  // half the timeout
  nlohmann::json missing = nlohmann::json::array(), mismatch = nlohmann::json::array(),
                 arrived = nlohmann::json::array();
  // Ranks are matched by their collective number (cseq) on the communicator: seq also counts
  // the sends and receives only some ranks make, so the same seq can be different collectives
  // on two ranks (and the same collective different seqs). Only a pairwise reference is matched
  // by seq, as nothing better is known of its peer.
  const bool by_seq = point_to_point(rb.coll);
  const uint64_t ref_no = by_seq ? rb.seq : rb.cseq;
  // Rank 0 runs the coordinator: when its own heartbeat (sent from the same process) is silent,
  // the process was stopped or frozen (SIGSTOP, a debugger, a starved host), and the coordinator
  // heard nobody meanwhile. Then rank 0 is the one to name; the ranks that went quiet no earlier
  // than it did (give or take kSilentNs) are judged by their last beat, not as stuck.
  const bool root_frozen = frozen_root(ranks, now);
  // A communicator made by split/shrink whose members announced it: only they are judged.
  auto member = [&](const RankView& s) { return std::find(s.comms.begin(), s.comms.end(), rb.comm) != s.comms.end(); };
  const bool members_known = std::any_of(ranks.begin(), ranks.end(), member);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankView& s = ranks[i];
    const Beat& b = s.beat;
    if (members_known && !member(s)) continue;
    nlohmann::json who = {{"rank", i}, {"host", s.host}, {"pid", s.pid}};
    const uint64_t no = by_seq ? b.seq : b.cseq;
    const bool same_op = b.in_flight && b.comm == rb.comm && no == ref_no && (by_seq || !point_to_point(b.coll));
    // Past it: a later number, or the same one and no longer in it (finished, or in a send or
    // receive after it).
    const bool past = b.comm == rb.comm && (no > ref_no || (!by_seq && no == ref_no && !same_op));
    const bool unheard = root_frozen && unheard_since_root(ranks, i, now);
    if (!s.hello) {
      who["state"] = "never connected";
    } else if (s.dead) {
      who["state"] = "dead";
      who["detail"] = "process gone (connection closed)";
    } else if (root_frozen && i == 0) {
      who["state"] = "stuck";
      who["detail"] = s.frozen_ns >= kSilentNs
                          ? "stopped or frozen for " + std::to_string(s.frozen_ns / 1000000) +
                                " ms (the coordinator, which runs in its process, found its own clock jumped by that "
                                "much)"
                          : "no heartbeat for " + std::to_string((now - s.last_hb_ns) / 1000000) +
                                " ms (stopped or frozen; rank 0 runs the coordinator, which stopped with it, so the "
                                "other ranks were not heard meanwhile)";
    } else if (unheard && (same_op || past || s.progress_ns >= root_froze_ns(ranks[0], now) - progress_window)) {
      // Its last beat, before rank 0 froze, had it there, or starting operations then (behind:
      // a stale beat, as a tight loop runs dozens of barriers between two), and nothing since.
      arrived.push_back(i);
      continue;
    } else if (ranks[0].frozen_ns >= kSilentNs && i != 0 && b.in_flight && b.comm == rb.comm && no < ref_no &&
               !silent(s, now)) {
      // Rank 0 was found frozen: a live rank still in an earlier collective of the same
      // communicator waits for rank 0's part of it (a barrier that rank 0 has left may still
      // need its messages elsewhere), not for anyone else.
      arrived.push_back(i);
      continue;
    } else if (silent(s, now) && !unheard) {
      const std::string quiet = "no heartbeat for " + std::to_string((now - s.last_hb_ns) / 1000000) + " ms";
      if (s.orphaned_by >= 0) {
        who["state"] = "unreachable";
        who["detail"] = quiet + " since its host leader (rank " + std::to_string(s.orphaned_by) +
                        ") was lost, and it did not reconnect";
      } else {
        who["state"] = "stuck";
        who["detail"] = quiet + " (stopped or frozen)";
      }
    } else if (same_op && (b.coll != rb.coll || b.bytes != rb.bytes)) {
      mismatch.push_back({{"rank", i}, {"host", s.host}, {"op", b.coll}, {"seq", b.seq}, {"bytes", b.bytes}});
      continue;
    } else if (same_op) {
      arrived.push_back(i);
      continue;
    } else if (past) {
      arrived.push_back(i);  // already past it (e.g. a rooted op's early finisher)
      continue;
    } else if (busy_in_lua(s, now)) {
      const double for_s = (b.lua_for_ms + static_cast<double>(now - s.last_hb_ns) * 1e-6) * 1e-3;
      char d[64];
      std::snprintf(d, sizeof d, " for %.0f s", for_s);
      who["state"] = "busy in Lua";
      who["detail"] =
          "busy in Lua at " + b.lua + d + " (last: " + b.coll + " #" + std::to_string(b.seq) + " on " + b.comm + ")";
      who["lua"] = {{"site", b.lua}, {"for_s", for_s}};
      who["last_seq"] = b.seq;
    } else {
      const bool progressing = now - s.progress_ns < progress_window;
      who["state"] = progressing ? "slow" : "stuck";
      who["detail"] = std::string(progressing ? "still progressing, " : "no progress, ") +
                      (b.in_flight ? "in " + b.coll + " #" + std::to_string(b.seq) + " on " + b.comm
                                   : "not in an operation (last: " + b.coll + " #" + std::to_string(b.seq) + ")");
      if (now - s.last_hb_ns > kFreshNs)  // what it said last is that old
        who["detail"] = who["detail"].get<std::string>() + "; no heartbeat for " +
                        std::to_string((now - s.last_hb_ns) / 1000000) + " ms";
      who["last_seq"] = b.seq;
    }
    missing.push_back(who);
  }
  // Desync: when every rank that arrived called the same thing as `ref`, but others called
  // something else at the same sequence number, list both sides.
  nlohmann::json mism = nlohmann::json::array();
  if (!mismatch.empty()) {
    mism.push_back({{"rank", stuck}, {"host", ref.host}, {"op", rb.coll}, {"seq", rb.seq}, {"bytes", rb.bytes}});
    for (auto& m : mismatch) mism.push_back(m);
  }
  nlohmann::json v = {{"kind", "timeout"},
                      {"op", rb.coll},
                      {"seq", rb.seq},
                      {"bytes", rb.bytes},
                      {"comm", rb.comm},
                      {"after_s", after_s},
                      {"timeout_s", rb.deadline_s},
                      {"missing", missing},
                      {"mismatch", mism},
                      {"arrived", arrived},
                      {"detected_by", "deadline"}};
  v["line"] = verdict_line(v);
  return v;
}

// The verdict's one line: the operation, who is missing (and why), who waits elsewhere, mismatches.
std::string verdict_line(const nlohmann::json& v) {
  const auto& missing = v["missing"];
  const auto& mism = v["mismatch"];
  char head[256];
  std::snprintf(head, sizeof head, "timeout: %s #%llu (%sB, %s) after %.1f s", v["op"].get<std::string>().c_str(),
                static_cast<unsigned long long>(v["seq"].get<uint64_t>()),
                format_size(v["bytes"].get<uint64_t>()).c_str(), v["comm"].get<std::string>().c_str(),
                v["after_s"].get<double>());
  std::string line = head;
  if (!missing.empty()) {
    line += "; missing ranks: ";
    for (size_t i = 0; i < missing.size(); ++i) {
      const auto& m = missing[i];
      line += (i ? ", " : "") + std::to_string(m["rank"].get<size_t>()) + " (host " + m["host"].get<std::string>() +
              ", " + (m.contains("lua") ? m["detail"].get<std::string>() : m["state"].get<std::string>()) + ")";
    }
  }
  if (!mism.empty()) {
    line += "; mismatch:";
    for (auto& m : mism)
      line += " rank " + std::to_string(m["rank"].get<size_t>()) + " called " + m["op"].get<std::string>() + " #" +
              std::to_string(m["seq"].get<uint64_t>()) + " (" + format_size(m["bytes"].get<uint64_t>()) + "B);";
    line.pop_back();
  }
  if (v.contains("waiting") && !v["waiting"].empty()) {
    line += "; waiting elsewhere for them: ";
    for (size_t i = 0; i < v["waiting"].size(); ++i)
      line += (i ? ", " : "") + v["waiting"][i]["detail"].get<std::string>();
  }
  return line;
}

// A missing rank that is itself waiting, alive, in an operation of another communicator whose
// members are known (split/shrink) is not the cause: the ranks missing from *that* operation
// are. Followed a few links deep; the waiting ranks are listed as such ("waiting").
void follow_waits(const Ranks& ranks, nlohmann::json& v, double after_s, int64_t now, double run_timeout_s) {
  for (int depth = 0; depth < 4; ++depth) {
    bool changed = false;
    nlohmann::json missing = nlohmann::json::array();
    for (const auto& m : v["missing"]) {
      const size_t r = m["rank"].get<size_t>();
      const RankView& s = ranks[r];
      const Beat& b = s.beat;
      const bool known = std::any_of(ranks.begin(), ranks.end(), [&](const RankView& x) {
        return std::find(x.comms.begin(), x.comms.end(), b.comm) != x.comms.end();
      });
      nlohmann::json there;
      if (s.hello && !s.dead && !silent(s, now) && b.in_flight && b.comm != v["comm"].get<std::string>() && known)
        there = verdict_from(ranks, static_cast<int>(r), after_s, now, run_timeout_s);
      if (there.is_null() || there["missing"].empty() || !missing_of_rank(there, r).is_null()) {
        missing.push_back(m);
        continue;
      }
      changed = true;
      std::string on;
      for (const auto& t : there["missing"]) {
        if (!missing_of_rank(v, t["rank"].get<size_t>()).is_null() ||
            !missing_of_rank({{"missing", missing}}, t["rank"].get<size_t>()).is_null())
          continue;
        missing.push_back(t);
        on += (on.empty() ? "" : ", ") + std::to_string(t["rank"].get<size_t>());
      }
      if (!v.contains("waiting")) v["waiting"] = nlohmann::json::array();
      v["waiting"].push_back({{"rank", r},
                              {"host", s.host},
                              {"op", b.coll},
                              {"seq", b.seq},
                              {"comm", b.comm},
                              {"detail", "rank " + std::to_string(r) + " in " + b.coll + " #" + std::to_string(b.seq) +
                                             " on " + b.comm + (on.empty() ? "" : " (missing there: " + on + ")")}});
    }
    v["missing"] = missing;
    if (!changed) break;
  }
  v["line"] = verdict_line(v);
}

}  // namespace

nlohmann::json timeout_verdict(const Ranks& ranks, int over, int64_t now, double run_timeout_s) {
  // How long: the overdue rank's wait. Judged from: the earliest blocked collective, when that
  // names anyone (a rank alone in a collective the others have all passed is judged from theirs).
  const double after_s = waited_ms(ranks[static_cast<size_t>(over)], now) * 1e-3;
  const int early = earliest_blocked(ranks, over, now);
  if (early != over) {
    nlohmann::json v = verdict_from(ranks, early, after_s, now, run_timeout_s);
    if (!v["missing"].empty() || !v["mismatch"].empty()) {
      follow_waits(ranks, v, after_s, now, run_timeout_s);
      return v;
    }
  }
  nlohmann::json v = verdict_from(ranks, over, after_s, now, run_timeout_s);
  follow_waits(ranks, v, after_s, now, run_timeout_s);
  return v;
}

nlohmann::json never_connected(const Ranks& ranks, int64_t now, int64_t start_ns, double run_timeout_s) {
  if (run_timeout_s <= 0 || static_cast<double>(now - start_ns) * 1e-9 <= run_timeout_s) return nullptr;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (!ranks[i].hello)
      return {{"kind", "timeout"},
              {"line", "timeout: rank " + std::to_string(i) + " never reached the coordinator within " +
                           std::to_string(static_cast<int>(run_timeout_s)) + " s"},
              {"missing", nlohmann::json::array({{{"rank", i}, {"state", "never connected"}}})}};
  return nullptr;
}

nlohmann::json desync_verdict(const Ranks& ranks, int64_t now, DesyncMemo& memo) {
  // (comm, collective number) -> call -> ranks
  std::map<std::pair<std::string, uint64_t>, std::map<std::string, std::vector<int>>> at;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankView& s = ranks[i];
    const Beat& b = s.beat;
    if (!s.hello || s.dead || !b.in_flight || b.dtype < 0 || point_to_point(b.coll) || silent(s, now)) continue;
    std::string call = b.coll;
    if (b.coll != "barrier") call += " count=" + std::to_string(b.count) + " " + dtype_text(b.dtype);
    at[{b.comm, b.cseq}][call].push_back(static_cast<int>(i));  // cseq: what all ranks agree on
  }
  for (const auto& [key, calls] : at) {
    if (calls.size() < 2) continue;
    const std::string k = key.first + "#" + std::to_string(key.second);
    if (memo.key != k) {
      memo.key = k;
      memo.seen_ns = now;
    }
    if (now - memo.seen_ns < kDesyncSettleNs) return nullptr;
    std::string line = "desync: " + key.first + " collective #" + std::to_string(key.second) +
                       ": the ranks called different operations";
    nlohmann::json sides = nlohmann::json::array(), mism = nlohmann::json::array();
    std::vector<bool> on_side(ranks.size(), false);
    for (const auto& [call, rs] : calls) {
      // Within a side, ranks by call site.
      std::map<std::string, std::vector<int>> by_site;
      for (int r : rs) {
        const std::string& site = ranks[static_cast<size_t>(r)].beat.site;
        by_site[site.empty() ? "?" : site].push_back(r);
        on_side[static_cast<size_t>(r)] = true;
      }
      std::string who;
      for (const auto& [site, ids] : by_site) {
        who += (who.empty() ? "" : ", ") + std::string(ids.size() > 1 ? "ranks " : "rank ");
        for (size_t i = 0; i < ids.size(); ++i) who += (i ? ", " : "") + std::to_string(ids[i]);
        who += " at " + site;
      }
      line += "; " + who + " called " + call;
      nlohmann::json members = nlohmann::json::array();
      for (int r : rs) {
        const RankView& s = ranks[static_cast<size_t>(r)];
        members.push_back({{"rank", r}, {"host", s.host}, {"site", s.beat.site}});
        mism.push_back({{"rank", r},
                        {"host", s.host},
                        {"op", s.beat.coll},
                        {"seq", s.beat.seq},
                        {"cseq", s.beat.cseq},
                        {"bytes", s.beat.bytes},
                        {"count", s.beat.count},
                        {"dtype", dtype_text(s.beat.dtype)},
                        {"site", s.beat.site}});
      }
      sides.push_back({{"call", call}, {"ranks", members}});
    }
    nlohmann::json elsewhere = nlohmann::json::array();
    std::string others;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (on_side[i]) continue;
      const RankView& s = ranks[i];
      const Beat& b = s.beat;
      const std::string where = !s.hello ? "never connected"
                                : s.dead ? "dead"
                                : b.in_flight
                                    ? "in " + b.coll + " #" + std::to_string(b.seq) + " on " + b.comm
                                    : "not in an operation (last: " + b.coll + " #" + std::to_string(b.seq) + ")";
      elsewhere.push_back({{"rank", i}, {"host", s.host}, {"state", where}});
      others += (others.empty() ? "" : ", ") + std::to_string(i) + " (" + where + ")";
    }
    if (!others.empty()) line += "; elsewhere: rank " + others;
    return {{"kind", "desync"},   {"elsewhere", elsewhere},
            {"line", line},       {"comm", key.first},
            {"cseq", key.second}, {"sides", sides},
            {"mismatch", mism},   {"detected_by", "heartbeat (call verification)"}};
  }
  return nullptr;
}

std::string waiting_note(const Ranks& ranks, int64_t now, WaitMemo& memo, double run_timeout_s) {
  // The longest wait among the ranks in an operation.
  int longest = -1;
  double longest_ms = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankView& s = ranks[i];
    if (!s.hello || s.dead || !s.beat.in_flight) continue;
    const double ms = waited_ms(s, now);
    if (ms > longest_ms) {
      longest = static_cast<int>(i);
      longest_ms = ms;
    }
  }
  if (longest < 0) return {};
  const Beat& ref = ranks[static_cast<size_t>(longest)].beat;
  // A fraction of the deadline, at least kWaitNoteMinS; then again every such interval.
  const double every_s = std::max(kWaitNoteMinS, ref.deadline_s > 0 ? ref.deadline_s * kWaitNoteFraction : 0.0);
  const std::string op = ref.comm + "#" + std::to_string(ref.seq);
  if (longest_ms * 1e-3 < every_s) return {};
  if (op == memo.op && static_cast<double>(now - memo.noted_ns) * 1e-9 < every_s) return {};
  memo.op = op;
  memo.noted_ns = now;
  const nlohmann::json v = timeout_verdict(ranks, longest, now, run_timeout_s);
  std::string arrived, missing;
  for (const auto& a : v["arrived"]) arrived += (arrived.empty() ? "" : ", ") + std::to_string(a.get<size_t>());
  for (const auto& m : v["missing"]) {
    missing += (missing.empty() ? "" : "; ") + std::to_string(m["rank"].get<size_t>()) + " (host " +
               m.value("host", std::string("?")) + ", " + m.value("state", std::string("?"));
    if (m.contains("detail")) missing += ": " + m["detail"].get<std::string>();
    missing += ")";
  }
  char head[512];
  std::snprintf(
      head, sizeof head, "waiting %.0f s in %s #%llu (%sB, %s)%s", longest_ms * 1e-3, ref.coll.c_str(),
      static_cast<unsigned long long>(ref.seq), format_size(ref.bytes).c_str(), ref.comm.c_str(),
      ref.deadline_s > 0 ? (", deadline " + std::to_string(static_cast<long>(ref.deadline_s)) + " s").c_str() : "");
  return std::string(head) + "; arrived: " + (arrived.empty() ? "none" : arrived) +
         "; missing: " + (missing.empty() ? "none" : missing);
}

std::string launcher_aftermath(const std::string& launcher) {
  if (launcher == "env")
    return "the launcher (--launcher env) sees its exit status; nothing ends the other ranks for it: they go on or "
           "give up at their deadline";
  if (launcher == "slurm") return "srun (--launcher slurm) sees its exit status and may end the other tasks";
  return "mpirun ends the job with its exit status";
}

nlohmann::json death_incident(const Ranks& ranks, int rank, const std::string& launcher) {
  const RankView& d = ranks[static_cast<size_t>(rank)];
  return {
      {"kind", "rank_died"},
      {"dead_ranks", nlohmann::json::array({{{"rank", rank}, {"host", d.host}, {"pid", d.pid}}})},
      {"last_op", {{"op", d.beat.coll}, {"seq", d.beat.seq}, {"comm", d.beat.comm}, {"in_flight", d.beat.in_flight}}},
      {"message", "rank " + std::to_string(rank) + " (host " + d.host + ", pid " + std::to_string(d.pid) +
                      ") died during the run (its connection closed without a goodbye) after " + d.beat.coll + " #" +
                      std::to_string(d.beat.seq) + "; " + launcher_aftermath(launcher)},
      {"detected_by", "heartbeat"}};
}

}  // namespace cs::coord
