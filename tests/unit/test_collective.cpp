// Buffer shapes, count_for_bytes, algbw bytes and busbw factors, against the nccl-tests table
// (src/<coll>.cu *GetBw; the factors are listed in docs/reference.md, bw_sweep).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "collective.hpp"

namespace {

using cs::Collective;

constexpr int kRankCounts[] = {1, 2, 3, 4, 5, 8, 16, 37, 1024};

// Collectives whose count parameter is per rank: the buffers and the algbw bytes scale with n.
bool per_rank_count(Collective c) {
  return c == Collective::allgather || c == Collective::reduce_scatter || c == Collective::alltoall ||
         c == Collective::gather || c == Collective::scatter;
}

}  // namespace

TEST_CASE("busbw factors are nccl-tests' (2(n-1)/n, (n-1)/n, 1)", "[collective]") {
  for (int n : kRankCounts) {
    INFO("nranks=" << n);
    const double dn = n;
    CHECK(cs::busbw_factor(Collective::allreduce, n) == Approx(2.0 * (dn - 1.0) / dn).epsilon(1e-15));
    for (Collective c : {Collective::allgather, Collective::reduce_scatter, Collective::alltoall, Collective::gather,
                         Collective::scatter}) {
      INFO(cs::collective_name(c));
      CHECK(cs::busbw_factor(c, n) == Approx((dn - 1.0) / dn).epsilon(1e-15));
    }
    for (Collective c : {Collective::broadcast, Collective::reduce, Collective::sendrecv}) {
      INFO(cs::collective_name(c));
      CHECK(cs::busbw_factor(c, n) == 1.0);
    }
  }
  // A few values written out.
  CHECK(cs::busbw_factor(Collective::allreduce, 1) == 0.0);
  CHECK(cs::busbw_factor(Collective::allreduce, 2) == 1.0);
  CHECK(cs::busbw_factor(Collective::allreduce, 4) == 1.5);
  CHECK(cs::busbw_factor(Collective::allreduce, 8) == 1.75);
  CHECK(cs::busbw_factor(Collective::allgather, 1) == 0.0);
  CHECK(cs::busbw_factor(Collective::allgather, 8) == 0.875);
  CHECK(cs::busbw_factor(Collective::alltoall, 2) == 0.5);
  CHECK(cs::busbw_factor(Collective::broadcast, 8) == 1.0);
}

TEST_CASE("algbw bytes: count*size*n for per-rank-count collectives, count*size otherwise", "[collective]") {
  for (int n : kRankCounts) {
    for (size_t es : {size_t{1}, size_t{4}, size_t{8}}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 20}) {
        for (Collective c : cs::kBenchCollectives) {
          INFO(cs::collective_name(c) << " n=" << n << " es=" << es << " count=" << count);
          const double want = per_rank_count(c) ? static_cast<double>(count * es * static_cast<size_t>(n))
                                                : static_cast<double>(count * es);
          CHECK(cs::algbw_bytes(c, count, es, n) == want);
        }
      }
    }
  }
  CHECK(cs::algbw_bytes(Collective::allreduce, 1024, 4, 8) == 4096.0);
  CHECK(cs::algbw_bytes(Collective::allgather, 1024, 4, 8) == 32768.0);
  CHECK(cs::algbw_bytes(Collective::sendrecv, 1024, 4, 8) == 4096.0);
}

TEST_CASE("collective_counts: send and receive elements per rank", "[collective]") {
  const size_t c = 12;
  for (int n : kRankCounts) {
    const size_t un = static_cast<size_t>(n);
    INFO("nranks=" << n);
    auto is = [&](Collective coll, size_t send, size_t recv) {
      INFO(cs::collective_name(coll));
      const cs::Counts got = cs::collective_counts(coll, c, n);
      CHECK(got.send == send);
      CHECK(got.recv == recv);
    };
    is(Collective::allreduce, c, c);
    is(Collective::reduce, c, c);
    is(Collective::broadcast, c, c);
    is(Collective::sendrecv, c, c);
    is(Collective::send, c, c);
    is(Collective::recv, c, c);
    is(Collective::allgather, c, c * un);
    is(Collective::gather, c, c * un);
    is(Collective::reduce_scatter, c * un, c);
    is(Collective::scatter, c * un, c);
    is(Collective::alltoall, c * un, c * un);
    is(Collective::barrier, 0, 0);
  }
}

TEST_CASE("collective_in_place: NCCL's in-place layout, the smaller buffer inside the larger", "[collective]") {
  using cs::InPlace;
  CHECK(cs::collective_in_place(Collective::allgather) == InPlace::send_in_recv);
  CHECK(cs::collective_in_place(Collective::gather) == InPlace::send_in_recv);
  CHECK(cs::collective_in_place(Collective::reduce_scatter) == InPlace::recv_in_send);
  CHECK(cs::collective_in_place(Collective::scatter) == InPlace::recv_in_send);
  for (Collective c : {Collective::allreduce, Collective::broadcast, Collective::reduce, Collective::alltoall,
                       Collective::sendrecv, Collective::barrier, Collective::send, Collective::recv}) {
    INFO(cs::collective_name(c));
    CHECK(cs::collective_in_place(c) == InPlace::same);
  }
}

