#include "gloo_communicator.hpp"

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "clock.hpp"
#include "deadline.hpp"
#include "elementwise.hpp"
#include "error.hpp"
#include "host_name.hpp"
#include "launch_env.hpp"
#include "mpi_communicator.hpp"
#include "size.hpp"

namespace cs {

namespace {

using Fn = void (*)(void*, const void*, const void*, size_t);

template <class T>
Fn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::prod:
      return static_cast<Fn>(&gloo::product<T>);
    case ReduceOp::min:
      return static_cast<Fn>(&gloo::min<T>);
    case ReduceOp::max:
      return static_cast<Fn>(&gloo::max<T>);
    case ReduceOp::sum:
    case ReduceOp::avg:  // sum, then a local division (as MPI)
      break;
  }
  return static_cast<Fn>(&gloo::sum<T>);
}

template <class T>
const gloo::ReductionFunction<T>* reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::prod:
      return gloo::ReductionFunction<T>::product;
    case ReduceOp::min:
      return gloo::ReductionFunction<T>::min;
    case ReduceOp::max:
      return gloo::ReductionFunction<T>::max;
    default:
      return gloo::ReductionFunction<T>::sum;
  }
}

// Gloo's rendezvous over commscript's store, every key under `prefix`.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(KvClient& kv, std::string prefix, std::chrono::milliseconds timeout)
      : kv_(kv), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    kv_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = kv_.get(prefix_ + key, timeout_);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    for (const auto& k : keys) kv_.get(prefix_ + k, t.count() > 0 ? t : timeout_);
  }

 private:
  KvClient& kv_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

std::chrono::milliseconds ms_of(double s) {
  return std::chrono::milliseconds(s > 0 ? static_cast<int64_t>(s * 1000) : int64_t{24} * 3600 * 1000);
}

}  // namespace

GlooCommunicator::GlooCommunicator(std::shared_ptr<KvClient> store, std::shared_ptr<KvServer> server,
                                   std::vector<int> members, int rank, std::string name)
    : Communicator(std::move(name)),
      store_(std::move(store)),
      server_(std::move(server)),
      members_(std::move(members)),
      rank_(rank),
      size_(static_cast<int>(members_.size())) {}

GlooCommunicator::~GlooCommunicator() = default;

std::unique_ptr<GlooCommunicator> GlooCommunicator::world(std::shared_ptr<KvClient> store,
                                                          std::shared_ptr<KvServer> server, int rank, int size,
                                                          double timeout_s) {
  std::vector<int> members(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) members[static_cast<size_t>(r)] = r;
  auto c = std::unique_ptr<GlooCommunicator>(
      new GlooCommunicator(std::move(store), std::move(server), std::move(members), rank, "world"));
  c->connect(timeout_s, 0);
  return c;
}

std::unique_ptr<GlooCommunicator> GlooCommunicator::world_over_mpi(double timeout_s) {
  auto mpi = MpiCommunicator::world();
  return over_mpi(*mpi, timeout_s);
}

std::unique_ptr<GlooCommunicator> GlooCommunicator::over_mpi(Communicator& mpi, double timeout_s) {
  std::shared_ptr<KvServer> server;
  std::string endpoint;
  const auto hosts = mpi.allgather(host_name());
  const bool one_host = std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == hosts[0]; });
  std::string error, secret;
  if (mpi.rank() == 0) {
    try {
      secret = job_auth::random_secret();  // drawn here, known only to the job (MPI's broadcast)
      server = std::make_shared<KvServer>(0, 0, secret, KvServer::listen_ip_for(hosts[0], one_host));
      endpoint = (one_host ? server->dial_ip() : hosts[0]) + ":" + std::to_string(server->port());
    } catch (const Error& e) {
      error = e.what();
    }
  }
  endpoint = mpi.broadcast(error.empty() ? endpoint : "!" + error, 0);
  if (!endpoint.empty() && endpoint[0] == '!') throw Error(ExitCode::runtime, "gloo: rank 0: " + endpoint.substr(1));
  secret = mpi.broadcast(secret, 0);
  const auto [host, port] = parse_endpoint(endpoint, "gloo store");
  auto store = std::make_shared<KvClient>(mpi.rank() == 0 ? server->dial_ip() : host, port, mpi.rank(),
                                          ms_of(setup_deadline_s(timeout_s)), 0, secret);
  return world(std::move(store), std::move(server), mpi.rank(), mpi.size(), timeout_s);
}

