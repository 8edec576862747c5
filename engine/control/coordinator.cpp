#include "coordinator.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>

#include "control_peer.hpp"
#include "error.hpp"
#include "flight_recorder.hpp"
#include "job.hpp"
#include "launch_env.hpp"
#include "progress.hpp"

namespace cs {

using namespace coord;

std::string ensure_open_files(size_t needed) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur >= needed) return {};
  if (lim.rlim_cur == RLIM_INFINITY) return {};
  const rlim_t want =
      lim.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(needed) : std::min<rlim_t>(lim.rlim_max, needed);
  if (want > lim.rlim_cur) {
    rlimit raised = lim;
    raised.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim.rlim_cur = want;
  }
  if (lim.rlim_cur >= needed) return {};
  return "the coordinator needs " + std::to_string(needed) + " open files but the limit is " +
         std::to_string(static_cast<unsigned long long>(lim.rlim_cur)) + " (hard limit " +
         (lim.rlim_max == RLIM_INFINITY ? std::string("unlimited")
                                        : std::to_string(static_cast<unsigned long long>(lim.rlim_max))) +
         "); ranks beyond it cannot connect and will be named as never connected: raise it (ulimit -n " +
         std::to_string(needed) + ") before launching";
}

namespace coord {

// A peer the control plane does not admit: logged (the first few) and dropped; the job goes on.
void refused(int fd, const char* why) {
  static std::atomic<int> logged{0};
  if (logged++ >= 10) return;
  sockaddr_in a{};
  socklen_t len = sizeof a;
  char buf[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  std::fprintf(stderr, "commscript: warning: control plane: dropped a connection from %s: %s\n", buf, why);
  std::fflush(stderr);
}

}  // namespace coord

// ---------------------------------------------------------------- coordinator

struct Coordinator::Conn {
  enum Kind { pending, rank, relay } kind = pending;
  int fd = -1;
  int id = -1;  // the rank, or the relay's leader
  LineBuffer in;
  bool proven = false;    // answered the challenge with the job's secret (docs/security.md)
  std::string challenge;  // sent on accept
  int64_t since_ns = 0;
};

struct Coordinator::Outcome {
  struct Failure {
    int rank, code;
    std::string message;
  };
  std::vector<Failure> failures;
  std::vector<int> deaths;
};

std::string host_ipv4s() {
  std::string ips;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return ips;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr addr = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if ((ntohl(addr.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addr, buf, sizeof buf);
    ips += (ips.empty() ? "" : ",") + std::string(buf);
  }
  freeifaddrs(ifs);
  return ips;
}

std::string job_address(const std::vector<std::string>& peers) {
  std::string chosen;
  for (const std::string& peer : peers) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);  // any port: connect() on UDP only picks the route
    if (inet_pton(AF_INET, peer.c_str(), &to.sin_addr) != 1) return "";
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&from), &len) == 0;
    close(fd);
    if (!ok) return "";
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &from.sin_addr, buf, sizeof buf);
    if (!chosen.empty() && chosen != buf) return "";
    chosen = buf;
  }
  return chosen;
}

