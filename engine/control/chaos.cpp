#include "chaos.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "communicator.hpp"
#include "cuda_support.hpp"
#include "error.hpp"
#include "incidents.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "progress.hpp"
#include "size.hpp"

namespace cs {

namespace {

const std::pair<ChaosKind, std::string_view> kKinds[] = {
    {ChaosKind::delay, "delay"}, {ChaosKind::slow, "slow"},       {ChaosKind::hang, "hang"},
    {ChaosKind::exit, "exit"},   {ChaosKind::corrupt, "corrupt"}, {ChaosKind::desync, "desync"}};

double unix_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// An `exit` fault: how long the rank waits before _exit for its heartbeat to carry the record.
constexpr auto kExitHeartbeatWait = std::chrono::milliseconds(300);

void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
}

}  // namespace

std::string_view chaos_kind_name(ChaosKind k) {
  for (auto& [kind, name] : kKinds)
    if (kind == k) return name;
  return "?";
}

ChaosRule chaos_rule_from_json(const nlohmann::json& j) {
  if (!j.is_object())
    throw InputError("chaos: each rule must be a table like { kind = \"delay\", ranks = [1], ms = 50 }");
  static const std::set<std::string> known = {"kind",        "ranks",    "ops", "after",     "every",
                                              "probability", "duration", "ms",  "jitter_ms", "factor",
                                              "status",      "elements", "op",  "limit",     "kill"};
  for (auto& [k, v] : j.items())
    if (!known.count(k))
      throw InputError("chaos: unknown field '" + k +
                       "' (known: kind, ranks, ops, after, every, probability, duration, ms, jitter_ms, factor, "
                       "status, elements, op, limit)");
  ChaosRule r;
  if (!j.contains("kind") || !j["kind"].is_string())
    throw InputError(
        "chaos: each rule needs kind = \"delay\" | \"slow\" | \"hang\" | \"exit\" | \"corrupt\" | "
        "\"desync\" (a string)");
  const std::string kind = j["kind"].get<std::string>();
  bool found = false;
  for (auto& [k, name] : kKinds)
    if (kind == name) {
      r.kind = k;
      found = true;
    }
  if (!found) throw InputError("chaos: kind '" + kind + "' is not one of delay, slow, hang, exit, corrupt, desync");
  const std::string w = "chaos " + kind + ": ";
  auto num = [&](const char* k, double dflt, double lo, double hi) {
    if (!j.contains(k)) return dflt;
    if (!j[k].is_number()) throw InputError(w + "'" + k + "' must be a number");
    const double v = j[k].get<double>();
    if (!(v >= lo && v <= hi)) throw InputError(w + "'" + k + "' = " + std::to_string(v) + " is out of range");
    return v;
  };
  if (j.contains("ranks")) {
    const auto& rs = j["ranks"];
    if (rs.is_number_integer())
      r.ranks.insert(rs.get<int>());
    else if (rs.is_array()) {
      for (const auto& x : rs) {
        if (!x.is_number_integer() || x.get<int>() < 0) throw InputError(w + "'ranks' must be a list of ranks");
        r.ranks.insert(x.get<int>());
      }
    } else
      throw InputError(w + "'ranks' must be a list of ranks");
  }
  if (j.contains("ops")) {
    const auto& os = j["ops"];
    std::vector<std::string> names;
    if (os.is_string())
      names.push_back(os.get<std::string>());
    else if (os.is_array()) {
      for (const auto& x : os) {
        if (!x.is_string()) throw InputError(w + "'ops' must be a list of operation names");
        names.push_back(x.get<std::string>());
      }
    } else
      throw InputError(w + "'ops' must be a list of operation names");
    for (const auto& n : names) {
      auto c = parse_collective(n);
      if (!c) throw InputError(w + "unknown operation '" + n + "' in 'ops'");
      r.ops.insert(*c);
    }
  }
  r.after = static_cast<uint64_t>(num("after", 0, 0, 1e15));
  r.every = static_cast<uint64_t>(num("every", 1, 1, 1e15));
  r.probability = num("probability", 1.0, 0.0, 1.0);
  r.duration_s = num("duration", 0, 0, 1e9);
  r.ms = num("ms", r.kind == ChaosKind::delay ? 100 : 0, 0, 3.6e6);
  r.jitter_ms = num("jitter_ms", 0, 0, 3.6e6);
  r.limit = static_cast<uint64_t>(num("limit", 0, 0, 1e15));
  switch (r.kind) {
    case ChaosKind::slow:
      r.factor = num("factor", 2, 1, 1000);
      break;
    case ChaosKind::desync:
      r.factor = num("factor", 0, 1e-9, 1);
      break;
    case ChaosKind::exit:
      r.status = static_cast<int>(num("status", 99, 1, 255));
      if (j.contains("kill")) {
        if (!j["kill"].is_boolean()) throw InputError(w + "'kill' must be true or false");
        r.kill = j["kill"].get<bool>();
      }
      break;
    case ChaosKind::corrupt:
      r.elements = static_cast<uint64_t>(num("elements", 1, 1, 1e12));
      break;
    default:
      break;
  }
  if (j.contains("kill") && r.kind != ChaosKind::exit) throw InputError(w + "'kill' applies to exit only");
  if (j.contains("op")) {
    if (r.kind != ChaosKind::desync) throw InputError(w + "'op' applies to desync only");
    if (!j["op"].is_string() || !parse_collective(j["op"].get<std::string>()))
      throw InputError(w + "'op' must name an operation (e.g. \"barrier\")");
    r.desync_op = j["op"].get<std::string>();
  }
  // A desync without `op` or `factor` calls a barrier where the others call the real operation:
  // a hang on every MPI (a size mismatch may instead abort the process, depending on the MPI).
  if (r.kind == ChaosKind::desync && r.factor == 0 && r.desync_op.empty()) r.desync_op = "barrier";
  if ((r.kind == ChaosKind::hang || r.kind == ChaosKind::exit || r.kind == ChaosKind::desync) && r.limit == 0)
    r.limit = 1;
  return r;
}

