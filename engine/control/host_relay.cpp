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
#include "coordinator.hpp"
#include "error.hpp"
#include "flight_recorder.hpp"
#include "job.hpp"
#include "launch_env.hpp"
#include "progress.hpp"

namespace cs {

using namespace coord;

// ---------------------------------------------------------------- host relay

struct HostRelay::Follower {
  int fd = -1;
  int rank = -1;
  bool proven = false;    // answered the challenge with the job's secret (docs/security.md)
  std::string challenge;  // sent on accept
  int64_t since_ns = 0;
  bool bye = false;
  LineBuffer in;
  bool has_beat = false;
  Beat beat;
  int64_t beat_ns = 0;
  void send(const std::string& cmd) {  // only to a connected rank that proved the secret
    if (fd >= 0 && proven) write_all(fd, cmd + "\n");
  }
};

namespace {
constexpr int64_t kForwardNs = static_cast<int64_t>(kRelayForwardMs) * 1000000;
}  // namespace

HostRelay::HostRelay(int leader, std::string host, const std::string& coordinator, bool same_host_as_root)
    : leader_(leader), host_(std::move(host)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return;
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // only this host's ranks
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listen_fd_, kListenBacklog) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  port_ = ntohs(a.sin_port);
  set_nonblocking(listen_fd_);
  up_fd_ = connect_endpoint(coordinator, same_host_as_root, kConnectTimeoutMs);
  if (up_fd_ < 0) return;
  write_all(up_fd_, encode_relay_hello(leader_, host_) + "\n");
  thread_ = std::thread([this] { loop(); });
}

HostRelay::~HostRelay() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (up_fd_ >= 0) close(up_fd_);
}

void HostRelay::drop_without_goodbye() {
  dropped_ = true;
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void HostRelay::loop() {
  int64_t next_forward = now_ns() + kForwardNs;
  std::vector<pollfd> pfs;
  while (!stop_) {
    if (frozen_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    pfs.clear();
    pfs.push_back({listen_fd_, POLLIN, 0});
    pfs.push_back({up_fd_, POLLIN, 0});
    for (auto& f : fs_) pfs.push_back({f->fd, POLLIN, 0});
    const int64_t wait_ms = std::max<int64_t>(0, (next_forward - now_ns()) / 1000000);
    poll(pfs.data(), pfs.size(), static_cast<int>(std::min<int64_t>(wait_ms, kRelayForwardMs)));
    if (pfs[0].revents & POLLIN) accept_followers();
    if ((pfs[1].revents & (POLLIN | POLLHUP | POLLERR)) && !read_coordinator()) {
      // rank 0 is gone (or ended): tell this host's ranks, then stop
      close_followers(!up_ended_);
      close(up_fd_);
      up_fd_ = -1;
      return;
    }
    const int64_t now = now_ns();
    std::string out;  // what goes up now, in order
    for (size_t i = 2; i < pfs.size(); ++i)
      if (pfs[i].revents & (POLLIN | POLLHUP | POLLERR)) read_follower(*fs_[i - 2], now, out);
    drop_unproven(now);
    fs_.erase(std::remove_if(fs_.begin(), fs_.end(), [](const auto& f) { return f->fd < 0; }), fs_.end());
    if (now >= next_forward) {
      out += tick(now);
      next_forward += kForwardNs;
      if (next_forward < now) next_forward = now + kForwardNs;
    }
    if (!out.empty() && !write_all(up_fd_, out)) {
      // The coordinator does not take our writes: the same as losing it.
      close_followers(true);
      return;
    }
  }
  if (dropped_)
    vanish();
  else
    end_cleanly();
}

void HostRelay::accept_followers() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    const size_t unproven =
        static_cast<size_t>(std::count_if(fs_.begin(), fs_.end(), [](const auto& x) { return !x->proven; }));
    if (unproven >= kMaxPendingRelayPeers) {  // a flood that proves nothing: not served
      refused(fd, "too many connections that have not proved the job's secret");
      close(fd);
      continue;
    }
    auto f = std::make_unique<Follower>();
    f->fd = fd;
    f->challenge = job_auth::challenge();
    f->since_ns = now_ns();
    write_all(fd, encode_challenge(f->challenge) + "\n");
    fs_.push_back(std::move(f));
  }
}

