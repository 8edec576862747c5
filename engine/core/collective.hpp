#pragma once
// The operations every backend implements, and how nccl-tests turns their times into bandwidth
// (nccl-tests src/*.cu *GetBw; the factors are listed in docs/reference.md, bw_sweep).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cs {

enum class Collective : uint8_t {
  allreduce,
  allgather,
  reduce_scatter,
  broadcast,
  reduce,
  alltoall,
  gather,
  scatter,
  sendrecv,
  barrier,
  send,
  recv,
};

inline constexpr Collective kBenchCollectives[] = {
    Collective::allreduce, Collective::allgather, Collective::reduce_scatter, Collective::broadcast, Collective::reduce,
    Collective::alltoall,  Collective::gather,    Collective::scatter,        Collective::sendrecv};

std::string_view collective_name(Collective c);
std::optional<Collective> parse_collective(std::string_view name);
bool collective_has_root(Collective c);
bool collective_reduces(Collective c);
// send, recv and sendrecv: only the ranks of the pair call them, so they do not advance the
// collective count that every rank of a communicator agrees on (Communicator::cseq()).
constexpr bool collective_is_pairwise(Collective c) {
  return c == Collective::send || c == Collective::recv || c == Collective::sendrecv;
}
// The same by name (heartbeats and incidents carry names); false for a name that is none.
bool collective_name_is_pairwise(std::string_view name);

// Element counts per rank for a collective whose per-call count parameter is `count`
// (nccl-tests' meaning: per-rank count for allgather/reduce_scatter/alltoall/gather/scatter).
struct Counts {
  size_t send;  // elements in the send buffer
  size_t recv;  // elements in the receive buffer
};
Counts collective_counts(Collective c, size_t count, int nranks);

// Where an in-place call keeps its two buffers, as NCCL defines it: allgather and gather send at
// recv + rank x count; reduce_scatter and scatter recv at send + rank x count; otherwise one
// buffer is both.
enum class InPlace : uint8_t { same, send_in_recv, recv_in_send };
InPlace collective_in_place(Collective c);

// Whether a call whose buffers start at `send` and `recv` is in place on `rank`, by the layout
// above: the smaller buffer at rank x chunk_bytes in the larger (chunk_bytes: the per-call count
// x the element size), or one buffer for both. A rooted collective is in place only on its root
// (MPI_IN_PLACE is the root's alone; the other ranks' buffers say nothing). Every backend asks
// this rather than comparing its pointers itself.
bool op_in_place(Collective c, const void* send, const void* recv, size_t chunk_bytes, int rank, int root);

// The per-call count for a message of `bytes` (nccl-tests: size = max(send, recv) bytes).
size_t count_for_bytes(Collective c, size_t bytes, size_t elem_size, int nranks);

// Bytes that algbw divides by time: algbw = algbw_bytes / 1e9 / seconds.
double algbw_bytes(Collective c, size_t count, size_t elem_size, int nranks);
// busbw = algbw * factor.
double busbw_factor(Collective c, int nranks);

}  // namespace cs
