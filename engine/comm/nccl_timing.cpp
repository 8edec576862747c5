// The NCCL backend's timing: CUDA events around one operation, or around a whole timed loop
// enqueued back to back on the blocking twin and waited for once.
#include "cuda_device.hpp"
#include "nccl_communicator.hpp"
#include "progress.hpp"

namespace cs {

double NcclCommunicator::timed_execute_us(const Op& op) {
  execute(op);
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, ev_start_, ev_end_), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e3;
}

double NcclCommunicator::time_loop_us(const Op& op, size_t iters) {
  if (!device_timing() || iters == 0) return Communicator::time_loop_us(op, iters);
  Op o = op;
  o.blocking = true;
  // CUDA events around the whole loop on the blocking communicator; the operations are enqueued
  // back to back and the stream is waited for once, against the deadline.
  cuda_check(cudaEventRecord(ev_start_, stream_), "cudaEventRecord");
  pipelined_ = true;
  try {
    for (size_t i = 0; i < iters; ++i) execute(o);
  } catch (...) {
    pipelined_ = false;
    throw;
  }
  pipelined_ = false;
  cuda_check(cudaEventRecord(ev_end_, stream_), "cudaEventRecord");
  wait(o, "time_loop", false, now_ns());
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, ev_start_, ev_end_), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e3;
}

}  // namespace cs