bool HostRelay::read_coordinator() {
  const bool alive = drain(up_fd_, up_in_);  // lines that came with the close still count
  std::string line, rest;
  int r = -1;
  while (up_in_.next(&line)) {
    if (line.rfind("ALL ", 0) == 0) {
      const std::string cmd = line.substr(4);
      if (cmd == "END" || cmd.rfind("END ", 0) == 0) up_ended_ = true;
      for (auto& f : fs_) f->send(cmd);
    } else if (decode_addressed(line, "TO", &r, &rest)) {
      for (auto& f : fs_)
        if (f->rank == r) f->send(rest);
    }
  }
  return alive;
}

void HostRelay::read_follower(Follower& f, int64_t now, std::string& out) {
  bool alive = drain(f.fd, f.in);  // lines that came with the close (a BYE) still count
  bool dropped = false;
  std::string line;
  while (!dropped && f.in.next(&line)) {
    if (!f.proven) {  // the first line proves the job's secret, or the peer is dropped
      f.proven = proves_secret(line, f.challenge);
      if (!f.proven) {
        refused(f.fd, "no proof of the job's secret");
        alive = false;
        dropped = true;
      }
      continue;
    }
    if (line.rfind("HB ", 0) == 0 && f.rank >= 0) {
      if (decode_beat(line, &f.beat)) {
        f.has_beat = true;
        f.beat_ns = now;
      }
      continue;
    }
    std::string host;
    int rank = -1, pid = 0;
    if (f.rank < 0) {
      if (!decode_hello(line, &rank, &host, &pid)) continue;
      f.rank = rank;
    }
    if (line == "MOVE") {  // it goes to rank 0 directly: its closing connection is no death
      f.bye = true;
      continue;
    }
    if (line == "BYE" || line.rfind("BYE ", 0) == 0) f.bye = true;
    out += encode_addressed("FWD", f.rank, line) + "\n";
  }
  if (alive && f.in.size() > (f.proven ? kMaxLineBytes : kMaxUnprovenLine)) {
    refused(f.fd, "a line longer than a peer may send");
    alive = false;
  }
  if (!alive) {
    if (f.rank >= 0 && !f.bye) out += "GONE " + std::to_string(f.rank) + "\n";
    close(f.fd);
    f.fd = -1;
  }
}

void HostRelay::drop_unproven(int64_t now) {
  for (auto& f : fs_)  // unproven for too long: dropped
    if (f->fd >= 0 && !f->proven && now - f->since_ns > static_cast<int64_t>(kProofTimeoutMs) * 1000000) {
      refused(f->fd, "no proof of the job's secret in time");
      close(f->fd);
      f->fd = -1;
    }
}

std::string HostRelay::tick(int64_t now) {
  std::string out;
  std::vector<RelayedBeat> beats;
  for (auto& f : fs_)
    if (f->has_beat) beats.push_back({f->rank, static_cast<double>(now - f->beat_ns) * 1e-6, f->beat});
  if (!beats.empty()) out += encode_host_beats(leader_, beats) + "\n";
  for (auto& f : fs_) f->send("TICK");
  return out;
}

void HostRelay::close_followers(bool say_lost) {
  for (auto& f : fs_) {
    if (say_lost) f->send("LOST");
    close(f->fd);
  }
  fs_.clear();
}

void HostRelay::vanish() {  // like a killed process
  for (auto& f : fs_) {
    shutdown(f->fd, SHUT_RDWR);
    close(f->fd);
  }
  if (up_fd_ >= 0) {
    shutdown(up_fd_, SHUT_RDWR);
    close(up_fd_);
    up_fd_ = -1;
  }
}

// A clean end: forward what the ranks said last, then send them to the coordinator directly.
void HostRelay::end_cleanly() {
  std::string out;
  for (auto& f : fs_) {
    drain(f->fd, f->in);
    std::string line;
    while (f->in.next(&line))
      if (line.rfind("HB ", 0) != 0 && f->rank >= 0) out += encode_addressed("FWD", f->rank, line) + "\n";
    if (up_fd_ >= 0 && !out.empty()) write_all(up_fd_, out);
    out.clear();
    f->send("RELAYEND");
    close(f->fd);
  }
}

}  // namespace cs
