#include "mpi_communicator.hpp"

#if defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // OMPI_HAVE_MPI_EXT_FTMPI / _ULFM when Open MPI was built with ULFM
#endif

#include <climits>
#include <cstring>
#include <string>

#include "elementwise.hpp"
#include "error.hpp"
#include "job.hpp"
#include "poll_wait.hpp"
#include "progress.hpp"
#include "size.hpp"

namespace cs {

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::int8:
      return MPI_INT8_T;
    case DType::uint8:
      return MPI_UINT8_T;
    case DType::int32:
      return MPI_INT32_T;
    case DType::uint32:
      return MPI_UINT32_T;
    case DType::int64:
      return MPI_INT64_T;
    case DType::uint64:
      return MPI_UINT64_T;
    case DType::float32:
      return MPI_FLOAT;
    case DType::float64:
      return MPI_DOUBLE;
    case DType::float16:
    case DType::bfloat16:  // make_op refuses them first (dtype_refusal)
      throw InputError(std::string(dtype_name(t)) + ": not supported by --backend mpi");
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return MPI_SUM;  // avg = sum, then a local division
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
  }
  return MPI_SUM;
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(ExitCode::runtime, std::string(call) + " failed: " + std::string(msg, static_cast<size_t>(len)));
}

int as_int(size_t n, const Op& op) {
  if (n > static_cast<size_t>(INT_MAX))
    throw InputError(std::string(collective_name(op.coll)) + ": " + std::to_string(n) +
                     " elements exceed MPI's int count; use a larger dtype or a smaller size");
  return static_cast<int>(n);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name) : Communicator(std::move(name)), comm_(comm) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_dup(comm_, &verify_comm_);
  MPI_Comm_set_errhandler(verify_comm_, MPI_ERRORS_RETURN);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && verify_comm_ != MPI_COMM_NULL) MPI_Comm_free(&verify_comm_);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  MPI_Comm c;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(c, "world"));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::of(MPI_Comm host) {
  MPI_Comm c;
  check(MPI_Comm_dup(host, &c), "MPI_Comm_dup");
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(c, "world"));
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm c;
  check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &c), "MPI_Comm_split");
  ++splits_;  // on every rank, even one left out: the names must agree
  if (c == MPI_COMM_NULL) return nullptr;
  // world/s2.c0: the second split of world, color 0 (names must differ between splits).
  auto sub = std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(c, name() + "/s" + std::to_string(splits_) + ".c" + std::to_string(color)));
  sub->set_timeout(timeout_s_, local_grace_s_);
  sub->set_verify(verify_);
  return sub;
}

void MpiCommunicator::wait(MPI_Request* reqs, int n, const Op& op, const char* call) {
  WaitClock clock;  // a freeze of this process is not time waited for the others
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  constexpr int64_t kCancelGraceNs = 3000000000LL;
  int64_t cancel_t0 = 0;
  for (unsigned spins = 0;; ++spins) {
    int done = 0;
    check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), call);
    // An embedded run that a failure elsewhere ended (job.hpp) stops at its next operation. One
    // in flight gets a short while to complete first (a rank released from an injected hang
    // still joins it), so that no request is left pending on buffers that are about to go.
    if (const int code = job::cancel_code()) {
      if (!cancel_t0) cancel_t0 = now_ns();
      if (done || now_ns() - cancel_t0 > kCancelGraceNs)
        throw Error(static_cast<ExitCode>(code), std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) +
                                                     " on rank " + std::to_string(rank_) + (done ? "" : " abandoned") +
                                                     ": the run was ended by a failure elsewhere");
    }
    if (done) return;
    const double waited = clock.waited_s();
    if (limit > 0 && waited > limit)
      throw Error(ExitCode::hang_or_desync,
                  "timeout: " + std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                      format_size(op.bytes()) + "B, " + name() + ") after " + std::to_string(static_cast<int>(waited)) +
                      " s on rank " + std::to_string(rank_) + ": the other ranks never completed it");
    pause_poll(waited, spins);  // core/poll_wait.hpp
  }
}

