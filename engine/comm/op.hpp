#pragma once
// One communication operation, validated once and then executed any number of times.
#include <cstddef>
#include <string>

#include "collective.hpp"
#include "dtype.hpp"
#include "reduce_op.hpp"
#include "tensor.hpp"

namespace cs {

struct Op {
  Collective coll = Collective::barrier;
  DType dtype = DType::float32;
  ReduceOp redop = ReduceOp::sum;
  size_t count = 0;  // the per-call count (see collective_counts)
  int root = 0;
  int peer = -1;       // send/recv: the peer; sendrecv: the rank sent to
  int recv_peer = -1;  // sendrecv: the rank received from
  int tag = 0;
  int nranks = 1;  // of the communicator it was made for
  // Blocking backend calls (the timed loops: what OSU/nccl-tests time). Otherwise the backend
  // starts the operation and polls it against the communicator's deadline.
  bool blocking = false;
  // send/recv on a backend with windowed_p2p(): this many calls of the same buffer posted
  // nonblocking, then all waited for (osu_bw's window); 1 <= window <= kMaxWindow.
  int window = 1;
  static constexpr int kMaxWindow = 1024;
  void* send = nullptr;
  void* recv = nullptr;

  size_t bytes() const;  // nccl-tests' "size": max(send, recv) bytes of this rank
  // Whether this call is in place on `rank` (core/collective's op_in_place: NCCL's layout, the
  // root rule). Backends ask this and compare no pointers themselves.
  bool in_place(int rank) const;
};

class Communicator;

// Builds an Op from tensors and checks it against the communicator: buffer sizes, dtypes, root
// and peer ranges, the reduction. Throws InputError with a message naming the operation.
// count == SIZE_MAX means "derive from the tensors".
Op make_op(const Communicator& comm, Collective coll, const Tensor& send, const Tensor& recv,
           ReduceOp redop = ReduceOp::sum, int root = 0, int peer = -1, int recv_peer = -1,
           size_t count = static_cast<size_t>(-1));

}  // namespace cs
