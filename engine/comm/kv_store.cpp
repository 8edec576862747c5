#include "kv_store.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.hpp"

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

bool read_frame(int fd, char* tag, std::string* s) {
  uint32_t len = 0;
  if (!read_all(fd, tag, 1) || !read_all(fd, &len, 4)) return false;
  len = ntohl(len);
  if (len > (64u << 20)) return false;
  s->resize(len);
  return read_all(fd, s->data(), len);
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

KvServer::KvServer(int port, int world_size) : world_size_(world_size) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(ExitCode::runtime, std::string("store: socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(listen_fd_, 128) < 0) {
    const std::string why = std::strerror(errno);
    ::close(listen_fd_);
    throw Error(ExitCode::bad_input, "store: cannot listen on port " + std::to_string(port) + ": " + why);
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

KvServer::~KvServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  {
    std::lock_guard<std::mutex> g(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
}

void KvServer::drain(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (live_.size() <= 1) return;  // rank 0's own connection, or nobody
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void KvServer::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> g(mu_);
    fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
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

void KvServer::serve(int fd) {
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
                   int world_size)
    : host_(host), port_(port) {
  const auto until = std::chrono::steady_clock::now() + connect_timeout;
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
    if (std::chrono::steady_clock::now() > until)
      throw Error(ExitCode::timeout, "store: cannot reach " + host + ":" + std::to_string(port) + " (" + why + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
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
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::string v;
  for (int i = 0;; ++i) {
    if (try_get(key, &v)) return v;
    if (std::chrono::steady_clock::now() > until)
      throw Error(ExitCode::timeout, "store: key '" + key + "' did not appear within " +
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