// Point-to-point sides that disagree: a send of 100,000 floats against a receive of 10
// corrupted the heap ("free(): invalid pointer") instead of MPI reporting the truncation. The
// receiving side therefore looks at the incoming message (MPI_Iprobe, under the deadline)
// before receiving it, and refuses one whose size differs from its buffer's: a desync (exit 5)
// naming both ranks, both sizes and the recipe line.
void MpiCommunicator::check_incoming(const Op& op) {
  WaitClock clock;
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  MPI_Status st{};
  for (unsigned spins = 0;; ++spins) {
    int found = 0;
    check(MPI_Iprobe(op.peer, op.tag, comm_, &found, &st), "MPI_Iprobe");
    if (found) break;
    if (job::cancel_code()) return;  // the receive's own wait says so
    const double waited = clock.waited_s();
    if (limit > 0 && waited > limit) return;  // the receive's own wait names the timeout
    pause_poll(waited, spins);
  }
  MPI_Count bytes = 0;
  check(MPI_Get_elements_x(&st, MPI_BYTE, &bytes), "MPI_Get_elements_x");
  const size_t want = op.count * dtype_size(op.dtype);
  if (static_cast<size_t>(bytes) == want) return;
  const std::string site = Progress::instance().site();
  throw Error(ExitCode::hang_or_desync,
              "desync: recv #" + std::to_string(seq()) + " on " + name() + ": rank " + std::to_string(op.peer) +
                  " sends " + std::to_string(bytes) + " bytes to rank " + std::to_string(rank_) + ", which receives " +
                  std::to_string(op.count) + " " + std::string(dtype_name(op.dtype)) + " (" + std::to_string(want) +
                  " bytes)" + (site.empty() || site == "-" ? std::string() : " at " + site) +
                  ": the two sides of a send/recv must agree on the size");
}

template <class Blocking, class Start>
void MpiCommunicator::blocking_or_polled(const Op& op, const char* call, Blocking&& blocking, Start&& start) {
  if (op.blocking) {
    check(blocking(), call);
  } else {
    MPI_Request req = MPI_REQUEST_NULL;
    check(start(&req), call);
    wait(&req, 1, op, call);
  }
}

