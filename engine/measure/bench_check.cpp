#include "bench_check.hpp"

#include <algorithm>
#include <cstring>

#include "collective.hpp"

namespace cs {

namespace {

// Elements per tile: a multiple of the period, large enough that a copy of it costs more than
// a call, small enough to stay in cache (147456 elements: 576 KiB of float32).
constexpr size_t kTile = kPatternPeriod * 4096;
// Elements per staged piece when the result is on a device: a multiple of kTile (about 9 MiB of
// float32), one device-to-host copy each.
constexpr size_t kStage = kTile * 16;

uint64_t count_wrong_everywhere(const CheckSpec& spec, const Tensor& recv, size_t n) {
  return count_wrong(spec, recv.slice(0, std::min(recv.count(), n)).to_host());
}

}  // namespace

void fill_pattern_fast(Tensor& t, int rank, ReduceOp op, uint32_t salt) {
  const size_t n = t.count();
  if (n == 0) return;
  const size_t first = std::min(n, kTile);
  if (t.host_accessible()) {
    Tensor head = t.slice(0, first);
    fill_pattern(head, rank, op, salt);
  } else {
    Tensor staged = Tensor::host(t.dtype(), first);
    fill_pattern(staged, rank, op, salt);
    t.slice(0, first).copy_from(staged);
  }
  // Doubling: [0, done) is filled and done is a multiple of the period, so element done + i is
  // element i's value.
  for (size_t done = first; done < n;) {
    const size_t k = std::min(done, n - done);
    t.slice(done, k).copy_from(t.slice(0, k));
    done += k;
  }
}

uint64_t count_wrong_fast(const CheckSpec& spec, const Tensor& recv, bool* compared) {
  if (compared) *compared = false;
  const Counts n = collective_counts(spec.coll, spec.count, spec.nranks);
  const bool receives =
      !((spec.coll == Collective::reduce || spec.coll == Collective::gather) && spec.rank != spec.root);
  if (!receives) return 0;
  if (recv.count() < n.recv) return n.recv;  // as count_wrong: nothing of the result can be trusted
  size_t blocks = 1;
  switch (spec.coll) {
    case Collective::allreduce:
    case Collective::reduce:
    case Collective::reduce_scatter:
    case Collective::broadcast:
    case Collective::scatter:
    case Collective::sendrecv:
      break;
    case Collective::allgather:
    case Collective::gather:
    case Collective::alltoall:
      blocks = static_cast<size_t>(spec.nranks);
      break;
    default:
      return count_wrong_everywhere(spec, recv, n.recv);
  }
  const size_t c = spec.count;
  // The first `head` elements of each block, checked exactly. head = c (mod period), so that an
  // index of the form rank x count + j (reduce_scatter, scatter, alltoall) has the same value
  // modulo the period with count = head as with count = c: the small check expects what the
  // real one does.
  const size_t head = kTile + c % kPatternPeriod;
  if (c < head + kTile || blocks * c != n.recv) return count_wrong_everywhere(spec, recv, n.recv);
  const size_t es = recv.elem_size();
  Tensor heads = Tensor::host(recv.dtype(), blocks * head);
  for (size_t b = 0; b < blocks; ++b) heads.slice(b * head, head).copy_from(recv.slice(b * c, head));
  CheckSpec small = spec;
  small.count = head;
  if (count_wrong(small, heads) != 0) return count_wrong_everywhere(spec, recv, n.recv);

  // Every later chunk of kTile elements (from an index that is a multiple of kTile, hence of the
  // period) must be bit-identical to the block's first chunk, checked above.
  const bool on_host = recv.host_accessible();
  Tensor stage = on_host ? Tensor() : Tensor::host(recv.dtype(), std::min(kStage, c));
  for (size_t b = 0; b < blocks; ++b) {
    const unsigned char* ref = static_cast<const unsigned char*>(heads.data()) + b * head * es;
    for (size_t j = kTile; j < c;) {
      const size_t piece = on_host ? c - j : std::min(kStage, c - j);
      const unsigned char* got;
      if (on_host) {
        got = static_cast<const unsigned char*>(recv.data()) + (b * c + j) * es;
      } else {
        Tensor dst = stage.slice(0, piece);
        dst.copy_from(recv.slice(b * c + j, piece));
        got = static_cast<const unsigned char*>(stage.data());
      }
      for (size_t k = 0; k < piece; k += kTile) {
        const size_t len = std::min(kTile, piece - k);
        if (std::memcmp(got + k * es, ref, len * es) != 0) return count_wrong_everywhere(spec, recv, n.recv);
      }
      j += piece;
    }
  }
  if (compared) *compared = true;
  return 0;
}

}  // namespace cs