Coordinator::Coordinator(Options o) : o_(std::move(o)) {
  ranks_.resize(static_cast<size_t>(o_.nranks));
  rank_fd_.assign(static_cast<size_t>(o_.nranks), -1);
  rings_.assign(static_cast<size_t>(o_.nranks), nullptr);
  if (o_.expected_connections) expect_connections(o_.expected_connections);
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(ExitCode::internal, std::string("coordinator: socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(o_.loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
  if (!o_.loopback_only && !o_.bind_ip.empty() && inet_pton(AF_INET, o_.bind_ip.c_str(), &a.sin_addr) != 1)
    a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (!o_.loopback_only && a.sin_addr.s_addr == htonl(INADDR_ANY)) {
    std::fprintf(stderr,
                 "commscript: note: coordinator: no single address of this host reaches every other host; listening "
                 "on every interface (peers are admitted only with the job's secret: docs/security.md)\n");
    std::fflush(stderr);
  }
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listen_fd_, kListenBacklog) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw Error(ExitCode::internal, std::string("coordinator: cannot listen: ") + std::strerror(errno));
  set_nonblocking(listen_fd_);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0)
    throw Error(ExitCode::internal, std::string("coordinator: epoll: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  std::string ips;
  if (!o_.loopback_only && a.sin_addr.s_addr != htonl(INADDR_ANY)) {
    ips = o_.bind_ip;  // the job's address: the only one listened on
  } else if (!o_.loopback_only) {
    ips = host_ipv4s();
    ips += (ips.empty() ? "" : ",") + std::string("127.0.0.1");
  }
  if (ips.empty()) ips = "127.0.0.1";
  endpoint_ = ips + ":" + std::to_string(ntohs(a.sin_port));
  start_ns_ = now_ns();
  tick_ns_ = start_ns_;
  thread_ = std::thread([this] { loop(); });
}

Coordinator::~Coordinator() {
  {
    std::lock_guard<std::mutex> g(mu_);
    send_all("END");  // the ranks still connected: this closing connection is no death of rank 0
  }
  stop_ = true;
  const uint64_t one = 1;
  if (wake_fd_ >= 0 && write(wake_fd_, &one, sizeof one) < 0) {
  }
  if (thread_.joinable()) thread_.join();
  for (auto& [fd, c] : conns_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Coordinator::expect_connections(size_t n) {
  const std::string why = ensure_open_files(n + static_cast<size_t>(kSpareFiles));
  if (!why.empty()) {
    std::fprintf(stderr, "commscript: warning: %s\n", why.c_str());
    std::fflush(stderr);
  }
}

nlohmann::json Coordinator::events() const {
  std::lock_guard<std::mutex> g(mu_);
  return events_;
}

nlohmann::json Coordinator::snapshot() const {
  std::lock_guard<std::mutex> g(mu_);
  return coord::snapshot(ranks_, now_ns());
}

size_t Coordinator::connections() const {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = relay_fd_.size();
  for (int fd : rank_fd_) n += fd >= 0;
  return n;
}

double Coordinator::cpu_seconds() const {
  clockid_t cid;
  timespec ts{};
  if (pthread_getcpuclockid(const_cast<std::thread&>(thread_).native_handle(), &cid) != 0 ||
      clock_gettime(cid, &ts) != 0)
    return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void Coordinator::send_to(int rank, const std::string& cmd) {
  if (rank < 0 || rank >= o_.nranks) return;
  const int fd = rank_fd_[static_cast<size_t>(rank)];
  if (fd >= 0) {
    write_all(fd, cmd + "\n");
    return;
  }
  const int via = ranks_[static_cast<size_t>(rank)].via;
  const auto it = relay_fd_.find(via);
  if (via >= 0 && it != relay_fd_.end()) write_all(it->second, encode_addressed("TO", rank, cmd) + "\n");
}

void Coordinator::send_all(const std::string& cmd) {
  for (int fd : rank_fd_)
    if (fd >= 0) write_all(fd, cmd + "\n");
  for (const auto& [leader, fd] : relay_fd_) write_all(fd, "ALL " + cmd + "\n");
}

void Coordinator::cancel_all(int code) {
  std::lock_guard<std::mutex> g(mu_);
  judged_ = true;
  send_all("CANCEL " + std::to_string(code));
}

void Coordinator::handle_rank_line(int rank, const std::string& line, int64_t now, Outcome& out) {
  RankView& s = ranks_[static_cast<size_t>(rank)];
  if (line.rfind("HB ", 0) == 0) {
    Beat b;
    if (decode_beat(line, &b)) apply_beat(s, b, now);
  } else if (line.rfind("EV ", 0) == 0) {
    try {
      events_.push_back(nlohmann::json::parse(line.substr(3)));
    } catch (const nlohmann::json::exception&) {
    }
  } else if (line.rfind("COMM ", 0) == 0) {  // a member of a communicator split/shrink made
    try {
      const std::string name = nlohmann::json::parse(line.substr(5)).get<std::string>();
      if (name.size() <= 512 && s.comms.size() < kMaxCommsPerRank &&
          std::find(s.comms.begin(), s.comms.end(), name) == s.comms.end())
        s.comms.push_back(name);
    } catch (const nlohmann::json::exception&) {
    }
  } else if (line.rfind("RING ", 0) == 0) {
    try {
      rings_[static_cast<size_t>(rank)] = nlohmann::json::parse(line.substr(5));
    } catch (const nlohmann::json::exception&) {
    }
  } else if (line == "BYE" || line.rfind("BYE ", 0) == 0) {
    s.bye = true;
  } else if (line.rfind("ERR ", 0) == 0) {
    const size_t sp = line.find(' ', 4);
    std::string msg;
    try {
      msg = nlohmann::json::parse(line.substr(sp + 1)).get<std::string>();
    } catch (const nlohmann::json::exception&) {
      msg = sp == std::string::npos ? std::string() : line.substr(sp + 1);
    }
    out.failures.push_back({rank, std::atoi(line.c_str() + 4), cap_message(msg)});  // handled without the lock
  }
}

void Coordinator::handle_relay_line(Conn& c, const std::string& line, int64_t now, Outcome& out) {
  const int leader = c.id;
  if (line.rfind("AGG ", 0) == 0) {
    int from = -1;
    std::vector<RelayedBeat> beats;
    if (decode_host_beats(line, &from, &beats)) apply_host_beats(ranks_, leader, beats, now);
    return;
  }
  int r = -1;
  std::string rest;
  if (decode_addressed(line, "FWD", &r, &rest)) {
    if (r >= o_.nranks) return;
    std::string host;
    int rank = -1, pid = 0;
    if (decode_hello(rest, &rank, &host, &pid)) {
      if (rank == r && rank_fd_[static_cast<size_t>(r)] < 0)
        apply_hello(ranks_[static_cast<size_t>(r)], host, pid, leader, now);
      return;
    }
    handle_rank_line(r, rest, now, out);
    return;
  }
  if (line.rfind("GONE ", 0) == 0) {
    const int g = std::atoi(line.c_str() + 5);
    if (g < 0 || g >= o_.nranks) return;
    RankView& s = ranks_[static_cast<size_t>(g)];
    if (s.via != leader || s.bye || s.dead) return;
    s.dead = true;
    if (first_death_ < 0) {
      first_death_ = g;
      out.deaths.push_back(g);
    }
  }
}

void Coordinator::closed(Conn& c, Outcome& out) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  close(c.fd);
  if (c.kind == Conn::rank) {
    rank_fd_[static_cast<size_t>(c.id)] = -1;
    RankView& s = ranks_[static_cast<size_t>(c.id)];
    s.dead = !s.bye;
    // The first death is the news; the ranks the launcher then ends close their connections too.
    if (s.dead && first_death_ < 0) {
      first_death_ = c.id;
      out.deaths.push_back(c.id);
    }
  } else if (c.kind == Conn::relay) {
    relay_fd_.erase(c.id);
    RankView& leader = ranks_[static_cast<size_t>(c.id)];
    // The relay lives in its leader's process: closed without the leader's goodbye, it died.
    const bool leader_died = leader.hello && leader.via == c.id && !leader.bye && !leader.dead;
    relay_lost(ranks_, c.id);
    if (leader_died) {
      leader.dead = true;
      leader.orphaned_by = -1;
      if (first_death_ < 0) {
        first_death_ = c.id;
        out.deaths.push_back(c.id);
      }
    }
  }
}

void Coordinator::pump(int timeout_ms, Outcome& out) {
  epoll_event evs[256];
  tick_wait_ns_ = static_cast<int64_t>(std::max(0, timeout_ms)) * 1000000;
  const int n = epoll_wait(epoll_fd_, evs, 256, std::max(0, timeout_ms));
  // More time gone since the last pump than it waited for: the process was frozen (SIGSTOP of
  // rank 0). Its beats say nothing of that (its heartbeat thread resumed with it, and the
  // backlog read now has it fresh), so the freeze is marked on rank 0 for the verdict, which the
  // loop gives before the failures that piled up meanwhile (the others' local timeouts).
  const int64_t after = now_ns();
  if (!judged_ && after - tick_ns_ > tick_wait_ns_ + kStallNs) {
    std::lock_guard<std::mutex> g(mu_);
    if (!ranks_.empty()) ranks_[0].frozen_ns = after - tick_ns_ - tick_wait_ns_;
    stalled_ = true;
  }
  struct Tick {  // the pump's end, however it returns
    std::atomic<int64_t>& at;
    ~Tick() { at = now_ns(); }
  } tick{tick_ns_};
  if (n <= 0) {
    if (unproven_ > 0) {
      std::lock_guard<std::mutex> g(mu_);
      drop_unproven(now_ns());
    }
    return;
  }
  std::lock_guard<std::mutex> g(mu_);
  const int64_t now = now_ns();
  for (int i = 0; i < n; ++i) {
    const int fd = evs[i].data.fd;
    if (fd == wake_fd_) {
      uint64_t v;
      if (read(wake_fd_, &v, sizeof v) < 0) {
      }
    } else if (fd == listen_fd_) {
      accept_peers(now);
    } else {
      read_peer(fd, now, out);
    }
  }
  drop_unproven(now);
}

void Coordinator::accept_peers(int64_t now) {
  // Under mu_.
  while (true) {
    const int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (cfd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        static bool said = false;
        if (!said) std::fprintf(stderr, "commscript: warning: coordinator: accept: %s\n", std::strerror(errno));
        said = true;
      }
      break;
    }
    // A flood that proves nothing is not served: beyond every rank connecting at once, a few.
    if (unproven_ >= static_cast<size_t>(o_.nranks) + kMaxPendingPeers) {
      refused(cfd, "too many connections that have not proved the job's secret");
      close(cfd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = cfd;
    c->challenge = job_auth::challenge();
    c->since_ns = now;
    ++unproven_;
    write_all(cfd, encode_challenge(c->challenge) + "\n");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = cfd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, cfd, &ev);
    conns_[cfd] = std::move(c);
  }
}

void Coordinator::read_peer(int fd, int64_t now, Outcome& out) {
  // Under mu_: what a rank's or a relay's connection brought, or its close.
  const auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  const bool alive = drain(fd, c.in);
  std::string line;
  bool reject = false;
  while (!reject && c.in.next(&line)) {
    if (!c.proven) {  // the first line proves the job's secret, or the peer is dropped
      c.proven = proves_secret(line, c.challenge);
      if (c.proven) {
        --unproven_;
      } else {
        refused(fd, "no proof of the job's secret");
        reject = true;
      }
      continue;
    }
    if (c.kind == Conn::pending) {
      int rank = -1, pid = 0;
      std::string host;
      if (decode_hello(line, &rank, &host, &pid) && rank < o_.nranks && rank_fd_[static_cast<size_t>(rank)] < 0) {
        c.kind = Conn::rank;
        c.id = rank;
        rank_fd_[static_cast<size_t>(rank)] = fd;
        apply_hello(ranks_[static_cast<size_t>(rank)], host, pid, -1, now);
      } else if (decode_relay_hello(line, &rank, &host) && rank < o_.nranks && !relay_fd_.count(rank)) {
        c.kind = Conn::relay;
        c.id = rank;
        relay_fd_[rank] = fd;
      } else {
        refused(fd, "a first message that is no hello, or a rank already connected");
        reject = true;
      }
    } else if (c.kind == Conn::rank) {
      handle_rank_line(c.id, line, now, out);
    } else {
      handle_relay_line(c, line, now, out);
    }
  }
  if (!reject && c.in.size() > (c.proven ? kMaxLineBytes : kMaxUnprovenLine)) {
    refused(fd, "a line longer than a peer may send");
    if (c.kind == Conn::pending) {
      reject = true;
    } else {  // a rank's or a relay's: closed as its loss
      closed(c, out);
      conns_.erase(it);
      return;
    }
  }
  if (reject) {
    if (!c.proven) --unproven_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    conns_.erase(it);
  } else if (!alive) {
    if (!c.proven) --unproven_;
    closed(c, out);
    conns_.erase(it);
  }
}

void Coordinator::drop_unproven(int64_t now) {
  // Under mu_: connections that have not proved the secret in time.
  for (auto it = conns_.begin(); it != conns_.end();) {
    Conn& c = *it->second;
    if (c.proven || now - c.since_ns <= static_cast<int64_t>(kProofTimeoutMs) * 1000000) {
      ++it;
      continue;
    }
    refused(c.fd, "no proof of the job's secret in time");
    --unproven_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    it = conns_.erase(it);
  }
}

void Coordinator::judge(int64_t now) {
  // Under mu_.
  if (judged_) return;
  nlohmann::json inc = never_connected(ranks_, now, start_ns_, o_.timeout_s);
  if (inc.is_null()) inc = desync_verdict(ranks_, now, desync_memo_);
  if (inc.is_null()) {
    const std::string note = waiting_note(ranks_, now, wait_memo_, o_.timeout_s);
    if (!note.empty()) {
      std::fprintf(stderr, "commscript: %s\n", note.c_str());
      std::fflush(stderr);
    }
    const int worst = overdue_rank(ranks_, now);
    if (worst >= 0) inc = timeout_verdict(ranks_, worst, now, o_.timeout_s);
  }
  if (inc.is_null()) return;
  judged_ = true;
  mu_.unlock();  // end_job takes the lock itself and (unless embedded) never returns
  end_job(inc);
  mu_.lock();
}

void Coordinator::loop() {
  next_judge_ns_ = now_ns();
  next_deadline_ns_ = std::numeric_limits<int64_t>::max();
  while (!stop_) {
    const int64_t now = now_ns();
    const int64_t wake = std::min(next_judge_ns_, next_deadline_ns_);
    const int timeout_ms =
        wake <= now ? 0 : static_cast<int>(std::min<int64_t>((wake - now) / 1000000 + 1, kJudgeTickMs));
    Outcome out;
    pump(timeout_ms, out);
    if (stop_) break;
    if (stalled_) {  // judged before the failures: those are the freeze's aftermath
      std::lock_guard<std::mutex> g(mu_);
      judge(now_ns());  // ends the job when someone is overdue
      if (!ranks_.empty()) ranks_[0].frozen_ns = 0;
      stalled_ = false;
    }
    if (!out.deaths.empty() && o_.on_death) {
      nlohmann::json inc;
      {
        std::lock_guard<std::mutex> g(mu_);
        inc = death_incident(ranks_, out.deaths[0], o_.launcher);
      }
      inc["ranks"] = snapshot();
      o_.on_death(inc);
    }
    if (!out.failures.empty()) {
      for (const Outcome::Failure& f : out.failures) {
        if (o_.on_error) o_.on_error(f.rank, f.code, f.message);
        std::lock_guard<std::mutex> g(mu_);
        send_to(f.rank, "ACK");
      }
      if (!o_.end_process) cancel_all(out.failures.front().code);
      continue;
    }
    const int64_t t = now_ns();
    if (t >= next_judge_ns_ || t >= next_deadline_ns_) {
      std::lock_guard<std::mutex> g(mu_);
      judge(t);
      next_deadline_ns_ = next_deadline_ns(ranks_, t);  // deadlines passed were judged just now
      next_judge_ns_ = t + static_cast<int64_t>(kJudgeTickMs) * 1000000;
    }
  }
}

bool Coordinator::await_verdict(int max_ms) {
  for (int waited = 0;; waited += kRingPollMs) {
    if (verdict_saved_) return true;
    const bool frozen = now_ns() - tick_ns_ > tick_wait_ns_ + kStallNs;  // not resumed yet, or judging
    if (!(frozen || stalled_ || judged_) || waited >= max_ms) return verdict_saved_;
    std::this_thread::sleep_for(std::chrono::milliseconds(kRingPollMs));
  }
}

void Coordinator::end_job(nlohmann::json inc) {
  if (o_.on_verdict) o_.on_verdict(inc);
  std::fprintf(stderr, "%s\n", inc["line"].get<std::string>().c_str());
  std::fflush(stderr);
  // Saved before the flight recorders are collected: mpirun's SIGTERM (a rank's local timeout
  // ended the job meanwhile) must find the verdict, not write a "killed" report over it.
  inc["ranks"] = snapshot();
  inc["flight_recorder"] = nlohmann::json::array();
  if (o_.on_timeout) o_.on_timeout(inc);
  verdict_saved_ = true;
  {
    std::lock_guard<std::mutex> g(mu_);
    send_all("DUMP");
  }
  // Collect the flight recorders for a while (the loop is this thread: pump inline).
  const int64_t until = now_ns() + kRingCollectNs;
  while (now_ns() < until) {
    Outcome ignored;  // deaths now are the aftermath
    pump(kRingPollMs, ignored);
    std::lock_guard<std::mutex> g(mu_);
    bool all = true;
    for (size_t r = 0; r < ranks_.size() && all; ++r) {
      const RankView& s = ranks_[r];
      const bool reachable = s.hello && !s.dead && (rank_fd_[r] >= 0 || (s.via >= 0 && relay_fd_.count(s.via)));
      if (reachable && rings_[r].is_null()) all = false;
    }
    if (all) break;
  }
  nlohmann::json files = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> g(mu_);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (rings_[r].is_null()) continue;
      const std::string f = write_flight_record(o_.out_dir, static_cast<int>(r), ranks_[r].host, rings_[r]);
      if (!f.empty()) files.push_back(f);
    }
  }
  if (o_.on_flight_files && !files.empty()) o_.on_flight_files(files);
  std::fflush(nullptr);
  if (!o_.end_process) {  // embedded: the run ends, the host's process goes on
    cancel_all(static_cast<int>(ExitCode::hang_or_desync));
    return;
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    send_all("END verdict");  // the ranks' lost connection is the verdict's doing, not news
  }
  _exit(static_cast<int>(ExitCode::hang_or_desync));
}

}  // namespace cs
