// One operation as NCCL calls on the rank's stream: the collective NCCL has, or grouped
// ncclSend/ncclRecv where it has none (gather, scatter, sendrecv, alltoall before NCCL 2.28), the
// in-place cases through a scratch buffer, and commscript's types and reductions in NCCL's terms.
#include "cuda_device.hpp"
#include "elementwise.hpp"
#include "gpu_libs.hpp"
#include "nccl_communicator.hpp"

namespace cs {

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::int8:
      return ncclInt8;
    case DType::uint8:
      return ncclUint8;
    case DType::int32:
      return ncclInt32;
    case DType::uint32:
      return ncclUint32;
    case DType::int64:
      return ncclInt64;
    case DType::uint64:
      return ncclUint64;
    case DType::float32:
      return ncclFloat32;
    case DType::float64:
      return ncclFloat64;
    case DType::float16:
      return ncclFloat16;
    case DType::bfloat16:
      return ncclBfloat16;  // NCCL >= 2.10, older than the oldest version accepted
  }
  return ncclUint8;
}

ncclRedOp_t nccl_redop(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::prod:
      return ncclProd;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::avg:
      return ncclAvg;
  }
  return ncclSum;
}

void* NcclCommunicator::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    if (scratch_) cuda_check(cudaFree(scratch_), "cudaFree");
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    cuda_check(cudaMalloc(&scratch_, bytes), "cudaMalloc");
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

ncclResult_t NcclCommunicator::enqueue(const Op& op, const char** call, ncclComm_t nc) {
  const ncclDataType_t t = nccl_dtype(op.dtype);
  const size_t c = op.count, es = dtype_size(op.dtype);
  const int n = size_;
  auto at = [&](const void* p, size_t elems) { return cs::at(p, elems, op.dtype); };
  auto d2d = [&](void* dst, const void* src, size_t bytes) {
    if (bytes && dst != src)
      cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  };
  // Grouped point-to-point calls: the first error counts, and the group is always closed.
  ncclResult_t first = ncclSuccess;
  auto add = [&](ncclResult_t r) {
    if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) first = r;
  };
  auto group = [&](auto&& body) {
    const ncclResult_t s = ncclGroupStart();
    if (s != ncclSuccess) return s;
    body();
    const ncclResult_t e = ncclGroupEnd();
    return first != ncclSuccess ? first : e;
  };
  const ncclRedOp_t rop = nccl_redop(op.redop);
  switch (op.coll) {
    case Collective::barrier:
      *call = "ncclAllReduce (barrier)";
      return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclSum, nc, stream_);
    case Collective::allreduce:
      *call = "ncclAllReduce";
      return ncclAllReduce(op.send, op.recv, c, t, rop, nc, stream_);
    case Collective::reduce:
      *call = "ncclReduce";
      return ncclReduce(op.send, op.recv, c, t, rop, op.root, nc, stream_);
    case Collective::broadcast:
      *call = "ncclBroadcast";
      return ncclBroadcast(op.send, op.recv, c, t, op.root, nc, stream_);
    case Collective::allgather:  // in place: send = recv + rank*count, as NCCL defines it
      *call = "ncclAllGather";
      return ncclAllGather(op.send, op.recv, c, t, nc, stream_);
    case Collective::reduce_scatter:  // in place: recv = send + rank*count
      *call = "ncclReduceScatter";
      return ncclReduceScatter(op.send, op.recv, c, t, rop, nc, stream_);
    case Collective::alltoall: {
      const size_t bytes = c * static_cast<size_t>(n) * es;
      const void* src = op.send;
      if (op.in_place(rank_)) {  // in place: send from a copy
        src = scratch(bytes);
        d2d(const_cast<void*>(src), op.send, bytes);
      }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
      // NCCL 2.28's own all-to-all (what nccl-tests calls): on one rank a single copy, on more the
      // same send/receive pair per peer as below (enqueue.cc taskAppend, v2.28.9-1).
      static const bool has_alltoall = nccl_has("ncclAlltoAll");
      if (has_alltoall) {
        *call = "ncclAlltoAll";
        return ncclAlltoAll(src, op.recv, c, t, nc, stream_);
      }
#endif
      *call = "ncclSend/ncclRecv (alltoall)";
      return group([&] {
        for (int p = 0; p < n; ++p) {
          add(ncclSend(at(src, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
          add(ncclRecv(at(op.recv, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
        }
      });
    }
    case Collective::gather: {
      *call = "ncclSend/ncclRecv (gather)";
      if (rank_ == op.root) d2d(at(op.recv, c * static_cast<size_t>(rank_)), op.send, c * es);  // own part
      return group([&] {
        if (rank_ != op.root) {
          add(ncclSend(op.send, c, t, op.root, nc, stream_));
          return;
        }
        for (int p = 0; p < n; ++p)
          if (p != rank_) add(ncclRecv(at(op.recv, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
      });
    }
    case Collective::scatter: {
      *call = "ncclSend/ncclRecv (scatter)";
      if (rank_ == op.root) d2d(op.recv, at(op.send, c * static_cast<size_t>(rank_)), c * es);  // own part
      return group([&] {
        if (rank_ != op.root) {
          add(ncclRecv(op.recv, c, t, op.root, nc, stream_));
          return;
        }
        for (int p = 0; p < n; ++p)
          if (p != rank_) add(ncclSend(at(op.send, c * static_cast<size_t>(p)), c, t, p, nc, stream_));
      });
    }
    case Collective::sendrecv: {
      *call = "ncclSend/ncclRecv (sendrecv)";
      const void* src = op.send;
      if (op.in_place(rank_)) {  // in place: send from a copy
        src = scratch(c * es);
        d2d(const_cast<void*>(src), op.send, c * es);
      }
      return group([&] {
        add(ncclSend(src, c, t, op.peer, nc, stream_));
        add(ncclRecv(op.recv, c, t, op.recv_peer, nc, stream_));
      });
    }
    case Collective::send:
      *call = "ncclSend";
      return ncclSend(op.send, c, t, op.peer, nc, stream_);
    case Collective::recv:
      *call = "ncclRecv";
      return ncclRecv(op.recv, c, t, op.peer, nc, stream_);
  }
  *call = "?";
  return ncclInvalidArgument;
}

}  // namespace cs