TEST_CASE("op_in_place: every collective's in-place and out-of-place buffers, the root rule", "[collective]") {
  // Two buffers of 4 ranks x 16 bytes; chunk: one rank's part (count x element size).
  alignas(16) static char a[64], b[64];
  constexpr size_t chunk = 16;
  const int rank = 2, root = 2, other = 1;
  auto in_place = [&](Collective c, const void* s, const void* r, int me, int rt) {
    return cs::op_in_place(c, s, r, chunk, me, rt);
  };
  // The smaller buffer inside the larger, at rank x chunk; anywhere else is out of place.
  for (Collective c : {Collective::allgather, Collective::gather}) {
    INFO(cs::collective_name(c));
    CHECK(in_place(c, a + rank * chunk, a, rank, root));
    CHECK_FALSE(in_place(c, a, a, rank, root));          // rank 2's part is not at the start
    CHECK_FALSE(in_place(c, a + chunk, a, rank, root));  // another rank's part
    CHECK_FALSE(in_place(c, b, a, rank, root));
    CHECK(in_place(c, a, a, 0, 0));  // rank 0's part is the start
  }
  for (Collective c : {Collective::reduce_scatter, Collective::scatter}) {
    INFO(cs::collective_name(c));
    CHECK(in_place(c, a, a + rank * chunk, rank, root));
    CHECK_FALSE(in_place(c, a + rank * chunk, a, rank, root));  // the layout the other way round
    CHECK_FALSE(in_place(c, a, a, rank, root));
    CHECK_FALSE(in_place(c, a, b, rank, root));
  }
  for (Collective c : {Collective::allreduce, Collective::broadcast, Collective::reduce, Collective::alltoall,
                       Collective::sendrecv, Collective::send, Collective::recv, Collective::barrier}) {
    INFO(cs::collective_name(c));
    CHECK(in_place(c, a, a, rank, root));
    CHECK_FALSE(in_place(c, a, b, rank, root));
    CHECK_FALSE(in_place(c, a + rank * chunk, a, rank, root));  // an offset makes two buffers
  }
  // A rooted collective is in place on its root only; elsewhere the same layout is not.
  CHECK_FALSE(in_place(Collective::gather, a + other * chunk, a, other, root));
  CHECK_FALSE(in_place(Collective::scatter, a, a + other * chunk, other, root));
  CHECK_FALSE(in_place(Collective::reduce, a, a, other, root));
  CHECK_FALSE(in_place(Collective::broadcast, a, a, other, root));
  // The others ignore the root argument.
  CHECK(in_place(Collective::allgather, a + other * chunk, a, other, root));
  CHECK(in_place(Collective::reduce_scatter, a, a + other * chunk, other, root));
  CHECK(in_place(Collective::allreduce, a, a, other, root));
}

TEST_CASE("count_for_bytes: the message size is max(send, recv) bytes", "[collective]") {
  CHECK(cs::count_for_bytes(Collective::allreduce, 1 << 20, 4, 8) == 262144);
  CHECK(cs::count_for_bytes(Collective::allgather, 1 << 20, 4, 8) == 32768);
  CHECK(cs::count_for_bytes(Collective::reduce_scatter, 1 << 20, 4, 8) == 32768);
  CHECK(cs::count_for_bytes(Collective::alltoall, 1 << 20, 4, 8) == 32768);
  CHECK(cs::count_for_bytes(Collective::broadcast, 8, 8, 8) == 1);
  CHECK(cs::count_for_bytes(Collective::allgather, 8, 4, 8) == 0);  // smaller than one per rank
  CHECK(cs::count_for_bytes(Collective::sendrecv, 7, 4, 2) == 1);   // rounds down

  for (int n : kRankCounts) {
    const size_t un = static_cast<size_t>(n);
    for (size_t es : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
      for (Collective c : cs::kBenchCollectives) {
        INFO(cs::collective_name(c) << " n=" << n << " es=" << es);
        // Sizes that divide evenly: the count reproduces the size exactly.
        const size_t bytes = es * un * 96;
        const size_t count = cs::count_for_bytes(c, bytes, es, n);
        const cs::Counts k = cs::collective_counts(c, count, n);
        CHECK(std::max(k.send, k.recv) * es == bytes);
        CHECK(count == (per_rank_count(c) ? bytes / es / un : bytes / es));
        // Any size: never more than asked for.
        for (size_t b : {size_t{1}, size_t{7}, size_t{1000}, size_t{65537}}) {
          const size_t cnt = cs::count_for_bytes(c, b, es, n);
          const cs::Counts kk = cs::collective_counts(c, cnt, n);
          CHECK(std::max(kk.send, kk.recv) * es <= b);
        }
      }
    }
  }
}

TEST_CASE("collective names, roots and reductions", "[collective]") {
  for (Collective c : {Collective::allreduce, Collective::allgather, Collective::reduce_scatter, Collective::broadcast,
                       Collective::reduce, Collective::alltoall, Collective::gather, Collective::scatter,
                       Collective::sendrecv, Collective::barrier, Collective::send, Collective::recv}) {
    const auto parsed = cs::parse_collective(cs::collective_name(c));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == c);
  }
  CHECK(cs::collective_name(Collective::reduce_scatter) == "reduce_scatter");
  CHECK_FALSE(cs::parse_collective("all_reduce").has_value());
  CHECK_FALSE(cs::parse_collective("").has_value());
  CHECK_FALSE(cs::parse_collective("Allreduce").has_value());

  for (Collective c : cs::kBenchCollectives) {
    INFO(cs::collective_name(c));
    const bool rooted =
        c == Collective::broadcast || c == Collective::reduce || c == Collective::gather || c == Collective::scatter;
    const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
    CHECK(cs::collective_has_root(c) == rooted);
    CHECK(cs::collective_reduces(c) == reduces);
  }
}
