#pragma once
#include <mpi.h>

#include <memory>

#include "communicator.hpp"

namespace cs {

// The MPI backend, with NCCL's in-place conventions mapped onto MPI_IN_PLACE. Timed loops use
// the blocking calls (what OSU/IMB time); every other operation is started nonblocking and
// polled against its deadline. Requires MPI to be initialised (see job.hpp).
class MpiCommunicator final : public Communicator {
 public:
  // A duplicate of MPI_COMM_WORLD, so that engine traffic never matches user traffic.
  static std::unique_ptr<MpiCommunicator> world();
  // A duplicate of a communicator a host program lent (embedding); it plays the world.
  static std::unique_ptr<MpiCommunicator> of(MPI_Comm host);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  bool windowed_p2p() const override { return true; }
  // The headline loop of the common collectives with its MPI arguments prepared once (see
  // loop_steps); anything else, and any loop under a hook, goes through the generic path.
  double time_loop_us(const Op& op, size_t iters) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  void allreduce_max(std::vector<double>& v) override;
  void allreduce_sum(std::vector<uint64_t>& v) override;
  std::vector<double> allgather(double v) override;
  std::vector<std::string> allgather(const std::string& s) override;
  std::string broadcast(const std::string& s, int root) override;
  std::vector<std::string> gather(const std::string& s, int root) override;
  void exchange(int to, const void* out, int from, void* in, size_t n) override;
  void verify_max(std::vector<double>& v) override;
  std::string no_shrink_reason() const override;
  std::string dtype_refusal(DType t) const override {
    return dtype_is_16bit_float(t) ? "MPI has no 16-bit floating-point type to reduce; use --backend nccl for "
                                     "float16/bfloat16, or float32 on mpi"
                                   : "";
  }

 protected:
  void run(const Op& op) override;

 private:
  MpiCommunicator(MPI_Comm comm, std::string name);
  // Polls the started requests until they complete; past the deadline (plus grace) it gives up
  // with a timeout error instead of waiting forever.
  void wait(MPI_Request* reqs, int n, const Op& op, const char* call);
  void check_incoming(const Op& op);
  // The blocking call, or the nonblocking one and a polled wait.
  template <class Blocking, class Start>
  void blocking_or_polled(const Op& op, const char* call, Blocking&& blocking, Start&& start);
  void run_point_to_point(const Op& op);  // sendrecv, send, recv
  void control_wait(MPI_Request& req, Collective coll, size_t bytes, const char* call);
  MPI_Comm comm_;
  MPI_Comm verify_comm_ = MPI_COMM_NULL;  // call verification's own channel
  int rank_ = 0, size_ = 1;
  int splits_ = 0;
};

// "Open MPI 4.1.4" / "MPICH 4.0.2": the library this binary runs with.
std::string mpi_library_version();

}  // namespace cs
