#pragma once
// The interface every backend implements (mpi, self; nccl when built). All operations enter
// through execute(), which numbers them and records them for the watchdog.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "error.hpp"
#include "op.hpp"
#include "progress.hpp"

namespace cs {

// Where an untimed operation was called from (the recipe's file:line), asked for only when
// call verification finds a disagreement: nothing is formatted on the common path.
struct CallSite {
  std::string (*fn)(void* ctx) = nullptr;
  void* ctx = nullptr;
  std::string where() const { return fn ? fn(ctx) : std::string("?"); }
};

// Code that must see every operation before and after the backend runs it (fault injection,
// control/chaos.hpp) installs one of these; the communicator layer knows nothing else about it.
class OpHook {
 public:
  virtual ~OpHook() = default;
  // Before the operation is recorded as started; may change `op` (what this rank calls).
  virtual void before(Op& op, uint64_t seq, std::string_view comm) = 0;
  virtual void after(const Op& op, uint64_t seq, int64_t start_ns) = 0;
};

// Process-wide traffic counters (the cost model, docs/lua-api.md, cs.traffic): every operation
// executed on any communicator of this process, and the payload bytes this rank handed to them
// (the send side of collective_counts: nccl-tests' size for a collective, the message for a
// send, nothing for a recv). Relaxed atomics: two adds per operation.
struct Traffic {
  std::atomic<uint64_t> ops{0}, bytes_sent{0};
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  const std::string& name() const { return name_; }
  uint64_t seq() const { return seq_; }  // operations executed on this communicator
  // Collectives executed on it (send, recv and sendrecv not counted): unlike seq(), the same on
  // every rank at the same point of a correct program, so what the coordinator matches ranks by.
  uint64_t cseq() const { return cseq_; }

  // Runs one operation (already checked by make_op). Returns its start time in ns. With a hook
  // installed the operation goes through it; otherwise the cost over the backend call is one
  // predictable branch and the flight-recorder stores.
  //
  // With a call site (the untimed, Lua-level operations) and call verification on, the ranks
  // first agree that they all call the same thing (see verify()); the wait for that agreement
  // is part of the operation, under its deadline and visible to the watchdog.
  int64_t execute(const Op& op, const CallSite* site = nullptr) {
    count(op);
    if (OpHook* h = hook_.load(std::memory_order_relaxed)) [[unlikely]]
      return execute_with_hook(*h, op, site);
    const int64_t t0 = Progress::instance().begin(++seq_, next_cseq(op.coll), op.coll, op.bytes(), name_, timeout_s_,
                                                  op.count, static_cast<int32_t>(op.dtype));
    if (site && verify_) verify(op, *site);
    run(op);
    Progress::instance().end();
    return t0;
  }

  // Call verification: every rank of the communicator checks that the others call the same
  // operation with the same count, dtype, reduction and root (sendrecv: that each peer sends
  // the count this rank receives) before any data moves, because MPI libraries crash rather
  // than report such a mismatch. A call identical to the last one verified on this
  // communicator (a loop) is not exchanged again: all ranks agreed on that signature, so a
  // rank whose call differs from it verifies while the others go ahead; it waits in the
  // verification exchange (a channel of its own, never matched with the operation) and the
  // watchdog, which sees both sides at the same sequence number in their heartbeats, reports
  // the desync at once. A new signature costs one 16 B control-plane all-reduce (sendrecv:
  // a 16 B exchange with the two peers). A disagreement found here throws Error(timeout)
  // whose message is one line naming every rank on each side and each rank's call site.
  // send/recv are not verified. Does nothing on a communicator of one rank or when off.
  void verify(const Op& op, const CallSite& site);
  // The two sides of a measured pair (pingpong, stream, pair_bench: both ranks call it with each
  // other as peer) agree on the message's size and dtype before anything moves: sides that
  // disagreed corrupted the heap (MPI) or aborted in Gloo's thread. Throws Error(timeout), a
  // desync naming both ranks and both sizes. Always on (a 16 B exchange before a timed loop).
  void agree_with_peer(int peer, size_t count, DType dtype, const char* what);
  bool verifying() const { return verify_; }
  void set_verify(bool on) {
    verify_ = on;
    have_verified_ = false;
  }

  // The process-wide operation hook (nullptr: none). Installed by whoever owns it.
  static void set_hook(OpHook* h) { hook_.store(h, std::memory_order_relaxed); }
  static bool hooked() { return hook_.load(std::memory_order_relaxed) != nullptr; }