Chaos& Chaos::instance() {
  static Chaos c;
  return c;
}

void Chaos::set_identity(int rank, std::string host) {
  std::lock_guard<std::mutex> g(mu_);
  rank_ = rank;
  host_ = std::move(host);
}

void check_chaos_ranks(const ChaosRule& r, int size) {
  if (size <= 0) return;
  for (int rank : r.ranks)
    if (rank >= size)
      throw InputError("chaos " + std::string(chaos_kind_name(r.kind)) + ": 'ranks' names rank " +
                       std::to_string(rank) + ", which this job does not have: it runs " + std::to_string(size) +
                       (size == 1 ? " rank (rank 0)" : " ranks (0-" + std::to_string(size - 1) + ")") +
                       "; a triage repro written for more ranks is written again for this job by `commscript triage "
                       "... --ranks " +
                       std::to_string(size) + "`");
}

void Chaos::install(std::vector<ChaosRule> rules, uint64_t seed, int size) {
  std::lock_guard<std::mutex> g(mu_);
  size_ = size;
  rules_.clear();
  fired_ = nlohmann::json::array();  // a new run (an embedding host may run several)
  for (auto& r : rules) rules_.push_back(Armed{std::move(r)});
  // Every rank draws from its own stream, derived from the run's seed and its rank.
  rng_.seed(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(rank_) + 1);
  active_ = !rules_.empty();
  Communicator::set_hook(active_.load() ? this : nullptr);
}

void Chaos::add(ChaosRule rule) {
  std::lock_guard<std::mutex> g(mu_);
  check_chaos_ranks(rule, size_);
  rules_.push_back(Armed{std::move(rule)});
  active_ = true;
  Communicator::set_hook(this);
}

void Chaos::clear() {
  std::lock_guard<std::mutex> g(mu_);
  rules_.clear();
  active_ = false;
  Communicator::set_hook(nullptr);
}

void Chaos::on_fire(std::function<void(const nlohmann::json&)> f) {
  std::lock_guard<std::mutex> g(mu_);
  on_fire_ = std::move(f);
}

void Chaos::on_exit(std::function<void(int, const std::string&)> f) {
  std::lock_guard<std::mutex> g(mu_);
  on_exit_ = std::move(f);
}

nlohmann::json Chaos::fired() const {
  std::lock_guard<std::mutex> g(mu_);
  return fired_;
}

