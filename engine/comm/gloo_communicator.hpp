#pragma once
// The Gloo backend: Gloo's TCP transport on the CPU, rendezvous through commscript's own store
// (kv_store.hpp, served by rank 0). Every collective and send/recv runs as a blocking Gloo call
// bounded by the communicator's deadline (Gloo's own per-operation timeout). It survives a
// dropped rank: survivors see RanksLostError, revoke() and shrink() build a new Gloo context
// among them through the same store.
#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"
#include "kv_store.hpp"

namespace gloo {
class Context;
}

namespace cs {

class GlooCommunicator final : public Communicator {
 public:
  // Joins the world: `store` connected to rank 0's server (`server` only on the rank that runs
  // it, kept alive by the world communicator). Throws Error on a rendezvous that fails.
  static std::unique_ptr<GlooCommunicator> world(std::shared_ptr<KvClient> store, std::shared_ptr<KvServer> server,
                                                 int rank, int size, double timeout_s);
  // Under mpirun: rank 0 serves the store and MPI tells everyone where, and the job's secret
  // that rank 0 drew (docs/security.md), before any socket opens (MPI must be initialised).
  static std::unique_ptr<GlooCommunicator> world_over_mpi(double timeout_s);
  // The same over `mpi` (an embedded run's host communicator).
  static std::unique_ptr<GlooCommunicator> over_mpi(Communicator& mpi, double timeout_s);
  // Without MPI (--launcher env): rank 0 serves the store on `port` of its host, the others dial
  // host:port (waiting up to the deadline for it to appear); every process proves `secret` (the
  // job token; empty: the insecure opt-out).
  static std::unique_ptr<GlooCommunicator> world_at(const std::string& host, int port, int rank, int size,
                                                    double timeout_s, const std::string& secret = "");
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "gloo"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string dtype_refusal(DType t) const override {
    return dtype_is_16bit_float(t) ? "commscript's Gloo backend has no float16/bfloat16 reductions; use "
                                     "--backend nccl for them, or float32 on gloo"
                                   : "";
  }

  void revoke() override;
  bool revoked() const { return revoked_; }
  // What every operation on a revoked communicator raises (ranks_lost, naming the revoke): its
  // connections are closed, and Gloo would end the rank with an assertion instead.
  [[noreturn]] void throw_revoked(const std::string& what);
  std::vector<int> survivors() override;
  std::unique_ptr<Communicator> shrink(const std::vector<int>& exclude) override;

  void allreduce_max(std::vector<double>& v) override;
  void exchange(int to, const void* out, int from, void* in, size_t n) override;
  void allreduce_sum(std::vector<uint64_t>& v) override;
  std::vector<double> allgather(double v) override;
  std::vector<std::string> allgather(const std::string& s) override;
  std::string broadcast(const std::string& s, int root) override;

  // World ranks of this communicator's ranks.
  const std::vector<int>& members() const { return members_; }

 protected:
  void run(const Op& op) override;

 private:
  GlooCommunicator(std::shared_ptr<KvClient> store, std::shared_ptr<KvServer> server, std::vector<int> members,
                   int rank, std::string name);
  void connect(double timeout_s, double grace_s);
  void run_op(const Op& op);
  void run_point_to_point(const Op& op, std::chrono::milliseconds to);  // send, recv, sendrecv
  template <class T>
  void run_typed(const Op& op, std::chrono::milliseconds to);  // the collectives but barrier, on T
  void p2p_header(const Op& op, uint64_t slot, size_t bytes, std::chrono::milliseconds to);
  uint64_t p2p_hdr_[2] = {0, 0};  // a send's header (bytes, dtype): alive until its send completes
  std::chrono::milliseconds op_timeout() const;
  [[noreturn]] void fail(const Op& op, const std::string& why);
  std::vector<int> gone_now(int wait_ms);

  std::shared_ptr<KvClient> store_;
  std::shared_ptr<KvServer> server_;
  std::shared_ptr<gloo::Context> ctx_;
  std::vector<int> members_;  // world rank of each rank
  int rank_ = 0, size_ = 1;
  int splits_ = 0, shrinks_ = 0;
  bool revoked_ = false;
  std::vector<char> scratch_;  // in-place alltoall, reduce_scatter, a non-root reduce
};

}  // namespace cs
