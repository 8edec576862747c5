#include "collective.hpp"

#include <algorithm>

namespace cs {

namespace {

// Every fact about a collective, one row each. send_n/recv_n: that buffer holds the call's count
// once per rank (n counts). A collective with either is "per rank" (nccl-tests' meaning of count):
// a message of B bytes is B/n elements per rank, algbw counts n times the count; with exactly one
// of them, an in-place call's smaller buffer lies at rank x count in the larger (NCCL's layout).
// buffers: false when the call moves no data (no send or receive buffer). bus: busbw's factor,
// 0 for 1, 1 for (n-1)/n, 2 for 2(n-1)/n (nccl-tests *GetBw).
struct Facts {
  Collective c;
  std::string_view name;
  bool root, reduces, send_n, recv_n, buffers;
  int bus;
};

constexpr Facts kFacts[] = {
    // collective, name, root, reduces, send_n, recv_n, buffers, bus
    {Collective::allreduce, "allreduce", false, true, false, false, true, 2},
    {Collective::allgather, "allgather", false, false, false, true, true, 1},
    {Collective::reduce_scatter, "reduce_scatter", false, true, true, false, true, 1},
    {Collective::broadcast, "broadcast", true, false, false, false, true, 0},
    {Collective::reduce, "reduce", true, true, false, false, true, 0},
    {Collective::alltoall, "alltoall", false, false, true, true, true, 1},
    {Collective::gather, "gather", true, false, false, true, true, 1},
    {Collective::scatter, "scatter", true, false, true, false, true, 1},
    {Collective::sendrecv, "sendrecv", false, false, false, false, true, 0},
    {Collective::barrier, "barrier", false, false, false, false, false, 0},
    {Collective::send, "send", false, false, false, false, true, 0},
    {Collective::recv, "recv", false, false, false, false, true, 0},
};

const Facts* facts(Collective c) {
  for (const auto& f : kFacts)
    if (f.c == c) return &f;
  return nullptr;
}

bool per_rank(Collective c) {
  const Facts* f = facts(c);
  return f && (f->send_n || f->recv_n);
}

}  // namespace

std::string_view collective_name(Collective c) {
  const Facts* f = facts(c);
  return f ? f->name : "?";
}

std::optional<Collective> parse_collective(std::string_view n) {
  for (const auto& f : kFacts)
    if (n == f.name) return f.c;
  return std::nullopt;
}

bool collective_name_is_pairwise(std::string_view name) {
  const auto c = parse_collective(name);
  return c && collective_is_pairwise(*c);
}

bool collective_has_root(Collective c) {
  const Facts* f = facts(c);
  return f && f->root;
}

bool collective_reduces(Collective c) {
  const Facts* f = facts(c);
  return f && f->reduces;
}

Counts collective_counts(Collective c, size_t count, int nranks) {
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  const Facts* f = facts(c);
  if (!f) return {count, count};
  if (!f->buffers) return {0, 0};
  return {f->send_n ? count * n : count, f->recv_n ? count * n : count};
}

InPlace collective_in_place(Collective c) {
  const Facts* f = facts(c);
  if (!f || f->send_n == f->recv_n) return InPlace::same;
  return f->recv_n ? InPlace::send_in_recv : InPlace::recv_in_send;
}

bool op_in_place(Collective c, const void* send, const void* recv, size_t chunk_bytes, int rank, int root) {
  if (collective_has_root(c) && rank != root) return false;
  // As addresses: the offset is compared, never dereferenced (and may lie past a null pointer).
  const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  const uintptr_t mine = chunk_bytes * static_cast<uintptr_t>(std::max(rank, 0));
  switch (collective_in_place(c)) {
    case InPlace::send_in_recv:
      return s == r + mine;
    case InPlace::recv_in_send:
      return r == s + mine;
    case InPlace::same:
      break;
  }
  return s == r;
}

size_t count_for_bytes(Collective c, size_t bytes, size_t elem_size, int nranks) {
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  const size_t elems = bytes / elem_size;
  return per_rank(c) ? elems / n : elems;
}

double algbw_bytes(Collective c, size_t count, size_t elem_size, int nranks) {
  const double b = static_cast<double>(count) * static_cast<double>(elem_size);
  return per_rank(c) ? b * nranks : b;
}

double busbw_factor(Collective c, int nranks) {
  const Facts* f = facts(c);
  if (!f || f->bus == 0) return 1.0;
  const double n = nranks;
  return nranks > 0 ? f->bus * (n - 1) / n : 0.0;
}

}  // namespace cs