void MpiCommunicator::run(const Op& op) {
  const MPI_Datatype t = mpi_type(op.dtype);
  const int c = as_int(op.count, op);
  const size_t cz = op.count;
  // Either the blocking call, or the nonblocking one and a polled wait.
  auto go = [&](const char* call, auto&& blocking, auto&& start) { blocking_or_polled(op, call, blocking, start); };
  const bool inplace = op.in_place(rank_);
  switch (op.coll) {
    case Collective::barrier:
      go(
          "MPI_Barrier", [&] { return MPI_Barrier(comm_); }, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
      break;
    case Collective::allreduce: {
      const void* sb = inplace ? MPI_IN_PLACE : op.send;
      go(
          "MPI_Allreduce", [&] { return MPI_Allreduce(sb, op.recv, c, t, mpi_op(op.redop), comm_); },
          [&](MPI_Request* r) { return MPI_Iallreduce(sb, op.recv, c, t, mpi_op(op.redop), comm_, r); });
      if (op.redop == ReduceOp::avg) divide(op.recv, cz, op.dtype, size_);
      break;
    }
    case Collective::reduce: {
      const void* sb = inplace ? MPI_IN_PLACE : op.send;
      go(
          "MPI_Reduce", [&] { return MPI_Reduce(sb, op.recv, c, t, mpi_op(op.redop), op.root, comm_); },
          [&](MPI_Request* r) { return MPI_Ireduce(sb, op.recv, c, t, mpi_op(op.redop), op.root, comm_, r); });
      if (op.redop == ReduceOp::avg && rank_ == op.root) divide(op.recv, cz, op.dtype, size_);
      break;
    }
    case Collective::broadcast:
      if (rank_ == op.root && !inplace) std::memcpy(op.recv, op.send, cz * dtype_size(op.dtype));
      go(
          "MPI_Bcast", [&] { return MPI_Bcast(op.recv, c, t, op.root, comm_); },
          [&](MPI_Request* r) { return MPI_Ibcast(op.recv, c, t, op.root, comm_, r); });
      break;
    case Collective::allgather: {
      const void* sb = inplace ? MPI_IN_PLACE : op.send;
      go(
          "MPI_Allgather", [&] { return MPI_Allgather(sb, c, t, op.recv, c, t, comm_); },
          [&](MPI_Request* r) { return MPI_Iallgather(sb, c, t, op.recv, c, t, comm_, r); });
      break;
    }
    case Collective::reduce_scatter: {
      char* mine = at(op.send, cz * static_cast<size_t>(rank_), op.dtype);
      // NCCL's in-place result lives at send + rank*count; MPI's at the start of the buffer.
      const void* sb = inplace ? MPI_IN_PLACE : op.send;
      void* rb = inplace ? op.send : op.recv;
      go(
          "MPI_Reduce_scatter_block", [&] { return MPI_Reduce_scatter_block(sb, rb, c, t, mpi_op(op.redop), comm_); },
          [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(sb, rb, c, t, mpi_op(op.redop), comm_, r); });
      if (inplace && rank_ != 0) std::memmove(mine, op.send, cz * dtype_size(op.dtype));
      if (op.redop == ReduceOp::avg) divide(op.recv, cz, op.dtype, size_);
      break;
    }
    case Collective::alltoall: {
      const void* sb = inplace ? MPI_IN_PLACE : op.send;
      go(
          "MPI_Alltoall", [&] { return MPI_Alltoall(sb, c, t, op.recv, c, t, comm_); },
          [&](MPI_Request* r) { return MPI_Ialltoall(sb, c, t, op.recv, c, t, comm_, r); });
      break;
    }
    case Collective::gather: {
      const void* sb = inplace ? MPI_IN_PLACE : op.send;
      go(
          "MPI_Gather", [&] { return MPI_Gather(sb, c, t, op.recv, c, t, op.root, comm_); },
          [&](MPI_Request* r) { return MPI_Igather(sb, c, t, op.recv, c, t, op.root, comm_, r); });
      break;
    }
    case Collective::scatter: {
      void* rb = inplace ? MPI_IN_PLACE : op.recv;
      go(
          "MPI_Scatter", [&] { return MPI_Scatter(op.send, c, t, rb, c, t, op.root, comm_); },
          [&](MPI_Request* r) { return MPI_Iscatter(op.send, c, t, rb, c, t, op.root, comm_, r); });
      break;
    }
    case Collective::sendrecv:
    case Collective::send:
    case Collective::recv:
      run_point_to_point(op);
      break;
  }
}

void MpiCommunicator::run_point_to_point(const Op& op) {
  const MPI_Datatype t = mpi_type(op.dtype);
  const int c = as_int(op.count, op);
  const size_t cz = op.count;
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  const bool inplace = op.in_place(rank_);
  auto go = [&](const char* call, auto&& blocking, auto&& start) { blocking_or_polled(op, call, blocking, start); };
  switch (op.coll) {
    case Collective::sendrecv:
      if (op.blocking) {
        if (inplace)
          check(MPI_Sendrecv_replace(op.recv, c, t, op.peer, op.tag, op.recv_peer, op.tag, comm_, MPI_STATUS_IGNORE),
                "MPI_Sendrecv_replace");
        else
          check(MPI_Sendrecv(op.send, c, t, op.peer, op.tag, op.recv, c, t, op.recv_peer, op.tag, comm_,
                             MPI_STATUS_IGNORE),
                "MPI_Sendrecv");
      } else {
        // In place: receive into scratch (MPI 3 has no nonblocking sendrecv_replace), then copy.
        std::vector<char> scratch(inplace ? cz * dtype_size(op.dtype) : 0);
        void* rb = inplace ? scratch.data() : op.recv;
        check(MPI_Irecv(rb, c, t, op.recv_peer, op.tag, comm_, &req[0]), "MPI_Irecv");
        check(MPI_Isend(op.send, c, t, op.peer, op.tag, comm_, &req[1]), "MPI_Isend");
        wait(req, 2, op, "MPI_Sendrecv");
        if (!scratch.empty()) std::memcpy(op.recv, scratch.data(), scratch.size());
      }
      break;
    case Collective::send:
    case Collective::recv:
      if (op.window > 1) {  // osu_bw: the window posted nonblocking, then waited for together
        MPI_Request w[Op::kMaxWindow];
        const int n = std::min(op.window, Op::kMaxWindow);
        const bool s = op.coll == Collective::send;
        for (int i = 0; i < n; ++i)
          check(s ? MPI_Isend(op.send, c, t, op.peer, op.tag, comm_, &w[i])
                  : MPI_Irecv(op.recv, c, t, op.peer, op.tag, comm_, &w[i]),
                s ? "MPI_Isend" : "MPI_Irecv");
        if (op.blocking)
          check(MPI_Waitall(n, w, MPI_STATUSES_IGNORE), "MPI_Waitall");
        else
          wait(w, n, op, "MPI_Waitall");
        break;
      }
      if (op.coll == Collective::recv) {
        check_incoming(op);  // a larger message than the buffer: refused before it is received
        go(
            "MPI_Recv", [&] { return MPI_Recv(op.recv, c, t, op.peer, op.tag, comm_, MPI_STATUS_IGNORE); },
            [&](MPI_Request* r) { return MPI_Irecv(op.recv, c, t, op.peer, op.tag, comm_, r); });
        break;
      }
      go(
          "MPI_Send", [&] { return MPI_Send(op.send, c, t, op.peer, op.tag, comm_); },
          [&](MPI_Request* r) { return MPI_Isend(op.send, c, t, op.peer, op.tag, comm_, r); });
      break;
    default:
      break;
  }
}

double MpiCommunicator::time_loop_us(const Op& op, size_t iters) {
  if (hooked() || !op.blocking || iters == 0) return Communicator::time_loop_us(op, iters);
  const TimedStep step{&op, 1};
  const MPI_Comm cm = comm_;
  const MPI_Datatype t = op.coll == Collective::barrier ? MPI_BYTE : mpi_type(op.dtype);
  const int c = as_int(op.count, op);
  const bool inplace = op.in_place(rank_);
  const void* sb = inplace ? MPI_IN_PLACE : op.send;  // used only where in place is one buffer
  void* rb = op.recv;
  // Each case is what run() calls for the op, with nothing left to decide per call; ops that
  // need work around the call (avg's division, NCCL's in-place layouts, the root's copy) are
  // not among them.
  switch (op.coll) {
    case Collective::barrier:
      return loop_steps(&step, 1, iters, [cm](const Op&) { check(MPI_Barrier(cm), "MPI_Barrier"); });
    case Collective::allreduce:
      if (op.redop == ReduceOp::avg) break;
      return loop_steps(&step, 1, iters, [=, o = mpi_op(op.redop)](const Op&) {
        check(MPI_Allreduce(sb, rb, c, t, o, cm), "MPI_Allreduce");
      });
    case Collective::alltoall:
      return loop_steps(&step, 1, iters,
                        [=](const Op&) { check(MPI_Alltoall(sb, c, t, rb, c, t, cm), "MPI_Alltoall"); });
    case Collective::allgather:
      if (inplace) break;
      return loop_steps(&step, 1, iters,
                        [=, s = op.send](const Op&) { check(MPI_Allgather(s, c, t, rb, c, t, cm), "MPI_Allgather"); });
    case Collective::sendrecv:
      if (inplace) break;
      return loop_steps(&step, 1, iters, [=, to = op.peer, from = op.recv_peer, tag = op.tag](const Op&) {
        check(MPI_Sendrecv(sb, c, t, to, tag, rb, c, t, from, tag, cm, MPI_STATUS_IGNORE), "MPI_Sendrecv");
      });
    default:
      break;
  }
  return Communicator::time_loop_us(op, iters);
}

// The control-plane helpers move results between timed regions. They are not numbered
// operations, but they wait by polling against the same deadline: a rank that never arrives
// must not leave the others stuck here either.
void MpiCommunicator::control_wait(MPI_Request& req, Collective coll, size_t bytes, const char* call) {
  Op op;
  op.coll = coll;
  op.count = bytes;
  op.dtype = DType::uint8;
  op.nranks = 1;
  wait(&req, 1, op, call);
}

void MpiCommunicator::allreduce_max(std::vector<double>& v) {
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, comm_, &r),
        "MPI_Allreduce");
  control_wait(r, Collective::allreduce, v.size() * sizeof(double), "MPI_Allreduce");
}

