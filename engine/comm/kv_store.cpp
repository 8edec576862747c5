#include "kv_store.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "clock.hpp"
#include "error.hpp"
#include "launch_env.hpp"

namespace cs {

namespace {

// Wire format, both ways: one byte (request: the operation; reply: the status), a 32-bit
// length and that many bytes; a request carries a key frame and then a value frame.
bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_frame(int fd, char tag, const std::string& s) {
  const uint32_t len = htonl(static_cast<uint32_t>(s.size()));
  return write_all(fd, &tag, 1) && write_all(fd, &len, 4) && write_all(fd, s.data(), s.size());
}

// A frame of at most `max` bytes, read in pieces: the buffer grows with what arrives, not with
// what the length announced (8 peers announcing 64 MiB each grew the server by 512 MB).
bool read_frame(int fd, char* tag, std::string* s, uint32_t max = kMaxFrame) {
  uint32_t len = 0;
  if (!read_all(fd, tag, 1) || !read_all(fd, &len, 4)) return false;
  len = ntohl(len);
  if (len > max) return false;
  s->clear();
  constexpr size_t kPiece = 1 << 20;
  while (s->size() < len) {
    const size_t at = s->size();
    const size_t n = std::min<size_t>(kPiece, len - at);
    s->resize(at + n);
    if (!read_all(fd, s->data() + at, n)) return false;
  }
  return true;
}

in_addr_t resolve_ipv4(const std::string& host, bool* ok) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  *ok = ::getaddrinfo(host.c_str(), nullptr, &hints, &res) == 0 && res;
  in_addr_t a = htonl(INADDR_LOOPBACK);
  if (*ok) a = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  if (res) ::freeaddrinfo(res);
  return a;
}

}  // namespace

std::pair<std::string, int> parse_endpoint(const std::string& endpoint, const std::string& what) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) throw InputError(what + ": '" + endpoint + "' is not HOST:PORT");
  const std::string port = endpoint.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p <= 0 || p > 65535)
    throw InputError(what + ": port '" + port + "' is not a number in 1..65535");
  return {endpoint.substr(0, colon), static_cast<int>(p)};
}

std::string KvServer::listen_ip_for(const std::string& host, bool one_host) {
  if (one_host) return "127.0.0.1";
  bool ok = false;
  const in_addr_t a = resolve_ipv4(host, &ok);
  if (!ok) return "";
  if ((ntohl(a) >> 24) == 127) return "";  // other hosts do not reach this host's loopback
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

KvServer::KvServer(int port, int world_size, std::string secret, const std::string& bind_ip)
    : secret_(std::move(secret)), world_size_(world_size) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(ExitCode::runtime, std::string("store: socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (!bind_ip.empty() && ::inet_pton(AF_INET, bind_ip.c_str(), &a.sin_addr) != 1)
    throw Error(ExitCode::bad_input, "store: '" + bind_ip + "' is not an IPv4 address to listen on");
  a.sin_port = htons(static_cast<uint16_t>(port));
  int rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc < 0 && errno == EADDRNOTAVAIL && !bind_ip.empty()) {
    // The job's address is not one of this host's (NAT, a virtual IP): every interface, the
    // challenge still keeps out whoever lacks the secret.
    std::fprintf(stderr,
                 "commscript: warning: store: %s is not an address of this host; listening on every interface "
                 "(peers are still admitted only with the job's secret)\n",
                 bind_ip.c_str());
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc < 0 || ::listen(listen_fd_, 128) < 0) {
    const std::string why = std::strerror(errno);
    ::close(listen_fd_);
    throw Error(ExitCode::bad_input, "store: cannot listen on " +
                                         (bind_ip.empty() ? std::string("port ") : bind_ip + ":") +
                                         std::to_string(port) + ": " + why);
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  dial_ip_ = a.sin_addr.s_addr == htonl(INADDR_ANY) ? std::string("127.0.0.1") : std::string(buf);
  acceptor_ = std::thread([this] { accept_loop(); });
}

KvServer::~KvServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& p : peers_) ::shutdown(p.fd, SHUT_RDWR);
  }
  for (auto& p : peers_) {
    p.thread.join();
    ::close(p.fd);
  }
}

void KvServer::drain(std::chrono::milliseconds limit) {
  const int64_t until = deadline_ns(limit);
  while (now_ns() < until) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (live_.size() <= 1) return;  // rank 0's own connection, or nobody
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

namespace {

std::string peer_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  char buf[INET_ADDRSTRLEN] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return buf;
}

}  // namespace

