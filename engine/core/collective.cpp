#include "collective.hpp"

#include <algorithm>

namespace cs {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::allreduce:
      return "allreduce";
    case Collective::allgather:
      return "allgather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
    case Collective::alltoall:
      return "alltoall";
    case Collective::gather:
      return "gather";
    case Collective::scatter:
      return "scatter";
    case Collective::sendrecv:
      return "sendrecv";
    case Collective::barrier:
      return "barrier";
    case Collective::send:
      return "send";
    case Collective::recv:
      return "recv";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view n) {
  for (auto c : {Collective::allreduce, Collective::allgather, Collective::reduce_scatter, Collective::broadcast,
                 Collective::reduce, Collective::alltoall, Collective::gather, Collective::scatter,
                 Collective::sendrecv, Collective::barrier, Collective::send, Collective::recv})
    if (n == collective_name(c)) return c;
  return std::nullopt;
}

bool collective_name_is_pairwise(std::string_view name) {
  const auto c = parse_collective(name);
  return c && collective_is_pairwise(*c);
}

bool collective_has_root(Collective c) {
  return c == Collective::broadcast || c == Collective::reduce || c == Collective::gather || c == Collective::scatter;
}

bool collective_reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
}

Counts collective_counts(Collective c, size_t count, int nranks) {
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  switch (c) {
    case Collective::allgather:
      return {count, count * n};
    case Collective::reduce_scatter:
      return {count * n, count};
    case Collective::alltoall:
      return {count * n, count * n};
    case Collective::gather:
      return {count, count * n};
    case Collective::scatter:
      return {count * n, count};
    case Collective::barrier:
      return {0, 0};
    default:
      return {count, count};
  }
}

size_t count_for_bytes(Collective c, size_t bytes, size_t elem_size, int nranks) {
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  const size_t elems = bytes / elem_size;
  switch (c) {
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
    case Collective::gather:
    case Collective::scatter:
      return elems / n;
    default:
      return elems;
  }
}

double algbw_bytes(Collective c, size_t count, size_t elem_size, int nranks) {
  const double b = static_cast<double>(count) * static_cast<double>(elem_size);
  switch (c) {
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
    case Collective::gather:
    case Collective::scatter:
      return b * nranks;
    default:
      return b;
  }
}

double busbw_factor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::allreduce:
      return nranks > 0 ? 2.0 * (n - 1) / n : 0.0;
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
    case Collective::gather:
    case Collective::scatter:
      return nranks > 0 ? (n - 1) / n : 0.0;
    default:
      return 1.0;
  }
}

}  // namespace cs
