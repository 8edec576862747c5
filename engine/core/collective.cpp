#include "collective.hpp"

#include <algorithm>

namespace cs {

namespace {

// Every fact about a collective, one row each. send_n/recv_n: that buffer holds the call's count
// once per rank (n counts). A collective with either is "per rank" (nccl-tests' meaning of count):
// a message of B bytes is B/n elements per rank, algbw counts n times the count, busbw (n-1)/n.
struct Facts {
  Collective c;
  std::string_view name;
  bool root, reduces, send_n, recv_n;
};

constexpr Facts kFacts[] = {
    // collective, name, root, reduces, send_n, recv_n
    {Collective::allreduce, "allreduce", false, true, false, false},
    {Collective::allgather, "allgather", false, false, false, true},
    {Collective::reduce_scatter, "reduce_scatter", false, true, true, false},
    {Collective::broadcast, "broadcast", true, false, false, false},
    {Collective::reduce, "reduce", true, true, false, false},
    {Collective::alltoall, "alltoall", false, false, true, true},
    {Collective::gather, "gather", true, false, false, true},
    {Collective::scatter, "scatter", true, false, true, false},
    {Collective::sendrecv, "sendrecv", false, false, false, false},
    {Collective::barrier, "barrier", false, false, false, false},
    {Collective::send, "send", false, false, false, false},
    {Collective::recv, "recv", false, false, false, false},
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
  if (c == Collective::barrier) return {0, 0};
  const Facts* f = facts(c);
  if (!f) return {count, count};
  return {f->send_n ? count * n : count, f->recv_n ? count * n : count};
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
  const double n = nranks;
  if (c == Collective::allreduce) return nranks > 0 ? 2.0 * (n - 1) / n : 0.0;
  if (per_rank(c)) return nranks > 0 ? (n - 1) / n : 0.0;
  return 1.0;
}

}  // namespace cs
