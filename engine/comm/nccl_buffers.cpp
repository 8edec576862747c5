// Which buffers the NCCL backend accepts: device memory of the rank's GPU (or managed memory),
// judged by cudaPointerGetAttributes before anything is enqueued; a host, pinned or other GPU's
// buffer is refused with a UsageError that names the operation.
#include "nccl_communicator.hpp"

namespace cs {

void check_nccl_buffers(const Op& op, int rank, int device, const std::string& comm_name, const BufferPlace& send,
                        const BufferPlace& recv) {
  const bool root = rank == op.root;
  const Collective c = op.coll;
  const bool uses_send = c != Collective::recv && c != Collective::barrier && (c != Collective::scatter || root);
  const bool uses_recv = c != Collective::send && c != Collective::barrier &&
                         ((c != Collective::gather && c != Collective::reduce) || root);
  auto judge = [&](const BufferPlace& p, const char* which) {
    if (p.managed || (p.where == MemLocation::device && p.device == device)) return;
    const std::string w =
        std::string(collective_name(c)) + " on communicator '" + comm_name + "': the " + which + " buffer ";
    if (p.where == MemLocation::device)
      throw UsageError(w + "is on GPU " + std::to_string(p.device) + ", but this rank's NCCL communicator uses GPU " +
                       std::to_string(device));
    throw UsageError(w + "is in " + (p.where == MemLocation::pinned ? "pinned host" : "host") +
                     " memory; --backend nccl needs buffers on the rank's GPU (comm:bench allocates them there)");
  };
  if (uses_send) judge(send, "send");
  if (uses_recv) judge(recv, "receive");
}

namespace {

BufferPlace place_of(const void* p) {
  BufferPlace b;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return b;
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
      b.where = MemLocation::device;
      b.device = a.device;
      break;
    case cudaMemoryTypeManaged:
      b.where = MemLocation::device;
      b.device = a.device;
      b.managed = true;
      break;
    case cudaMemoryTypeHost:
      b.where = MemLocation::pinned;
      break;
    default:
      break;
  }
  return b;
}

}  // namespace

void NcclCommunicator::check_buffers(const Op& op) {
  // Timed loops run one operation on the same buffers many times: those are judged once.
  auto known = [&](const void* p) {
    if (!p) return true;
    for (const void* k : checked_)
      if (k == p) return true;
    return false;
  };
  if (op.blocking && known(op.send) && known(op.recv)) return;
  check_nccl_buffers(op, rank_, device_, name(), op.send ? place_of(op.send) : BufferPlace{},
                     op.recv ? place_of(op.recv) : BufferPlace{});
  for (const void* p : {static_cast<const void*>(op.send), static_cast<const void*>(op.recv)})
    if (p && !known(p)) checked_[checked_next_++ % 4] = p;
}

}  // namespace cs