std::unique_ptr<GlooCommunicator> GlooCommunicator::world_at(const std::string& host, int port, int rank, int size,
                                                             double timeout_s, const std::string& secret) {
  std::shared_ptr<KvServer> server;
  // The server checks each process's rank and size against rank 0's (and that no two claim a rank).
  // It listens on MASTER_ADDR (every interface only when that is not an address of this host).
  if (rank == 0) {
    try {
      std::string ip = KvServer::listen_ip_for(host, false);
      if (ip.empty() && host.rfind("127.", 0) == 0) ip = host;  // a loopback address named as such
      if (ip.empty() && host == "localhost") ip = "127.0.0.1";
      server = std::make_shared<KvServer>(port, size, secret, ip);
    } catch (const Error& e) {
      throw Error(e.code(), std::string(e.what()) + " (MASTER_PORT taken: by another process started as rank 0?)");
    }
  }
  auto store = std::make_shared<KvClient>(rank == 0 ? server->dial_ip() : host, port, rank,
                                          ms_of(setup_deadline_s(timeout_s)), size, secret);
  // Nobody connects to a peer before every rank has joined and none was refused: a process that
  // had started Gloo's connect to a rank that never comes waited there for the whole deadline,
  // deaf to the store's refusal (a RANK given twice, under load).
  try {
    store->get(KvServer::kLaunchKey, ms_of(setup_deadline_s(timeout_s)));
  } catch (const InputError&) {
    if (server) server->drain(std::chrono::milliseconds(2000));
    throw;
  }
  return world(std::move(store), std::move(server), rank, size, timeout_s);
}

void GlooCommunicator::connect(double timeout_s, double grace_s) {
  timeout_s_ = timeout_s;
  local_grace_s_ = grace_s;
  try {
    gloo::transport::tcp::attr attr(store_->local_address().c_str());
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto c = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    c->setTimeout(op_timeout());
    StoreAdapter st(*store_, name_ + "/", op_timeout());
    c->connectFullMesh(st, dev);
    ctx_ = std::move(c);
  } catch (const std::exception& e) {           // gloo::Exception, and Gloo's assertions (EnforceNotMet)
    if (dynamic_cast<const Error*>(&e)) throw;  // the store's own words (a refused launch, a deadline)
    throw Error(ExitCode::runtime, "gloo: rank " + std::to_string(rank_) + ": connecting communicator '" + name_ +
                                       "' of " + std::to_string(size_) + " ranks failed: " + e.what());
  }
}

std::chrono::milliseconds GlooCommunicator::op_timeout() const { return ms_of(timeout_s_ + local_grace_s_); }