bool Chaos::selects(Armed& a, const Op& op, uint64_t seq, ChaosKind kind) {
  const ChaosRule& r = a.rule;
  if (r.kind != kind) return false;
  if (!r.ranks.empty() && !r.ranks.count(rank_)) return false;
  if (!r.ops.empty() && !r.ops.count(op.coll)) return false;
  if (seq <= r.after) return false;
  if (r.limit && a.fired >= r.limit) return false;
  if (r.duration_s > 0 && a.first_ns && static_cast<double>(now_ns() - a.first_ns) * 1e-9 > r.duration_s) return false;
  const uint64_t n = a.eligible++;
  if (n % r.every != 0) return false;
  if (r.probability < 1.0 && std::uniform_real_distribution<double>(0, 1)(rng_) >= r.probability) return false;
  if (!a.first_ns) a.first_ns = now_ns();
  ++a.fired;
  return true;
}

void Chaos::record(const ChaosRule& r, const Op& op, uint64_t seq, std::string_view comm, nlohmann::json extra) {
  nlohmann::json e = {{"kind", chaos_kind_name(r.kind)},
                      {"rank", rank_},
                      {"host", host_},
                      {"op", collective_name(op.coll)},
                      {"seq", seq},
                      {"comm", std::string(comm)},
                      {"bytes", op.bytes()},
                      {"time", unix_time()}};
  for (auto& [k, v] : extra.items()) e[k] = v;
  fired_.push_back(e);
  if (on_fire_) on_fire_(e);
}

void Chaos::before(Op& op, uint64_t seq, std::string_view comm) {
  double delay = 0;
  int exit_status = 0;
  bool hang = false, kill = false;
  std::function<void(int, const std::string&)> on_exit;
  {
    std::lock_guard<std::mutex> g(mu_);
    on_exit = on_exit_;
    comm_ = std::string(comm);
    for (Armed& a : rules_) {
      const ChaosRule& r = a.rule;
      if (selects(a, op, seq, ChaosKind::delay)) {
        double ms = r.ms;
        if (r.jitter_ms > 0) ms += std::uniform_real_distribution<double>(0, r.jitter_ms)(rng_);
        delay += ms;
        record(r, op, seq, comm, {{"ms", ms}});
      }
      if (selects(a, op, seq, ChaosKind::desync)) {
        const Op orig = op;
        if (!r.desync_op.empty()) {
          op.coll = *parse_collective(r.desync_op);
        } else {
          op.count = std::max<size_t>(1, static_cast<size_t>(static_cast<double>(op.count) * r.factor));
        }
        record(r, orig, seq, comm, {{"called", collective_name(op.coll)}, {"called_bytes", op.bytes()}});
      }
      if (selects(a, op, seq, ChaosKind::exit)) {
        record(r, op, seq, comm, r.kill ? nlohmann::json{{"signal", "SIGKILL"}} : nlohmann::json{{"status", r.status}});
        exit_status = r.status;
        kill = r.kill;
      }
      if (selects(a, op, seq, ChaosKind::hang)) {
        record(r, op, seq, comm, nlohmann::json::object());
        hang = true;
      }
    }
  }
  hold(delay, false, op, seq, comm, "delay");
  if (kill) {  // a real crash: no goodbye, no flush, nothing saved; the survivors must cope
    ::kill(::getpid(), SIGKILL);
  }
  if (exit_status) {
    std::this_thread::sleep_for(kExitHeartbeatWait);  // let the heartbeat carry the record
    char text[256];
    std::snprintf(text, sizeof text,
                  "chaos: rank %d (host %s) exits with status %d before %s #%llu on %s (an injected exit)", rank_,
                  host_.c_str(), exit_status, std::string(collective_name(op.coll)).c_str(),
                  static_cast<unsigned long long>(seq), std::string(comm).c_str());
    std::fprintf(stderr, "commscript: %s\n", text);
    std::fflush(stderr);
    if (on_exit) on_exit(exit_status, text);  // report.json saved with this exit code
    std::fflush(nullptr);
    _exit(exit_status);
  }
  // Until the job is ended, or (embedded) the run is cancelled: then the rank arrives after all,
  // so that the operations the others are blocked in complete and the run can end cleanly.
  if (hang) hold(0, true, op, seq, comm, "hang");
}