  // The deadline of each operation in seconds (0: none). A backend that waits by polling gives
  // up `local_grace_s` later than that on its own, leaving the first word to the coordinator.
  double timeout_s() const { return timeout_s_; }
  // Virtual: a backend with a control plane of its own (NCCL's MPI) passes the deadline on.
  virtual void set_timeout(double s, double local_grace_s) {
    timeout_s_ = s;
    local_grace_s_ = local_grace_s;
  }
  // The same with the process-wide grace (set_judge_grace).
  void set_timeout(double s) { set_timeout(s, judge_grace_s_.load(std::memory_order_relaxed)); }
  // The one policy for the grace above: how long the out-of-band judge (the coordinator) gets
  // to name missing ranks before a rank gives up on its own (0 when there is no judge).
  static void set_judge_grace(double s) { judge_grace_s_.store(s, std::memory_order_relaxed); }

  // Device timing hook for bench()'s sampled pass: a backend whose timed operations run on a GPU
  // returns true, and bench() then takes each sampled iteration's time from timed_execute_us()
  // (CUDA events around the operation) instead of the host clock around execute(). The headline
  // loop is timed by time_loop_us() either way.
  virtual bool device_timing() const { return false; }
  // Whether run() posts an Op's `window` sends/receives nonblocking and waits for them together
  // (osu_bw's window). Otherwise a caller repeats the call `window` times.
  virtual bool windowed_p2p() const { return false; }
  // Runs `op` through execute() and returns its device time in us. Only called when
  // device_timing() is true.
  virtual double timed_execute_us(const Op& op) {
    const int64_t t0 = execute(op);
    return static_cast<double>(now_ns() - t0) * 1e-3;
  }

  // Runs `op` `iters` times back to back (no per-iteration synchronisation) and returns the
  // total elapsed time in microseconds by the backend's clock (host steady clock by default:
  // time_steps_us with one step).
  virtual double time_loop_us(const Op& op, size_t iters);

  // One step of a timed loop: `repeat` calls of `*op` (made by make_op for this communicator).
  struct TimedStep {
    const Op* op = nullptr;
    uint32_t repeat = 1;
  };
  // Runs `iters` iterations of `steps` (each step's calls in order) back to back between two reads
  // of the host steady clock and returns the elapsed us: a ping-pong is {send, recv}, a streaming
  // window {send x window, recv}. Allocates nothing and calls nothing but the operations.
  // Without an operation hook the bookkeeping is done once for the loop, not per call: one
  // Progress record (begin_loop) that the watchdog, the heartbeats and the flight recorder read
  // as the loop's current operation, the sequence number advanced per call as execute() would,
  // and per call nothing but two stores and run(). With a hook installed (a chaos plan) every
  // call goes through execute(), so the hook sees each operation. Not call-verified (verify the
  // operation once before the loop, as comm:bench does).
  double time_steps_us(const TimedStep* steps, size_t nsteps, size_t iters);

  // A buffer where this backend's operations expect their data: host memory by default, the
  // rank's GPU for NCCL.
  virtual Tensor alloc(DType dtype, size_t count) const { return Tensor::host(dtype, count); }

  // A new communicator of the ranks that passed the same color, ordered by key; nullptr for a
  // rank that passed a negative color. It inherits this communicator's deadline.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Surviving a dropped rank (Gloo; other backends refuse with why). revoke(): this rank gives
  // up on the communicator (its operations fail from now on, and peers blocked with it are
  // released). survivors(): this communicator's ranks still alive as far as the backend knows.
  // shrink(exclude): a collective of the survivors, a new communicator without `exclude`
  // (ranks of this communicator; each must be gone, and not all of them).
  virtual void revoke() { throw InputError(backend() + ": " + no_shrink_reason()); }
  virtual std::vector<int> survivors() { throw InputError(backend() + ": " + no_shrink_reason()); }
  virtual std::unique_ptr<Communicator> shrink(const std::vector<int>&) {
    throw InputError(backend() + ": " + no_shrink_reason());
  }
  // The communicator that shrink() made of this one's survivors, once a caller adopted it: the
  // run's agreements and result gathering move on to it after the recipe.
  void set_successor(std::shared_ptr<Communicator> c) { successor_ = std::move(c); }
  std::shared_ptr<Communicator> successor() const { return successor_; }
  virtual std::string no_shrink_reason() const {
    return "cannot survive a dropped rank (no revoke/shrink in this backend)";
  }
  // Empty when this backend's operations handle dtype t; otherwise why not and what to use
  // instead (make_op refuses the operation with it: exit 1).
  virtual std::string dtype_refusal(DType) const { return {}; }

  static Traffic& traffic() { return traffic_; }

