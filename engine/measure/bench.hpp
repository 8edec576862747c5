#pragma once
// Timed loops, in C++ only: warm-up, N iterations with one sample per iteration on every rank
// (steady clock; CUDA events when the communicator times on the device), then per iteration the
// slowest rank's time counts (nccl-tests -I style).
#include <cstdint>
#include <vector>

#include "communicator.hpp"
#include "stats.hpp"

namespace cs {

struct BenchSpec {
  int warmup = 5;
  int iters = 20;
  bool check = true;  // fill with the pattern, run once more after timing and count wrong elements
};

struct BenchResult {
  std::vector<double> iter_us;       // per iteration, max over ranks
  Summary us;                        // of iter_us
  std::vector<double> rank_mean_us;  // per rank: its own mean time
  uint64_t wrong = 0;                // summed over ranks (0 when not checked)
  std::vector<uint64_t> wrong_by_rank;
  bool checked = false;
  double algbw = 0, busbw = 0;  // GB/s (1e9), from us.mean
  int slowest_rank = 0;         // highest rank_mean_us
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

// Ping-pong between this rank and `peer` (OSU osu_latency): one-way latency = round trip / 2.
// The rank with the lower number sends first. Each sample is one round trip / 2, in us.
Summary pingpong(Communicator& comm, int peer, Tensor& buf, int warmup, int iters);

// Streaming bandwidth to `peer` (OSU osu_bw): `window` sends back to back, then a 1-byte ack.
// Returns GB/s as this rank measured it (the sender's figure is the one OSU reports).
double stream_bandwidth(Communicator& comm, int peer, bool sender, Tensor& buf, Tensor& ack, int window, int warmup,
                        int iters);

// Host memory-copy bandwidth (GB/s, 1e9): memcpy of `bytes` between two buffers, best of
// `iters` timed copies after one untimed. The physical ceiling of shared-memory transport.
double memcpy_bandwidth(size_t bytes, int iters);

}  // namespace cs
