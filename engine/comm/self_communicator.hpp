#pragma once
#include <deque>
#include <vector>

#include "communicator.hpp"

namespace cs {

// One process, no MPI: every collective is a copy of the rank's own contribution. For tests and
// for running recipes on a laptop. send/recv to self go through a mailbox.
class SelfCommunicator final : public Communicator {
 public:
  SelfCommunicator() : Communicator("world") {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  std::unique_ptr<Communicator> split(int color, int key) override;

  void allreduce_max(std::vector<double>&) override {}
  void allreduce_sum(std::vector<uint64_t>&) override {}
  std::vector<double> allgather(double v) override { return {v}; }
  std::vector<std::string> allgather(const std::string& s) override { return {s}; }
  std::string broadcast(const std::string& s, int) override { return s; }

 protected:
  void run(const Op& op) override;

 private:
  std::deque<std::vector<char>> mailbox_;
};

}  // namespace cs
