#include "bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "bench_check.hpp"
#include "error.hpp"
#include "pattern.hpp"
#include "poll_wait.hpp"

namespace cs {

namespace {

constexpr uint32_t kCheckSalt = 1;  // the pattern the checked run expects

// Whether the first `n` elements of a and b share memory.
bool overlap(const Tensor& a, size_t na, const Tensor& b, size_t nb) {
  if (!a.valid() || !b.valid() || na == 0 || nb == 0) return false;
  const auto pa = reinterpret_cast<uintptr_t>(a.data()), pb = reinterpret_cast<uintptr_t>(b.data());
  return pa < pb + nb * b.elem_size() && pb < pa + na * a.elem_size();
}

// The inputs of the checked run. Poisons the receive buffer (0 is never an expected value:
// patterns start at 1), then fills the send buffer with the pattern. For in-place ops send and
// recv are views of one buffer, and the send view is filled last, so the rank's own contribution
// survives. Outside the timed regions.
//  - CheckMethod::fast fills once, before the headline loop (`before`: the send buffer only), and
//    after the timed loops poisons the receive buffer and fills the send buffer again only where
//    the operation may have written it (in place); an out-of-place send buffer is only read, so
//    it still holds the pattern, and a result left over from the timed loops is poisoned first.
//    Fills go tile by tile on the buffer's own side (bench_check.hpp: device buffers by
//    device-to-device copies); a receive buffer inside the send buffer is not poisoned first
//    (the fill overwrites it whole).
//  - CheckMethod::reference poisons and fills both times, with a different salt, from a host copy
//    of the whole buffer (the method before issue 22, kept as the baseline of
//    tests/bench/check_cost.lua).
void fill_inputs(int rank, const Op& op, Tensor& send, Tensor& recv, bool before, CheckMethod how) {
  const Counts n = collective_counts(op.coll, op.count, op.nranks);
  const size_t ns = std::min(send.count(), n.send), nr = recv.valid() ? std::min(recv.count(), n.recv) : 0;
  Tensor src = send.slice(0, ns);
  if (how == CheckMethod::fast) {
    const bool in_place = overlap(send, ns, recv, nr);
    if (!before && nr > 0) {
      const auto s = reinterpret_cast<uintptr_t>(send.data()), r = reinterpret_cast<uintptr_t>(recv.data());
      const bool covered = in_place && r >= s && r + nr * recv.elem_size() <= s + ns * send.elem_size();
      if (!covered) recv.slice(0, nr).fill(0);
    }
    if (before || in_place) fill_pattern_fast(src, rank, op.redop, kCheckSalt);
    return;
  }
  const uint32_t salt = before ? 0 : kCheckSalt;
  if (recv.valid()) recv.slice(0, nr).fill(0);
  if (src.host_accessible()) {
    fill_pattern(src, rank, op.redop, salt);
  } else {
    Tensor staged = Tensor::host(src.dtype(), src.count());
    fill_pattern(staged, rank, op.redop, salt);
    src.copy_from(staged);
  }
}

}  // namespace

BenchBuffers bench_buffers(const Communicator& comm, Collective coll, size_t count, DType dtype, bool inplace) {
  const Counts need = collective_counts(coll, count, comm.size());
  const size_t me = static_cast<size_t>(comm.rank());
  BenchBuffers b;
  if (!inplace) {
    b.send = comm.alloc(dtype, need.send);
    b.recv = comm.alloc(dtype, need.recv);
  } else if (collective_in_place(coll) == InPlace::send_in_recv) {
    b.recv = comm.alloc(dtype, need.recv);
    b.send = b.recv.slice(me * count, count);
  } else if (collective_in_place(coll) == InPlace::recv_in_send) {
    b.send = comm.alloc(dtype, need.send);
    b.recv = b.send.slice(me * count, count);
  } else {
    b.send = b.recv = comm.alloc(dtype, std::max(need.send, need.recv));
  }
  return b;
}

BenchResult bench(Communicator& comm, const Op& op, Tensor& send, Tensor& recv, const BenchSpec& spec) {
  if (spec.iters < 1) throw InputError("bench: iters must be at least 1");
  if (spec.samples < 1) throw InputError("bench: samples must be at least 1");
  if (spec.warmup < 0) throw InputError("bench: warmup must not be negative");
  BenchResult r;
  const size_t iters = static_cast<size_t>(spec.iters);
  const size_t nsamples = static_cast<size_t>(spec.samples);
  std::vector<double> samples(nsamples);  // allocated before anything is timed
  samples.reserve(nsamples + 3);          // the check's three costs ride on the max over ranks below
  double fill_us = 0, run_us = 0, compare_us = 0;
  int64_t c0 = now_ns();
  if (spec.check) {
    fill_inputs(comm.rank(), op, send, recv, true, spec.check_method);
    fill_us = static_cast<double>(now_ns() - c0) * 1e-3;
  }

  // Blocking calls inside the timed regions, as OSU and nccl-tests time them; the watchdog
  // covers a hang there out of band.
  Op timed = op;
  timed.blocking = true;
  Op barrier;
  barrier.coll = Collective::barrier;
  barrier.nranks = comm.size();

  double loop_us = 0;
  {
    // From the warm-up to the last sample, a polled wait (the barriers) never sleeps
    // (core/poll_wait.hpp): the ranks start the loop together, as after a blocking MPI_Barrier.
    const TimedRegion timed_region;
    // Headline: warm-up, barrier, the whole loop on the backend's clock.
    for (int i = 0; i < spec.warmup; ++i) comm.execute(timed);
    comm.execute(barrier);
    loop_us = comm.time_loop_us(timed, iters);

    // Sampled pass: its own barrier, one sample per iteration.
    comm.execute(barrier);
    if (comm.device_timing()) {  // CUDA events around each iteration (nccl-tests -I)
      for (size_t i = 0; i < nsamples; ++i) samples[i] = comm.timed_execute_us(timed);
    } else {
      for (size_t i = 0; i < nsamples; ++i) {
        const int64_t t0 = comm.execute(timed);
        const int64_t t1 = now_ns();
        samples[i] = static_cast<double>(t1 - t0) * 1e-3;
      }
    }
  }

  uint64_t wrong = 0;
  if (spec.check) {
    const uint32_t salt = kCheckSalt;
    c0 = now_ns();
    fill_inputs(comm.rank(), op, send, recv, false, spec.check_method);
    const int64_t c1 = now_ns();
    comm.execute(op);
    const int64_t c2 = now_ns();
    const Counts n = collective_counts(op.coll, op.count, op.nranks);
    const CheckSpec check{op.coll, op.redop, comm.rank(), comm.size(), op.root, op.count, salt};
    const Tensor result = recv.slice(0, std::min(recv.count(), n.recv));
    wrong =
        spec.check_method == CheckMethod::fast ? count_wrong_fast(check, result) : count_wrong(check, result.to_host());
    fill_us += static_cast<double>(c1 - c0) * 1e-3;
    run_us = static_cast<double>(c2 - c1) * 1e-3;
    compare_us = static_cast<double>(now_ns() - c2) * 1e-3;
    r.checked = true;
  }

  // Everything below is between ranks, after the timed regions.
  r.rank_time_us = comm.allgather(loop_us / static_cast<double>(iters));
  double sum = 0;
  r.time_rank_min_us = r.time_rank_max_us = r.rank_time_us.front();
  for (double t : r.rank_time_us) {
    sum += t;
    r.time_rank_min_us = std::min(r.time_rank_min_us, t);
    r.time_rank_max_us = std::max(r.time_rank_max_us, t);
  }
  // The mean of doubles can round a hair outside [min, max]; it never may.
  r.time_us = std::clamp(sum / static_cast<double>(r.rank_time_us.size()), r.time_rank_min_us, r.time_rank_max_us);

  double mine = 0;
  for (double x : samples) mine += x;
  mine /= static_cast<double>(nsamples);
  r.rank_mean_us = comm.allgather(mine);
  // Per iteration, the mean over ranks: summed as integer picoseconds (the communicators reduce
  // doubles by max only; 2^64 ps holds any realistic sum exactly enough), then divided.
  std::vector<uint64_t> ps(nsamples);
  for (size_t i = 0; i < nsamples; ++i) ps[i] = static_cast<uint64_t>(std::llround(std::max(samples[i], 0.0) * 1e6));
  comm.allreduce_sum(ps);
  r.iter_avg_us.resize(nsamples);
  for (size_t i = 0; i < nsamples; ++i)
    r.iter_avg_us[i] = static_cast<double>(ps[i]) * 1e-6 / static_cast<double>(comm.size());
  r.us_avg = summarize(r.iter_avg_us);
  samples.insert(samples.end(), {fill_us, run_us, compare_us});
  comm.allreduce_max(samples);
  r.check_fill_us = samples[nsamples];
  r.check_run_us = samples[nsamples + 1];
  r.check_compare_us = samples[nsamples + 2];
  samples.resize(nsamples);
  r.iter_us = samples;
  r.us = summarize(samples);
  std::vector<uint64_t> w(static_cast<size_t>(comm.size()), 0);
  w[static_cast<size_t>(comm.rank())] = wrong;
  comm.allreduce_sum(w);
  r.wrong_by_rank = w;
  for (uint64_t x : w) r.wrong += x;
  r.slowest_rank =
      static_cast<int>(std::max_element(r.rank_mean_us.begin(), r.rank_mean_us.end()) - r.rank_mean_us.begin());
  const double sec = r.time_us * 1e-6;
  if (sec > 0) {
    r.algbw = algbw_bytes(op.coll, op.count, dtype_size(op.dtype), op.nranks) / 1e9 / sec;
    r.busbw = r.algbw * busbw_factor(op.coll, op.nranks);
  }
  return r;
}

PingPongResult pingpong(Communicator& comm, int peer, Tensor& buf, int warmup, int iters, int samples) {
  if (iters < 1 || samples < 1) throw InputError("pingpong: iters and samples must be at least 1");
  if (warmup < 0) throw InputError("pingpong: warmup must not be negative");
  comm.agree_with_peer(peer, buf.count(), buf.dtype(), "pingpong");
  // Two buffers, as osu_latency has (s_buf, r_buf): receiving into the buffer that is sent next
  // makes every transfer read lines the other core has just written (a cross-core cache miss
  // per line), which doubled the latency of cache-sized messages (64 KiB and up) against OSU.
  Tensor into = comm.alloc(buf.dtype(), buf.count());  // before anything is timed
  Op s = make_op(comm, Collective::send, buf, Tensor(), ReduceOp::sum, 0, peer);
  Op rv = make_op(comm, Collective::recv, Tensor(), into, ReduceOp::sum, 0, peer);
  s.blocking = rv.blocking = true;  // timed: what osu_latency times
  const bool first = comm.rank() < peer;
  auto round_trip = [&] {
    if (first) {
      comm.execute(s);
      comm.execute(rv);
    } else {
      comm.execute(rv);
      comm.execute(s);
    }
  };
  // The timed loop: the same round trip, its bookkeeping once for the loop (time_steps_us).
  const Communicator::TimedStep order[2] = {{first ? &s : &rv, 1}, {first ? &rv : &s, 1}};
  std::vector<double> sampled(static_cast<size_t>(samples));
  const TimedRegion timed_region;  // no sleep in a polled wait from here on (core/poll_wait.hpp)
  for (int i = 0; i < warmup; ++i) round_trip();
  PingPongResult r;
  r.latency_us = comm.time_steps_us(order, 2, static_cast<size_t>(iters)) / (2.0 * iters);
  for (size_t i = 0; i < sampled.size(); ++i) {
    const int64_t a = now_ns();
    round_trip();
    sampled[i] = static_cast<double>(now_ns() - a) * 1e-3 / 2.0;
  }
  r.us = summarize(sampled);
  return r;
}

PairBenchResult pair_bench(Communicator& comm, int peer, size_t bytes, int warmup, int iters) {
  if (iters < 1) throw InputError("pair_bench: iters must be at least 1");
  if (warmup < 0) throw InputError("pair_bench: warmup must not be negative");
  Tensor send = comm.alloc(DType::uint8, bytes);
  Tensor recv = comm.alloc(DType::uint8, bytes);
  comm.agree_with_peer(peer, send.count(), send.dtype(), "pair_bench");  // sizes differing: a desync
  Op op = make_op(comm, Collective::sendrecv, send, recv, ReduceOp::sum, 0, peer, peer);
  op.blocking = true;  // timed
  std::vector<double> us(static_cast<size_t>(iters));
  {
    const TimedRegion timed_region;  // no sleep in a polled wait (core/poll_wait.hpp)
    for (int i = 0; i < warmup; ++i) comm.execute(op);
    for (double& u : us) {
      if (comm.device_timing()) {
        u = comm.timed_execute_us(op);
      } else {
        const int64_t t0 = comm.execute(op);
        u = static_cast<double>(now_ns() - t0) * 1e-3;
      }
    }
  }
  double sum = 0;
  for (double u : us) sum += u;
  std::sort(us.begin(), us.end());
  PairBenchResult r;
  r.min_us = us.front();
  r.p50_us = us[us.size() / 2];
  r.mean_us = sum / static_cast<double>(us.size());
  r.max_us = us.back();
  return r;
}

double stream_bandwidth(Communicator& comm, int peer, bool sender, Tensor& buf, Tensor& ack, int window, int warmup,
                        int iters) {
  if (iters < 1 || window < 1) throw InputError("stream_bandwidth: iters and window must be at least 1");
  if (warmup < 0) throw InputError("stream_bandwidth: warmup must not be negative");
  comm.agree_with_peer(peer, buf.count(), buf.dtype(), "stream");
  Op data = sender ? make_op(comm, Collective::send, buf, Tensor(), ReduceOp::sum, 0, peer)
                   : make_op(comm, Collective::recv, Tensor(), buf, ReduceOp::sum, 0, peer);
  Op a = sender ? make_op(comm, Collective::recv, Tensor(), ack, ReduceOp::sum, 0, peer)
                : make_op(comm, Collective::send, ack, Tensor(), ReduceOp::sum, 0, peer);
  data.blocking = a.blocking = true;  // timed: what osu_bw times
  // osu_bw: the window's sends (and receives) posted nonblocking, then waited for together, where
  // the backend can; otherwise `window` blocking calls in turn.
  if (window > Op::kMaxWindow)
    throw InputError("stream_bandwidth: window " + std::to_string(window) + " is above the most, " +
                     std::to_string(Op::kMaxWindow));
  uint32_t repeat = static_cast<uint32_t>(window);
  if (comm.windowed_p2p()) {
    data.window = window;
    repeat = 1;
  }
  const Communicator::TimedStep steps[2] = {{&data, repeat}, {&a, 1}};
  const TimedRegion timed_region;  // no sleep in a polled wait (core/poll_wait.hpp)
  for (int i = 0; i < warmup; ++i) {
    for (uint32_t w = 0; w < repeat; ++w) comm.execute(data);
    comm.execute(a);
  }
  const double sec = comm.time_steps_us(steps, 2, static_cast<size_t>(iters)) * 1e-6;
  return static_cast<double>(buf.bytes()) * window * iters / 1e9 / sec;
}

double memcpy_bandwidth(size_t bytes, int iters, double max_s) {
  if (bytes == 0 || iters < 1) throw UsageError("memcpy_bandwidth: bytes and iters must be positive");
  const int64_t stop = max_s > 0 ? now_ns() + static_cast<int64_t>(max_s * 1e9) : 0;
  Tensor a = Tensor::host(DType::uint8, bytes), b = Tensor::host(DType::uint8, bytes);
  std::memset(a.data(), 1, bytes);
  std::memcpy(b.data(), a.data(), bytes);
  double best = 1e300;
  for (int i = 0; i < iters; ++i) {
    const int64_t t0 = now_ns();
    std::memcpy(b.data(), a.data(), bytes);
    const int64_t t1 = now_ns();
    best = std::min(best, static_cast<double>(t1 - t0));
    if (stop && t1 > stop) break;  // the best of the copies done so far
  }
  return static_cast<double>(bytes) / best;  // bytes per ns = GB/s
}

}  // namespace cs