void MpiCommunicator::verify_max(std::vector<double>& v) {
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, verify_comm_, &r),
        "MPI_Allreduce");
  control_wait(r, Collective::allreduce, v.size() * sizeof(double), "MPI_Allreduce");
}

void MpiCommunicator::allreduce_sum(std::vector<uint64_t>& v) {
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_UINT64_T, MPI_SUM, comm_, &r),
        "MPI_Allreduce");
  control_wait(r, Collective::allreduce, v.size() * sizeof(uint64_t), "MPI_Allreduce");
}

std::vector<double> MpiCommunicator::allgather(double v) {
  std::vector<double> out(static_cast<size_t>(size_));
  MPI_Request r;
  check(MPI_Iallgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, comm_, &r), "MPI_Allgather");
  control_wait(r, Collective::allgather, sizeof(double), "MPI_Allgather");
  return out;
}

std::vector<std::string> MpiCommunicator::allgather(const std::string& s) {
  int len = static_cast<int>(s.size());
  std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  MPI_Request r;
  check(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_, &r), "MPI_Allgather");
  control_wait(r, Collective::allgather, sizeof(int), "MPI_Allgather");
  int total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  check(MPI_Iallgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, comm_, &r),
        "MPI_Allgatherv");
  control_wait(r, Collective::allgather, static_cast<size_t>(total), "MPI_Allgatherv");
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i)
    out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(lens[i])));
  return out;
}