std::vector<int> GlooCommunicator::gone_now(int wait_ms) {
  const int64_t until = deadline_ns(std::chrono::milliseconds(wait_ms));
  for (;;) {
    std::vector<int> gone;
    try {
      for (int w : store_->dead_ranks())
        if (auto it = std::find(members_.begin(), members_.end(), w); it != members_.end())
          gone.push_back(static_cast<int>(it - members_.begin()));
    } catch (const Error&) {  // the store (rank 0) is gone too: nothing more to learn from it
      return gone;
    }
    if (!gone.empty() || now_ns() >= until) return gone;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

static std::string rank_list(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

void GlooCommunicator::fail(const Op& op, const std::string& why) {
  const bool timed_out = why.find("imed out") != std::string::npos;
  const std::vector<int> gone = gone_now(timed_out ? 0 : 500);
  const std::string what = std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                           format_size(op.bytes()) + "B, " + name() + ", gloo)";
  if (timed_out && gone.empty())
    throw Error(ExitCode::hang_or_desync, "timeout: " + what + " after " + std::to_string(op_timeout().count() / 1000) +
                                              " s on rank " + std::to_string(rank_) +
                                              ": the other ranks never completed it (gloo: " + why + ")");
  throw RanksLostError(
      what + " failed on rank " + std::to_string(rank_) + ": " +
          (gone.empty() ? std::string("a peer's connection failed")
                        : "rank" + std::string(gone.size() > 1 ? "s " : " ") + rank_list(gone) + " gone") +
          " (gloo: " + why + ")",
      gone);
}

// Call verification's pairwise exchange (sendrecv): a slot no operation's tag reaches.
void GlooCommunicator::exchange(int to, const void* out, int from, void* in, size_t n) {
  constexpr uint64_t kVerifySlot = 0x7e000000;
  if (revoked_) throw_revoked("call verification");
  std::vector<char> copy(static_cast<const char*>(out), static_cast<const char*>(out) + n);
  const auto to_ms = op_timeout();
  try {
    auto rb = ctx_->createUnboundBuffer(in, n);
    rb->recv(from, kVerifySlot);
    auto sb = ctx_->createUnboundBuffer(copy.data(), n);
    sb->send(to, kVerifySlot);
    if (!sb->waitSend(to_ms)) throw gloo::IoException("send aborted");
    if (!rb->waitRecv(to_ms)) throw gloo::IoException("recv aborted");
  } catch (const std::exception& e) {  // gloo::Exception, and Gloo's assertions (EnforceNotMet)
    throw Error(ExitCode::runtime, "call verification on communicator '" + name() + "' (gloo) on rank " +
                                       std::to_string(rank_) + ": " + e.what());
  }
}

void GlooCommunicator::throw_revoked(const std::string& what) {
  throw RanksLostError(what + " on communicator '" + name() + "' (gloo) on rank " + std::to_string(rank_) +
                           ": the communicator was revoked; shrink it first",
                       gone_now(0));
}

void GlooCommunicator::run(const Op& op) {
  if (revoked_) throw_revoked(std::string(collective_name(op.coll)));
  try {
    run_op(op);
  } catch (const gloo::Exception& e) {
    fail(op, e.what());
  } catch (const gloo::EnforceNotMet& e) {  // Gloo's assertion on a pair a dead peer closed (epoll_ctl: EBADF)
    fail(op, e.what());
  }
}

// Point-to-point sides that disagree: Gloo asserts on a message whose size differs from the
// posted buffer, in its own thread (gloo::EnforceNotMet, SIGABRT 134), a dtype mismatch of the
// same size included. So a send first sends a 16-byte header (bytes, dtype) on a slot of its
// own, and the receiving side compares it with its buffer before it posts the receive: a desync
// (exit 5) naming both ranks, both sides and the recipe line.
void GlooCommunicator::p2p_header(const Op& op, uint64_t slot, size_t bytes, std::chrono::milliseconds to) {
  const uint64_t hslot = slot | (uint64_t{1} << 40);
  if (op.coll == Collective::send) {
    p2p_hdr_[0] = bytes;
    p2p_hdr_[1] = static_cast<uint64_t>(op.dtype);
    auto hb = ctx_->createUnboundBuffer(p2p_hdr_, sizeof p2p_hdr_);
    hb->send(op.peer, hslot);
    if (!hb->waitSend(to)) throw gloo::IoException("send aborted");
    return;
  }
  uint64_t theirs[2] = {0, 0};
  auto hb = ctx_->createUnboundBuffer(theirs, sizeof theirs);
  hb->recv(op.peer, hslot);
  if (!hb->waitRecv(to)) throw gloo::IoException("recv aborted");
  if (theirs[0] == bytes && theirs[1] == static_cast<uint64_t>(op.dtype)) return;
  const std::string site = Progress::instance().site();
  const std::string their_dtype = theirs[1] <= static_cast<uint64_t>(DType::bfloat16)
                                      ? std::string(dtype_name(static_cast<DType>(theirs[1])))
                                      : std::to_string(theirs[1]);
  throw Error(ExitCode::hang_or_desync, "desync: recv #" + std::to_string(seq()) + " on " + name() + " (gloo): rank " +
                                            std::to_string(op.peer) + " sends " + std::to_string(theirs[0]) +
                                            " bytes of " + their_dtype + " to rank " + std::to_string(rank_) +
                                            ", which receives " + std::to_string(op.count) + " " +
                                            std::string(dtype_name(op.dtype)) + " (" + std::to_string(bytes) +
                                            " bytes)" + (site.empty() || site == "-" ? std::string() : " at " + site) +
                                            ": the two sides of a send/recv must agree on the size and dtype");
}

void GlooCommunicator::run_op(const Op& op) {
  const auto to = op_timeout();
  ctx_->setTimeout(to);  // what Gloo's older algorithm classes (reduce-scatter) wait by
  switch (op.coll) {
    case Collective::barrier: {
      gloo::BarrierOptions o(ctx_);
      o.setTimeout(to);
      gloo::barrier(o);
      return;
    }
    case Collective::send:
    case Collective::recv:
    case Collective::sendrecv:
      run_point_to_point(op, to);
      return;
    default:
      break;
  }
  visit_dtype(op.dtype, [&]<class T>() { run_typed<T>(op, to); });
}

void GlooCommunicator::run_point_to_point(const Op& op, std::chrono::milliseconds to) {
  const size_t cz = op.count;
  const size_t esz = dtype_size(op.dtype);
  // Point to point: Gloo's unbound buffers, the tag as the slot.
  const uint64_t slot = 0x10000 + static_cast<uint64_t>(op.tag);
  std::unique_ptr<gloo::transport::UnboundBuffer> sb, rb;
  if (op.coll != Collective::sendrecv) p2p_header(op, slot, cz * esz, to);
  void* rptr = op.recv;
  if (op.coll == Collective::sendrecv && op.in_place(rank_)) {
    scratch_.resize(cz * esz);
    rptr = scratch_.data();
  }
  if (op.coll != Collective::send) {
    rb = ctx_->createUnboundBuffer(rptr, cz * esz);
    rb->recv(op.coll == Collective::sendrecv ? op.recv_peer : op.peer, slot);
  }
  if (op.coll != Collective::recv) {
    sb = ctx_->createUnboundBuffer(op.send, cz * esz);
    sb->send(op.peer, slot);
  }
  if (sb && !sb->waitSend(to)) throw gloo::IoException("send aborted");
  if (rb && !rb->waitRecv(to)) throw gloo::IoException("recv aborted");
  if (rptr != op.recv) std::memcpy(op.recv, rptr, cz * esz);
}

template <class T>
void GlooCommunicator::run_typed(const Op& op, std::chrono::milliseconds to) {
  const size_t cz = op.count;
  const size_t esz = dtype_size(op.dtype);
  const size_t n = static_cast<size_t>(size_);
  T* s = static_cast<T*>(op.send);
  T* r = static_cast<T*>(op.recv);
  const bool inplace = op.in_place(rank_);
  switch (op.coll) {
    case Collective::allreduce: {
      gloo::AllreduceOptions o(ctx_);
      if (!inplace) o.setInput(s, cz);  // in place: the output is the input
      o.setOutput(r, cz);
      o.setReduceFunction(reduce_fn<T>(op.redop));
      o.setTimeout(to);
      gloo::allreduce(o);
      if (op.redop == ReduceOp::avg) divide(r, cz, op.dtype, size_);
      break;
    }
    case Collective::reduce: {
      // Gloo reduces through every rank's output buffer; a non-root rank may have none.
      T* out = r;
      if (rank_ != op.root || !out) {
        scratch_.resize(cz * esz);
        out = reinterpret_cast<T*>(scratch_.data());
      }
      gloo::ReduceOptions o(ctx_);
      if (!inplace) o.setInput(s, cz);
      o.setOutput(out, cz);
      o.setRoot(op.root);
      o.setReduceFunction(reduce_fn<T>(op.redop));
      o.setTimeout(to);
      gloo::reduce(o);
      if (op.redop == ReduceOp::avg && rank_ == op.root) divide(r, cz, op.dtype, size_);
      break;
    }
    case Collective::broadcast: {
      gloo::BroadcastOptions o(ctx_);
      if (rank_ == op.root && !inplace) o.setInput(s, cz);
      o.setOutput(r, cz);
      o.setRoot(op.root);
      o.setTimeout(to);
      gloo::broadcast(o);
      break;
    }
    case Collective::allgather: {
      gloo::AllgatherOptions o(ctx_);
      if (!inplace) o.setInput(s, cz);
      o.setOutput(r, cz * n);
      o.setTimeout(to);
      gloo::allgather(o);
      break;
    }
    case Collective::gather: {
      gloo::GatherOptions o(ctx_);
      o.setInput(s, cz);
      if (rank_ == op.root) o.setOutput(r, cz * n);
      o.setRoot(op.root);
      o.setTimeout(to);
      gloo::gather(o);
      break;
    }
    case Collective::scatter: {
      gloo::ScatterOptions o(ctx_);
      if (rank_ == op.root) {
        std::vector<T*> parts(n);
        for (size_t i = 0; i < n; ++i) parts[i] = s + i * cz;
        o.setInputs(parts, cz);
      }
      o.setOutput(r, cz);
      o.setRoot(op.root);
      o.setTimeout(to);
      gloo::scatter(o);
      break;
    }
    case Collective::alltoall: {
      T* in = s;
      if (inplace) {  // Gloo has no in-place all-to-all: send from a copy
        scratch_.resize(cz * n * esz);
        std::memcpy(scratch_.data(), s, cz * n * esz);
        in = reinterpret_cast<T*>(scratch_.data());
      }
      gloo::AlltoallOptions o(ctx_);
      o.setInput(in, cz * n);
      o.setOutput(r, cz * n);
      o.setTimeout(to);
      gloo::alltoall(o);
      break;
    }
    case Collective::reduce_scatter: {
      // Not Gloo's ReduceScatterHalvingDoubling: it sends from its buffer asynchronously and
      // then overwrites the start of that buffer, so rank 0 can receive the end of its chunk
      // already overwritten (seen here: 25 wrong elements on rank 0, 256 KiB at 4 ranks, about
      // 1 run in 5 of bw_sweep --ops all; the same race is reported against Gloo's algorithm
      // elsewhere). An all-reduce of the whole buffer, each rank keeping its chunk, is correct
      // and moves about twice the bytes of a true reduce-scatter (docs/launching.md).
      scratch_.resize(cz * n * esz);
      gloo::AllreduceOptions o(ctx_);
      o.setInput(s, cz * n);
      o.setOutput(reinterpret_cast<T*>(scratch_.data()), cz * n);
      o.setReduceFunction(reduce_fn<T>(op.redop));
      o.setTimeout(to);
      gloo::allreduce(o);
      std::memcpy(r, scratch_.data() + static_cast<size_t>(rank_) * cz * esz, cz * esz);
      if (op.redop == ReduceOp::avg) divide(r, cz, op.dtype, size_);
      break;
    }
    default:
      throw UsageError("gloo: " + std::string(collective_name(op.coll)) + " is not supported");
  }
}

std::unique_ptr<Communicator> GlooCommunicator::split(int color, int key) {
  // Through the store: everyone publishes (color, key), reads everyone's, and the ranks of one
  // color rendezvous under their own prefix.
  const std::string base = name_ + "/s" + std::to_string(++splits_);
  store_->set(base + "/" + std::to_string(rank_), std::to_string(color) + " " + std::to_string(key));
  std::vector<std::pair<int, int>> mine;  // (key, rank) of my color
  for (int r = 0; r < size_; ++r) {
    const std::string v = store_->get(base + "/" + std::to_string(r), op_timeout());
    int c = 0, k = 0;
    std::sscanf(v.c_str(), "%d %d", &c, &k);
    if (c == color) mine.emplace_back(k, r);
  }
  if (color < 0) return nullptr;
  std::sort(mine.begin(), mine.end());
  std::vector<int> members;
  int me = 0;
  for (const auto& [k, r] : mine) {
    if (r == rank_) me = static_cast<int>(members.size());
    members.push_back(members_[static_cast<size_t>(r)]);
  }
  auto sub = std::unique_ptr<GlooCommunicator>(
      new GlooCommunicator(store_, nullptr, std::move(members), me, base + ".c" + std::to_string(color)));
  sub->connect(timeout_s_, local_grace_s_);
  return sub;
}

void GlooCommunicator::revoke() {
  if (revoked_) return;
  revoked_ = true;
  // Closing this rank's connections releases peers still blocked in an operation with it:
  // they fail at once instead of at their deadline.
  try {
    if (ctx_) ctx_->closeConnections();
  } catch (const gloo::Exception&) {
  }
}

std::vector<int> GlooCommunicator::survivors() {
  const std::vector<int> gone = gone_now(0);
  std::vector<int> alive;
  for (int r = 0; r < size_; ++r)
    if (std::find(gone.begin(), gone.end(), r) == gone.end()) alive.push_back(r);
  return alive;
}

std::unique_ptr<Communicator> GlooCommunicator::shrink(const std::vector<int>& exclude) {
  const std::vector<int> gone = gone_now(0);
  std::vector<bool> out(static_cast<size_t>(size_), false);
  // Every rank named: said as such (checked first: the per-rank checks below would only say
  // "excludes itself" on one rank and "is alive" on the others).
  std::vector<bool> named(static_cast<size_t>(size_), false);
  for (int r : exclude)
    if (r >= 0 && r < size_) named[static_cast<size_t>(r)] = true;
  if (size_ > 0 && std::all_of(named.begin(), named.end(), [](bool b) { return b; }))
    throw InputError("shrink: the exclude list names every rank of communicator '" + name_ + "' (0.." +
                     std::to_string(size_ - 1) + "): nothing would be left; exclude only the ranks that are gone");
  for (int r : exclude) {
    if (r < 0 || r >= size_)
      throw InputError("shrink: " + std::to_string(r) + " is not a rank of communicator '" + name_ + "' of " +
                       std::to_string(size_));
    if (r == rank_) throw InputError("shrink: rank " + std::to_string(r) + " excludes itself");
    if (std::find(gone.begin(), gone.end(), r) == gone.end())
      throw InputError("shrink: rank " + std::to_string(r) + " of '" + name_ +
                       "' is alive (its store connection is open); exclude only ranks that are gone (gone: " +
                       (gone.empty() ? "none" : rank_list(gone)) + ")");
    out[static_cast<size_t>(r)] = true;
  }
  std::vector<int> members;
  int me = 0;
  for (int r = 0; r < size_; ++r) {
    if (out[static_cast<size_t>(r)]) continue;
    if (r == rank_) me = static_cast<int>(members.size());
    members.push_back(members_[static_cast<size_t>(r)]);
  }
  auto sub = std::unique_ptr<GlooCommunicator>(
      new GlooCommunicator(store_, nullptr, std::move(members), me, name_ + "/shrink" + std::to_string(++shrinks_)));
  sub->connect(timeout_s_, local_grace_s_);
  return sub;
}

// ---- control-plane helpers: plain Gloo calls under the same deadline, not numbered.
namespace {
template <class F>
void guarded(GlooCommunicator& c, Collective coll, F&& f, const std::string& name) {
  // Its connections are closed: Gloo would end the rank with an assertion (exit 70), not say why.
  if (c.revoked()) c.throw_revoked("control " + std::string(collective_name(coll)));
  try {
    f();
  } catch (const std::exception& e) {  // gloo::Exception, and Gloo's assertions (EnforceNotMet)
    throw Error(ExitCode::runtime, "gloo: control " + std::string(collective_name(coll)) + " on '" + name +
                                       "' failed on rank " + std::to_string(c.rank()) + ": " + e.what());
  }
}
}  // namespace

void GlooCommunicator::allreduce_max(std::vector<double>& v) {
  if (v.empty()) return;
  guarded(
      *this, Collective::allreduce,
      [&] {
        gloo::AllreduceOptions o(ctx_);
        o.setOutput(v.data(), v.size());
        o.setReduceFunction(static_cast<Fn>(&gloo::max<double>));
        o.setTimeout(op_timeout());
        gloo::allreduce(o);
      },
      name_);
}

void GlooCommunicator::allreduce_sum(std::vector<uint64_t>& v) {
  if (v.empty()) return;
  guarded(
      *this, Collective::allreduce,
      [&] {
        gloo::AllreduceOptions o(ctx_);
        o.setOutput(v.data(), v.size());
        o.setReduceFunction(static_cast<Fn>(&gloo::sum<uint64_t>));
        o.setTimeout(op_timeout());
        gloo::allreduce(o);
      },
      name_);
}

std::vector<double> GlooCommunicator::allgather(double v) {
  std::vector<double> out(static_cast<size_t>(size_));
  guarded(
      *this, Collective::allgather,
      [&] {
        gloo::AllgatherOptions o(ctx_);
        o.setInput(&v, 1);
        o.setOutput(out.data(), out.size());
        o.setTimeout(op_timeout());
        gloo::allgather(o);
      },
      name_);
  return out;
}

std::vector<std::string> GlooCommunicator::allgather(const std::string& s) {
  const std::vector<double> lens = allgather(static_cast<double>(s.size()));
  size_t longest = 0;
  for (double l : lens) longest = std::max(longest, static_cast<size_t>(l));
  std::string mine = s;
  mine.resize(longest + 1, '\0');
  std::string all(mine.size() * static_cast<size_t>(size_), '\0');
  guarded(
      *this, Collective::allgather,
      [&] {
        gloo::AllgatherOptions o(ctx_);
        o.setInput(mine.data(), mine.size());
        o.setOutput(all.data(), all.size());
        o.setTimeout(op_timeout());
        gloo::allgather(o);
      },
      name_);
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r) out.push_back(all.substr(r * mine.size(), static_cast<size_t>(lens[r])));
  return out;
}

std::string GlooCommunicator::broadcast(const std::string& s, int root) {
  uint64_t len = s.size();
  std::string out;
  guarded(
      *this, Collective::broadcast,
      [&] {
        gloo::BroadcastOptions o(ctx_);
        o.setOutput(&len, 1);
        o.setRoot(root);
        o.setTimeout(op_timeout());
        gloo::broadcast(o);
        out = rank_ == root ? s : std::string(len, '\0');
        if (len == 0) return;
        gloo::BroadcastOptions d(ctx_);
        d.setOutput(out.data(), out.size());
        d.setRoot(root);
        d.setTimeout(op_timeout());
        gloo::broadcast(d);
      },
      name_);
  return out;
}

}  // namespace cs