void KvServer::accept_loop() {
  while (!stop_) {
    // At most kMaxPendingPeers connections that have not proved the secret: more wait in the
    // kernel's backlog (no thread, no memory here) until those are admitted or dropped, so a
    // flood of idle connections delays a rank by at most kProofTimeoutMs per batch, never refuses it.
    if (pending_ >= kMaxPendingPeers) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++pending_;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> g(mu_);
    // Connections that ended (a refused peer, a rank that left): their threads and descriptors.
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (!*it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      ::close(it->fd);
      it = peers_.erase(it);
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    peers_.push_back(Peer{std::thread([this, fd, done] {
                            serve(fd);
                            *done = true;
                          }),
                          fd, done});
  }
}

bool KvServer::admit(int fd) {
  // The peer has kProofTimeoutMs to answer; its frames are tiny until it has.
  timeval tv{kProofTimeoutMs / 1000, (kProofTimeoutMs % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string why;
  try {
    const std::string nonce = job_auth::challenge();
    char op = 0, t2 = 0;
    std::string proof, value;
    if (!write_frame(fd, 'C', nonce) || !read_frame(fd, &op, &proof, kMaxUnprovenFrame) ||
        !read_frame(fd, &t2, &value, kMaxUnprovenFrame))
      why = "no proof of the job's secret";
    else if (op != 'A' || !job_auth::proof_ok(secret_, nonce, proof))
      why = op == 'A' ? "a wrong proof of the job's secret (another job's token?)" : "no proof of the job's secret";
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!why.empty()) {
    write_frame(fd, 4, "not admitted: " + why);
    if (refusals_logged_++ < 10)
      std::fprintf(stderr, "commscript: warning: store: refused a connection from %s: %s\n", peer_of(fd).c_str(),
                   why.c_str());
    return false;
  }
  timeval none{0, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
  return write_frame(fd, 0, "");
}

void KvServer::serve(int fd) {
  const bool admitted = admit(fd);
  --pending_;
  if (!admitted) {
    ::shutdown(fd, SHUT_RDWR);
    return;
  }
  int rank = -1;
  bool bye = false;
  char op = 0, t2 = 0;
  std::string key, value;
  while (read_frame(fd, &op, &key) && read_frame(fd, &t2, &value)) {
    char status = 0;
    std::string reply;
    {
      std::lock_guard<std::mutex> g(mu_);
      switch (op) {
        case 'S':
          data_[key] = value;
          break;
        case 'G':
          if (auto it = data_.find(key); it != data_.end()) {
            reply = it->second;
          } else if (!refused_.empty()) {  // a process of this launch was refused: nobody waits for it
            status = 3;
            reply = refused_;
          } else {
            status = 1;
          }
          break;
        case 'H': {
          const int r = std::atoi(key.c_str());
          std::string why;
          if (world_size_ > 0) {  // a launch without MPI: each process read its own variables
            const int n = value.empty() ? world_size_ : std::atoi(value.c_str());
            if (n != world_size_)
              why = "rank " + key + " (from " + peer_of(fd) + ") was started with a world of " + value +
                    " ranks, rank 0 with " + std::to_string(world_size_) +
                    ": WORLD_SIZE (SLURM_NTASKS) differs between the processes";
            else if (r < 0 || r >= world_size_)
              why = "rank " + key + " (from " + peer_of(fd) + ") is not below the world size " +
                    std::to_string(world_size_);
            else if (auto it = live_.find(r); it != live_.end())
              why = "two processes were started as rank " + key + " (from " + it->second + " and " + peer_of(fd) +
                    "): each process needs its own RANK (SLURM_PROCID) in 0.." + std::to_string(world_size_ - 1);
          }
          if (!why.empty()) {
            status = 3;
            reply = why;
            if (refused_.empty()) refused_ = why;
            break;
          }
          rank = r;
          live_[r] = peer_of(fd);
          dead_.erase(rank);
          // Every rank of a checked launch has joined: the waits before connecting may end.
          if (world_size_ > 0 && live_.size() == static_cast<size_t>(world_size_) && refused_.empty())
            data_[kLaunchKey] = "1";
          break;
        }
        case 'B':
          bye = true;
          break;
        case 'D':
          for (int r : dead_) reply += (reply.empty() ? "" : ",") + std::to_string(r);
          break;
        default:
          status = 2;
      }
    }
    if (!write_frame(fd, status, reply)) break;
  }
  if (rank >= 0) {
    std::lock_guard<std::mutex> g(mu_);
    live_.erase(rank);
    if (!bye && !stop_) dead_.insert(rank);
  }
}

KvClient::KvClient(const std::string& host, int port, int rank, std::chrono::milliseconds connect_timeout,
                   int world_size, const std::string& secret)
    : host_(host), port_(port) {
  const int64_t until = deadline_ns(connect_timeout);
  std::string why;
  for (;;) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
      why = gai_strerror(rc);
    } else {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        ::freeaddrinfo(res);
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd_ = fd;
        break;
      }
      why = std::strerror(errno);
      ::close(fd);
      ::freeaddrinfo(res);
    }
    if (now_ns() > until)
      throw Error(ExitCode::hang_or_desync,
                  "store: cannot reach " + host + ":" + std::to_string(port) + " (" + why + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The server's challenge, answered with the proof of the job's secret.
  {
    char tag = 0;
    std::string nonce, answer;
    // (A server busy with unproven peers leaves this connection in its backlog a while: wait
    // for the challenge until the connect deadline, at least kProofTimeoutMs.)
    const auto left = std::max<int64_t>(kProofTimeoutMs, (until - now_ns()) / 1000000);
    timeval tv{static_cast<time_t>(left / 1000), static_cast<suseconds_t>((left % 1000) * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const bool got = read_frame(fd_, &tag, &nonce, kMaxUnprovenFrame) && tag == 'C';
    timeval none{0, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    if (!got) {
      ::close(fd_);
      fd_ = -1;
      throw Error(ExitCode::runtime, "store: " + host + ":" + std::to_string(port) +
                                         " sent no challenge: not a commscript store of this version");
    }
    char st = 0;
    answer = request('A', job_auth::proof(secret, nonce), "", &st);
    if (st != 0) {
      ::close(fd_);
      fd_ = -1;
      throw InputError("store: " + host + ":" + std::to_string(port) + " did not admit this process (" + answer +
                       "): every process of the job needs the same COMMSCRIPT_JOB_TOKEN (docs/security.md)");
    }
  }
  if (rank >= 0) {
    char st = 0;
    const std::string refusal =
        request('H', std::to_string(rank), world_size > 0 ? std::to_string(world_size) : "", &st);
    if (st == 3) {  // the launch check refused this process
      ::close(fd_);
      fd_ = -1;
      throw InputError(refusal);
    }
  }
}

KvClient::~KvClient() {
  if (fd_ < 0) return;
  try {
    char st = 0;
    request('B', "", "", &st);
  } catch (const std::exception&) {
  }
  ::close(fd_);
}

std::string KvClient::request(char op, const std::string& key, const std::string& value, char* status) {
  std::lock_guard<std::mutex> g(mu_);
  std::string reply;
  if (!write_frame(fd_, op, key) || !write_frame(fd_, 0, value) || !read_frame(fd_, status, &reply))
    throw Error(ExitCode::runtime, "store: lost the connection to " + host_ + ":" + std::to_string(port_) +
                                       " (rank 0, which serves the store, is gone)");
  return reply;
}

void KvClient::set(const std::string& key, const std::string& value) {
  char st = 0;
  request('S', key, value, &st);
}

bool KvClient::try_get(const std::string& key, std::string* value) {
  char st = 0;
  std::string v = request('G', key, "", &st);
  if (st == 3) throw InputError(v);  // the server refused a process of this launch
  if (st != 0) return false;
  *value = std::move(v);
  return true;
}

std::string KvClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  const int64_t until = deadline_ns(timeout);
  std::string v;
  for (int i = 0;; ++i) {
    if (try_get(key, &v)) return v;
    if (now_ns() > until)
      throw Error(ExitCode::hang_or_desync, "store: key '" + key + "' did not appear within " +
                                                std::to_string(timeout.count() / 1000) + " s (a rank never arrived)");
    std::this_thread::sleep_for(std::chrono::milliseconds(i < 20 ? 1 : 10));
  }
}

std::vector<int> KvClient::dead_ranks() {
  char st = 0;
  const std::string s = request('D', "", "", &st);
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  return out;
}

std::string KvClient::local_address() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "127.0.0.1";
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return buf;
}

}  // namespace cs
