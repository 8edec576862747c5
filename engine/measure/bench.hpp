#pragma once
// Timed loops, in C++ only (docs/timing.md). Two measurements of one operation, never mixed:
//  - the headline, the way nccl-tests, OSU and IMB take it: warm-up, barrier, `iters` calls back
//    to back timed as a whole by Communicator::time_loop_us(), divided by `iters` on every rank;
//    then the mean over ranks (nccl-tests -a 1, OSU's "Avg Latency", IMB t_avg), with the min
//    and max over ranks (IMB t_min/t_max). algbw and busbw come from that mean.
//  - the distribution: a separate sampled pass after a second barrier, one clock read (or a
//    pair of CUDA events) per iteration on every rank; per iteration the slowest rank counts
//    (nccl-tests -I), and each rank's own mean per-iteration time feeds the straggler vote. The
//    same samples averaged over ranks per iteration (nccl-tests' -a 1 applied per iteration) are
//    a second summary: in a pipelined loop the ranks' per-iteration times alternate in opposite
//    phase, so the slowest rank's reads high at small sizes where the average does not.
//    Its clock reads and bookkeeping never reach the headline.
#include <cstdint>
#include <vector>

#include "communicator.hpp"
#include "stats.hpp"

namespace cs {

// How the check fills and counts (the verdicts are the same; bench_check.hpp): fast, the
// default, fills and compares tile by tile; reference fills a whole host copy, copies it to the
// buffer, and copies the whole result back to compare every element with its recomputed
// expected value (the method before issue 22; the baseline of tests/bench/check_cost.lua).
enum class CheckMethod { fast, reference };

struct BenchSpec {
  int warmup = 5;
  int iters = 20;     // headline loop
  bool check = true;  // fill with the pattern, run once more after timing and count wrong elements
  int samples = 20;   // sampled pass (per-iteration times), >= 1
  CheckMethod check_method = CheckMethod::fast;
};

struct BenchResult {
  // Headline (whole-loop time / iters).
  double time_us = 0;                // mean over ranks of each rank's loop time / iters
  double time_rank_min_us = 0;       // min over ranks of the same
  double time_rank_max_us = 0;       // max over ranks of the same
  std::vector<double> rank_time_us;  // per rank: its loop time / iters
  double algbw = 0, busbw = 0;       // GB/s (1e9), from time_us
  // Sampled pass.
  std::vector<double> iter_us;       // per sampled iteration, max over ranks
  Summary us;                        // of iter_us
  std::vector<double> iter_avg_us;   // per sampled iteration, mean over ranks
  Summary us_avg;                    // of iter_avg_us
  std::vector<double> rank_mean_us;  // per rank: its own mean per-iteration time
  int slowest_rank = 0;              // highest rank_mean_us
  // Check.
  uint64_t wrong = 0;  // summed over ranks (0 when not checked)
  std::vector<uint64_t> wrong_by_rank;
  bool checked = false;
  // What the check cost outside the timed regions, the slowest rank's of each (0 when not
  // checked): filling the inputs (before the headline loop and again after it), running the
  // operation once more, and copying and comparing its result.
  double check_fill_us = 0, check_run_us = 0, check_compare_us = 0;
};

// The send and receive buffers of one timed collective, allocated where `comm` wants them. For
// in-place runs both are views of one buffer laid out as NCCL defines it: allgather/gather
// send = recv + rank x count; reduce_scatter/scatter recv = send + rank x count; otherwise the
// same buffer.
struct BenchBuffers {
  Tensor send, recv;
};
BenchBuffers bench_buffers(const Communicator& comm, Collective coll, size_t count, DType dtype, bool inplace);

// `op` must have been made by make_op for `comm` over the views `send`/`recv` (for in-place
// variants, views of one buffer laid out as NCCL defines it). Allocates nothing and
// calls nothing but the operation and the clock inside the timed loop.
BenchResult bench(Communicator& comm, const Op& op, Tensor& send, Tensor& recv, const BenchSpec& spec);

// Ping-pong between this rank and `peer`, as osu_latency: `warmup` untimed round trips, then
// `iters` round trips timed as a whole; latency = total / (2 x iters). The rank with the lower
// number sends first. Then a sampled pass of `samples` round trips, each timed (half the round
// trip), for the distribution. Both ranks return their own figures (OSU prints the sender's).
// `buf` is what is sent; messages are received into a second buffer of the same size, allocated
// here before anything is timed, as osu_latency's s_buf/r_buf.
struct PingPongResult {
  double latency_us = 0;  // headline: loop time / (2 x iters)
  Summary us;             // sampled pass: per round trip / 2
};
PingPongResult pingpong(Communicator& comm, int peer, Tensor& buf, int warmup, int iters, int samples);

// Streaming bandwidth to `peer`, as osu_bw: per iteration `window` messages of buf, then a
// 1-byte acknowledgement from the receiver; `warmup` untimed iterations, then `iters` timed as
// a whole. Returns GB/s (1e9) as this rank measured it (OSU reports the sender's). The sends are
// blocking calls back to back where osu_bw posts the window as MPI_Isend + MPI_Waitall.
double stream_bandwidth(Communicator& comm, int peer, bool sender, Tensor& buf, Tensor& ack, int window, int warmup,
                        int iters);

// A sendrecv of `bytes` with `peer` (each sends to the other at once): `warmup` untimed
// exchanges, then `iters` (>= 1) each timed alone, on the device's clock where the communicator
// times there. Only this rank and `peer` call it: pairs measure on the world (or any
// communicator) without a communicator of their own, and other pairs may measure at the same
// time. Sizes that differ between the two are a desync (agree_with_peer).
struct PairBenchResult {
  double min_us = 0, p50_us = 0, mean_us = 0, max_us = 0;  // over the timed exchanges
};
PairBenchResult pair_bench(Communicator& comm, int peer, size_t bytes, int warmup, int iters);

// Host memory-copy bandwidth (GB/s, 1e9): memcpy of `bytes` between two buffers, best of
// `iters` timed copies after one untimed. The physical ceiling of shared-memory transport.
// max_s > 0: stop after that many seconds of copying (at least one copy), the best so far.
double memcpy_bandwidth(size_t bytes, int iters, double max_s = 0);

}  // namespace cs
