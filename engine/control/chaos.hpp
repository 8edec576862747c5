#pragma once
// Fault injection at the engine's operation entry point, the same for every backend
// (docs/hangs-chaos-replay.md, "Chaos injection"). A plan is a list of rules; each rule selects operations by rank,
// kind of operation, sequence number, period, probability and duration, and does one thing to them:
//   delay   sleep `ms` (+ uniform jitter up to `jitter_ms`) before the operation
//   slow    after the operation, sleep (factor - 1) x its duration: the rank's transfers take
//           `factor` times as long
//   hang    the rank stops arriving: it never starts the operation (sleeps until killed)
//   exit    the rank dies with `status` (nonzero) before the operation; with kill = true it
//           SIGKILLs its own process instead (no goodbye: a dropped rank the others may survive)
//   corrupt flip one bit in `elements` elements of the rank's result, with `probability`
//   desync  the rank calls a different operation (`op`, default "barrier") or, with `factor`,
//           a smaller count (count x factor); once unless `limit` says otherwise
// Every injection that fires is recorded (what, where, when) for the report.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace cs {

enum class ChaosKind : uint8_t { delay, slow, hang, exit, corrupt, desync };

struct ChaosRule {
  ChaosKind kind = ChaosKind::delay;
  std::set<int> ranks;           // empty: every rank
  std::set<Collective> ops;      // empty: every operation
  uint64_t after = 0;            // fire only on operations with seq > after
  uint64_t every = 1;            // ... and only every N-th eligible one
  double probability = 1.0;      // ... with this probability (seeded)
  double duration_s = 0;         // stop firing this long after the first firing (0: forever)
  double ms = 0, jitter_ms = 0;  // delay
  double factor = 0;             // slow (default 2), desync (count factor, default 0.5)
  int status = 99;               // exit (not one of commscript's own exit codes)
  bool kill = false;             // exit: SIGKILL this process instead of exiting
  uint64_t elements = 1;         // corrupt: elements whose bit is flipped
  std::string desync_op;         // desync: call this operation instead (e.g. "barrier")
  uint64_t limit = 0;            // fire at most this many times (0: no limit; hang/exit: 1)
};

// Parses a rule from the config's [[chaos]] tables / cs.chaos.inject{...}; throws InputError
// naming the field.
ChaosRule chaos_rule_from_json(const nlohmann::json& j);
std::string_view chaos_kind_name(ChaosKind k);
// Throws InputError when `r` names a rank a job of `size` ranks does not have (issue 33: a
// repro written for 8 ranks, run on 4, "did not reproduce" in silence). size <= 0: unknown.
void check_chaos_ranks(const ChaosRule& r, int size);

class Chaos final : public OpHook {
 public:
  static Chaos& instance();

  void set_identity(int rank, std::string host);
  // The run's deadline (0: none) and the grace its watchdog allows: a hang or delay this rank
  // injects into itself lasts at most that long, then the run ends with a timeout (exit 5) as a
  // watchdog's would (`end_process` false, embedded: the run is cancelled with code 5 instead).
  // Without it, a hang on --backend self, where no other rank waits, never ended.
  void set_deadline(double deadline_s, double grace_s, bool end_process);
  // A run's plan, for a job of `size` ranks; add() (cs.chaos.inject) refuses a rule naming a
  // rank the job does not have.
  void install(std::vector<ChaosRule> rules, uint64_t seed, int size = 0);
  void add(ChaosRule rule);
  void clear();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Called by Communicator::execute around the backend's run(). `op` may be replaced (desync).
  // Returns true when the operation must be skipped entirely (never happens: hang never returns).
  void before(Op& op, uint64_t seq, std::string_view comm) override;
  void after(const Op& op, uint64_t seq, int64_t start_ns) override;

  // Injections that fired on this rank, oldest first.
  nlohmann::json fired() const;
  // Called (from the injecting thread) for each injection as it fires, e.g. to stream it to the
  // coordinator before a hang or an exit.
  void on_fire(std::function<void(const nlohmann::json&)> f);
  // Called (from the injecting thread) when an `exit` fires, before the process ends: the run
  // saves report.json with the status as its exit code (issue 30: the guardian wrote a partial
  // report with none, after the process had left).
  void on_exit(std::function<void(int status, const std::string& message)> f);

 private:
  struct Armed {
    ChaosRule rule;
    uint64_t eligible = 0, fired = 0;
    int64_t first_ns = 0;
  };
  bool selects(Armed& a, const Op& op, uint64_t seq, ChaosKind phase_kind);
  void record(const ChaosRule& r, const Op& op, uint64_t seq, std::string_view comm, nlohmann::json extra);
  // Sleeps `ms` (forever: until the job is ended or the run cancelled), at most until the
  // deadline; past it, the timeout.
  void hold(double ms, bool forever, const Op& op, uint64_t seq, std::string_view comm, const char* kind);

  mutable std::mutex mu_;
  std::vector<Armed> rules_;
  std::mt19937_64 rng_;
  std::atomic<bool> active_{false};
  int rank_ = 0;
  int size_ = 0;  // the job's ranks (0: unknown)
  std::string host_;
  std::atomic<double> deadline_s_{0}, grace_s_{0};
  std::atomic<bool> end_process_{true};
  nlohmann::json fired_ = nlohmann::json::array();
  std::function<void(const nlohmann::json&)> on_fire_;
  std::function<void(int, const std::string&)> on_exit_;
  std::string comm_;  // of the op in flight, for after()
};

}  // namespace cs