  // Control-plane helpers for result gathering (not numbered, not timed).
  virtual void allreduce_max(std::vector<double>& v) = 0;
  virtual void allreduce_sum(std::vector<uint64_t>& v) = 0;
  virtual std::vector<double> allgather(double v) = 0;
  virtual std::vector<std::string> allgather(const std::string& s) = 0;
  virtual std::string broadcast(const std::string& s, int root) = 0;
  // Every rank's string on `root` (the others get an empty list). The default allgathers and
  // keeps the result on root (O(n) on every rank); MPI gathers (O(1) on the others).
  virtual std::vector<std::string> gather(const std::string& s, int root);
  // Sends `n` bytes to rank `to` and receives `n` bytes from rank `from` on the control plane
  // (not numbered, not timed, under the deadline); used by sendrecv's verification.
  // The default serves a communicator of one rank.
  virtual void exchange(int to, const void* out, int from, void* in, size_t n);
  // Maximum over the ranks on a channel that no numbered operation uses (call verification);
  // the default uses allreduce_max.
  virtual void verify_max(std::vector<double>& v) { allreduce_max(v); }

 protected:
  explicit Communicator(std::string name) : name_(std::move(name)) {}
  virtual void run(const Op& op) = 0;

  // time_steps_us's loop without a hook: the bookkeeping once for the loop, and per call the
  // sequence number, Progress::loop_op and `call(op)`. A backend's time_loop_us passes a `call`
  // with its arguments prepared before the loop (no virtual run(), no per-call dispatch); the
  // generic path passes run(). nsteps <= Progress::kLoopKinds, no hook installed (time_steps_us
  // checks both). Returns the elapsed us between the two clock reads.
  template <class Call>
  double loop_steps(const TimedStep* steps, size_t nsteps, size_t iters, Call&& call);

 private:
  int64_t execute_with_hook(OpHook& h, const Op& op, const CallSite* site);
  void count_loop(const TimedStep* steps, size_t nsteps, uint64_t per_iter, uint64_t k);
  static void count(const Op& op) {
    const uint64_t w = static_cast<uint64_t>(op.window > 1 ? op.window : 1);
    traffic_.ops.fetch_add(w, std::memory_order_relaxed);
    traffic_.bytes_sent.fetch_add(w * collective_counts(op.coll, op.count, op.nranks).send * dtype_size(op.dtype),
                                  std::memory_order_relaxed);
  }
  static inline std::atomic<OpHook*> hook_{nullptr};
  static inline Traffic traffic_{};
  static inline std::atomic<double> judge_grace_s_{0};

 protected:
  double timeout_s_ = 0, local_grace_s_ = 0;
  bool verify_ = true;
  bool have_verified_ = false;
  uint64_t verified_ = 0;  // the fingerprint of the last call all ranks agreed on
  std::string name_;
  std::shared_ptr<Communicator> successor_;
  uint64_t seq_ = 0;
  uint64_t cseq_ = 0;
  uint64_t next_cseq(Collective c) { return collective_is_pairwise(c) ? cseq_ : ++cseq_; }
};

template <class Call>
double Communicator::loop_steps(const TimedStep* steps, size_t nsteps, size_t iters, Call&& call) {
  LoopKind kinds[Progress::kLoopKinds];
  uint64_t per_iter = 0;
  for (size_t s = 0; s < nsteps; ++s) {
    const Op& op = *steps[s].op;
    kinds[s] = LoopKind{op.coll, op.bytes(), op.count, static_cast<int32_t>(op.dtype), steps[s].repeat};
    per_iter += steps[s].repeat;
  }
  if (per_iter == 0) return 0;
  Progress& p = Progress::instance();
  const uint64_t first = seq_ + 1;
  p.begin_loop(first, cseq_, kinds, nsteps, name_, timeout_s_);
  uint64_t k = 0;  // calls started
  int64_t t0 = 0, t1 = 0;
  try {
    t0 = now_ns();
    for (size_t i = 0; i < iters; ++i)
      for (size_t s = 0; s < nsteps; ++s) {
        const Op& op = *steps[s].op;
        for (uint32_t r = 0; r < steps[s].repeat; ++r) {
          seq_ = first + k;  // what a backend's error message names, as in execute()
          p.loop_op(k++);
          call(op);
        }
      }
    t1 = now_ns();
  } catch (...) {
    p.end_loop(k, /*failed=*/true);
    count_loop(steps, nsteps, per_iter, k);
    throw;
  }
  p.end_loop(k);
  count_loop(steps, nsteps, per_iter, k);
  return static_cast<double>(t1 - t0) * 1e-3;
}

}  // namespace cs
