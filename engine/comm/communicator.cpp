#include "communicator.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "error.hpp"

namespace cs {

// The host steady clock around the loop: nothing between the calls but the loop counters, so the
// time per iteration is what a plain MPI loop (nccl-tests, OSU, IMB) would measure plus two
// stores per call (see time_steps_us).
double Communicator::time_loop_us(const Op& op, size_t iters) {
  const TimedStep step{&op, 1};
  return time_steps_us(&step, 1, iters);
}

double Communicator::time_steps_us(const TimedStep* steps, size_t nsteps, size_t iters) {
  if (nsteps == 0 || iters == 0) return 0;
  if (hooked() || nsteps > Progress::kLoopKinds) {
    // Every call through execute(): the hook (fault injection) fires per operation.
    const int64_t t0 = now_ns();
    for (size_t i = 0; i < iters; ++i)
      for (size_t s = 0; s < nsteps; ++s)
        for (uint32_t r = 0; r < steps[s].repeat; ++r) execute(*steps[s].op);
    return static_cast<double>(now_ns() - t0) * 1e-3;
  }
  return loop_steps(steps, nsteps, iters, [this](const Op& op) { run(op); });
}

// The traffic counters of a fast loop's k calls, added once after it (the loop itself stores
// nothing per call but the sequence number): what execute() would have counted call by call,
// the collective count included.
void Communicator::count_loop(const TimedStep* steps, size_t nsteps, uint64_t per_iter, uint64_t k) {
  const uint64_t full = k / per_iter;
  uint64_t rest = k % per_iter, ops = 0, bytes = 0;
  for (size_t s = 0; s < nsteps; ++s) {
    const Op& op = *steps[s].op;
    const uint64_t extra = std::min<uint64_t>(rest, steps[s].repeat);
    rest -= extra;
    if (!collective_is_pairwise(op.coll)) cseq_ += full * steps[s].repeat + extra;
    const uint64_t calls = (full * steps[s].repeat + extra) * static_cast<uint64_t>(op.window > 1 ? op.window : 1);
    ops += calls;
    bytes += calls * collective_counts(op.coll, op.count, op.nranks).send * dtype_size(op.dtype);
  }
  traffic_.ops.fetch_add(ops, std::memory_order_relaxed);
  traffic_.bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
}

int64_t Communicator::execute_with_hook(OpHook& h, const Op& op, const CallSite* site) {
  // What a hook does to keep the rank from arriving (a delay, a hang, an exit) or to change what
  // it calls happens before the operation is recorded as started: to everyone else this rank
  // simply has not arrived yet.
  Op actual = op;
  h.before(actual, seq_ + 1, name_);
  const int64_t t0 = Progress::instance().begin(++seq_, next_cseq(actual.coll), actual.coll, actual.bytes(), name_,
                                                timeout_s_, actual.count, static_cast<int32_t>(actual.dtype));
  // What this rank really calls is what the others must agree with (a desync injection
  // included: it is diagnosed as the real one would be).
  if (site && verify_) verify(actual, *site);
  run(actual);
  Progress::instance().end();
  h.after(actual, seq_, t0);
  return t0;
}

std::vector<std::string> Communicator::gather(const std::string& s, int root) {
  std::vector<std::string> all = allgather(s);
  if (rank() != root) all.clear();
  return all;
}

void Communicator::exchange(int to, const void* out, int from, void* in, size_t n) {
  if (to != rank() || from != rank())
    throw Error(ExitCode::internal, backend() + " communicator: exchange between ranks is not implemented");
  std::memmove(in, out, n);
}

namespace {

uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

// What every rank must agree on, as words: the reduction only for reducing operations, the
// root only for rooted ones (the others' values are not part of the call).
std::string describe(const Op& op) {
  std::string d = std::string(collective_name(op.coll));
  if (op.coll == Collective::barrier) return d;
  d += " count=" + std::to_string(op.count) + " " + std::string(dtype_name(op.dtype));
  if (collective_reduces(op.coll)) d += " " + std::string(reduce_op_name(op.redop));
  if (collective_has_root(op.coll)) d += " root=" + std::to_string(op.root);
  return d;
}

// "ranks 0, 1, 2 at recipe.lua:12, rank 3 at recipe.lua:14"
std::string list_ranks(const std::map<std::string, std::vector<int>>& by_where) {
  std::string out;
  for (const auto& [where, ranks] : by_where) {
    if (!out.empty()) out += ", ";
    out += ranks.size() > 1 ? "ranks " : "rank ";
    for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
    out += " at " + where;
  }
  return out;
}

}  // namespace

void Communicator::agree_with_peer(int peer, size_t count, DType dtype, const char* what) {
  if (size() <= 1 || peer == rank() || peer < 0 || peer >= size()) return;
  const int64_t mine[2] = {static_cast<int64_t>(count * dtype_size(dtype)), static_cast<int64_t>(dtype)};
  int64_t theirs[2] = {0, 0};
  try {
    exchange(peer, mine, peer, theirs, sizeof mine);
  } catch (const Error& e) {  // a backend without a control-plane exchange (test stand-ins): unchecked
    if (e.code() == ExitCode::internal) return;
    throw;
  }
  if (theirs[0] == mine[0] && theirs[1] == mine[1]) return;
  auto side = [](int64_t bytes, int64_t dt) {
    const std::string d = dt >= 0 && dt <= static_cast<int64_t>(DType::bfloat16)
                              ? std::string(dtype_name(static_cast<DType>(dt)))
                              : "dtype " + std::to_string(dt);
    return std::to_string(bytes) + " bytes of " + d;
  };
  throw Error(ExitCode::hang_or_desync,
              "desync: " + std::string(what) + " on " + name_ + ": rank " + std::to_string(rank()) + " uses " +
                  side(mine[0], mine[1]) + ", its peer rank " + std::to_string(peer) + " " +
                  side(theirs[0], theirs[1]) + ": both sides of a pair must agree on the size and dtype");
}

void Communicator::verify(const Op& op, const CallSite& site) {
  if (!verify_ || size() <= 1) return;
  if (op.coll == Collective::send || op.coll == Collective::recv) {
    // Not exchanged (a ring of blocking sends must not wait for its peer's verification); the
    // receiving backend checks the incoming size against its buffer and names this line.
    Progress::instance().set_site(site.where());
    return;
  }
  const std::string head = "desync: " + std::string(collective_name(op.coll)) + " #" + std::to_string(seq_) + " on " +
                           name_ + ": the ranks called different operations";
  if (op.coll == Collective::sendrecv) {
    // Pairwise: what this rank receives from `recv_peer` must be what that rank sends.
    Progress::instance().set_site(site.where());
    const int64_t mine[2] = {static_cast<int64_t>(op.count), static_cast<int64_t>(op.dtype)};
    int64_t theirs[2] = {0, 0};
    exchange(op.peer, mine, op.recv_peer, theirs, sizeof mine);
    if (theirs[0] == mine[0] && theirs[1] == mine[1]) return;
    Op other = op;
    other.count = static_cast<size_t>(theirs[0]);
    other.dtype = static_cast<DType>(theirs[1]);
    throw Error(ExitCode::hang_or_desync, head + ": rank " + std::to_string(op.recv_peer) + " sends " +
                                              describe(other) + " to rank " + std::to_string(rank()) +
                                              ", which receives " + describe(op) + " at " + site.where());
  }
  // One fingerprint per call; the maximum of (h, -h) over the ranks gives the largest and the
  // smallest: equal means every rank called the same. 52 bits keep the doubles exact.
  uint64_t h = 14695981039346656037ULL;
  const uint32_t words[5] = {static_cast<uint32_t>(op.coll), static_cast<uint32_t>(op.dtype),
                             collective_reduces(op.coll) ? static_cast<uint32_t>(op.redop) : 0u,
                             collective_has_root(op.coll) ? static_cast<uint32_t>(op.root) : 0u,
                             static_cast<uint32_t>(op.count >> 32)};
  h = fnv(h, words, sizeof words);
  const uint64_t lo = op.count & 0xffffffffULL;
  h = fnv(h, &lo, sizeof lo);
  h = fnv(h, name_.data(), name_.size());
  if (have_verified_ && h == verified_) return;
  const std::string where = site.where();
  Progress::instance().set_site(where);
  const double f = static_cast<double>(h & ((1ULL << 52) - 1));
  std::vector<double> v{f, -f};
  verify_max(v);
  if (v[0] == -v[1]) {
    verified_ = h;
    have_verified_ = true;
    return;
  }
  // A disagreement: every rank learns every call and its site, and says the same line.
  const auto all = allgather(describe(op) + "\t" + where);
  std::map<std::string, std::map<std::string, std::vector<int>>> sides;  // call -> site -> ranks
  for (size_t r = 0; r < all.size(); ++r) {
    const size_t tab = all[r].find('\t');
    sides[all[r].substr(0, tab)][tab == std::string::npos ? "?" : all[r].substr(tab + 1)].push_back(
        static_cast<int>(r));
  }
  std::string line = head;
  for (const auto& [call, sites] : sides) line += "; " + list_ranks(sites) + " called " + call;
  throw Error(ExitCode::hang_or_desync, line);
}

}  // namespace cs