std::vector<std::string> MpiCommunicator::gather(const std::string& s, int root) {
  int len = static_cast<int>(s.size());
  const bool me = rank_ == root;
  std::vector<int> lens(me ? static_cast<size_t>(size_) : 0), displs(lens.size());
  MPI_Request r;
  check(MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm_, &r), "MPI_Gather");
  control_wait(r, Collective::gather, sizeof(int), "MPI_Gather");
  int total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  check(MPI_Igatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, root, comm_, &r),
        "MPI_Gatherv");
  control_wait(r, Collective::gather, static_cast<size_t>(me ? total : len), "MPI_Gatherv");
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i)
    out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(lens[i])));
  return out;
}

std::string MpiCommunicator::broadcast(const std::string& s, int root) {
  unsigned long len = s.size();
  MPI_Request r;
  check(MPI_Ibcast(&len, 1, MPI_UNSIGNED_LONG, root, comm_, &r), "MPI_Bcast");
  control_wait(r, Collective::broadcast, sizeof len, "MPI_Bcast");
  std::string out = rank_ == root ? s : std::string(len, '\0');
  check(MPI_Ibcast(out.data(), static_cast<int>(len), MPI_CHAR, root, comm_, &r), "MPI_Bcast");
  control_wait(r, Collective::broadcast, len, "MPI_Bcast");
  return out;
}

void MpiCommunicator::exchange(int to, const void* out, int from, void* in, size_t n) {
  // A tag of its own: never matches a recipe's send/recv.
  constexpr int kTagExchange = 0x7c5e;
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  check(MPI_Irecv(in, static_cast<int>(n), MPI_BYTE, from, kTagExchange, comm_, &r[0]), "MPI_Irecv");
  check(MPI_Isend(out, static_cast<int>(n), MPI_BYTE, to, kTagExchange, comm_, &r[1]), "MPI_Isend");
  Op op;
  op.coll = Collective::sendrecv;
  op.count = n;
  op.dtype = DType::uint8;
  op.nranks = 1;
  wait(r, 2, op, "MPI_Sendrecv");
}

std::string mpi_library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<size_t>(len));
  // Keep the first line up to the first comma: "Open MPI v4.1.4", "MPICH Version: 4.0.2".
  s = s.substr(0, s.find_first_of(",\n"));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

// Whether this MPI's headers declare the ULFM fault-tolerance extensions (MPI-4 ULFM proposal:
// Open MPI 5 built with --with-ft, MPICH 4). The mpi backend does not use them either way: it
// says which case it is.
bool mpi_has_ulfm() {
#if defined(MPIX_ERR_PROC_FAILED) || defined(OMPI_HAVE_MPI_EXT_FTMPI) || defined(OMPI_HAVE_MPI_EXT_ULFM)
  return true;
#else
  return false;
#endif
}

std::string MpiCommunicator::no_shrink_reason() const {
  const std::string lib = mpi_library_version();
  if (mpi_has_ulfm())
    return "cannot survive a dropped rank: this MPI (" + lib +
           ") declares the ULFM extensions (MPIX_Comm_revoke/MPIX_Comm_shrink), but commscript's mpi backend does "
           "not use them yet, so a rank that dies takes the job with it; use --backend gloo (--launcher env or "
           "slurm) for elastic drills";
  return "cannot survive a dropped rank: this MPI (" + lib +
         ") has no ULFM (MPIX_Comm_revoke/MPIX_Comm_shrink), so a rank that dies takes the job with it; use "
         "--backend gloo (--launcher env or slurm) for elastic drills";
}

}  // namespace cs