void Chaos::set_deadline(double deadline_s, double grace_s, bool end_process) {
  deadline_s_ = deadline_s > 0 && std::isfinite(deadline_s) ? deadline_s : 0;
  grace_s_ = grace_s > 0 ? grace_s : 0;
  end_process_ = end_process;
}

void Chaos::hold(double ms, bool forever, const Op& op, uint64_t seq, std::string_view comm, const char* kind) {
  if (!forever && !(ms > 0)) return;
  const int64_t start = now_ns();
  const double deadline = deadline_s_.load();
  const double limit_s = deadline > 0 ? deadline + grace_s_.load() : 0;
  while (true) {
    if (forever && job::cancel_code()) return;
    const double elapsed_ms = static_cast<double>(now_ns() - start) * 1e-6;
    if (!forever && elapsed_ms >= ms) return;
    if (limit_s > 0 && elapsed_ms >= limit_s * 1e3) break;
    double step = 20;
    if (!forever) step = std::min(step, ms - elapsed_ms);
    if (limit_s > 0) step = std::min(step, limit_s * 1e3 - elapsed_ms);
    sleep_ms(std::max(step, 0.01));
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "timeout: %s #%llu (%sB, %s) after %.1f s on rank %d (host %s): held back by a chaos %s injection "
                "past the run's deadline (%g s) and %g s of grace",
                std::string(collective_name(op.coll)).c_str(), static_cast<unsigned long long>(seq),
                format_size(op.bytes()).c_str(), std::string(comm).c_str(),
                static_cast<double>(now_ns() - start) * 1e-9, rank_, host_.c_str(), kind, deadline, grace_s_.load());
  std::fprintf(stderr, "commscript: %s\n", line);
  std::fflush(stderr);
  incidents::save({{"kind", "timeout"}, {"line", line}, {"detected_by", "chaos"}},
                  static_cast<int>(ExitCode::hang_or_desync));
  std::fflush(stdout);
  if (!end_process_) {
    job::request_cancel(static_cast<int>(ExitCode::hang_or_desync));
    return;
  }
  _exit(static_cast<int>(ExitCode::hang_or_desync));
}

namespace {
// Flips bits of one byte of a receive buffer, in host or (under --backend nccl) GPU memory: the
// operation has completed, so a device byte is read, flipped and written back synchronously.
void flip(unsigned char* p, unsigned char mask) {
  if (is_device_memory(p)) {
    unsigned char b = 0;
    copy_memory(&b, p, 1);
    b ^= mask;
    copy_memory(p, &b, 1);
    return;
  }
  *p ^= mask;
}
}  // namespace

void Chaos::after(const Op& op, uint64_t seq, int64_t start_ns) {
  double slow_ms = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (Armed& a : rules_) {
      const ChaosRule& r = a.rule;
      if (selects(a, op, seq, ChaosKind::slow)) {
        const double took_ms = static_cast<double>(now_ns() - start_ns) * 1e-6;
        slow_ms += took_ms * (r.factor - 1);
        record(r, op, seq, comm_, {{"factor", r.factor}, {"added_ms", took_ms * (r.factor - 1)}});
      }
      if (selects(a, op, seq, ChaosKind::corrupt) && op.recv) {
        const size_t n = collective_counts(op.coll, op.count, op.nranks).recv;
        const bool receives = !((op.coll == Collective::reduce || op.coll == Collective::gather) && rank_ != op.root) &&
                              op.coll != Collective::send && op.coll != Collective::barrier;
        if (!receives || n == 0) continue;
        const size_t es = dtype_size(op.dtype);
        nlohmann::json where = nlohmann::json::array();
        for (uint64_t k = 0; k < r.elements && k < n; ++k) {
          const size_t idx = std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
          const unsigned bit = std::uniform_int_distribution<unsigned>(0, static_cast<unsigned>(es * 8 - 1))(rng_);
          flip(static_cast<unsigned char*>(op.recv) + idx * es + bit / 8, static_cast<unsigned char>(1u << (bit % 8)));
          where.push_back({{"element", idx}, {"bit", bit}});
        }
        record(r, op, seq, comm_, {{"flipped", where}});
      }
    }
  }
  sleep_ms(slow_ms);
}

}  // namespace cs
