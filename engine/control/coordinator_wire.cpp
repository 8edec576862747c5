#include "coordinator_wire.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "coordinator_timing.hpp"
#include "launch_env.hpp"
#include "progress.hpp"

namespace cs::coord {

namespace {

// The beat's fields after "HB " (also the tail of a relayed record).
std::string beat_fields(const Beat& b) {
  char line[1024];
  std::snprintf(line, sizeof line, "%llu %d %llu %llu %s %llu %.1f %s %.3f %llu %d %s %s %.1f %.1f",
                static_cast<unsigned long long>(b.started), b.in_flight ? 1 : 0, static_cast<unsigned long long>(b.seq),
                static_cast<unsigned long long>(b.cseq), token(b.coll).substr(0, 63).c_str(),
                static_cast<unsigned long long>(b.bytes), b.age_ms, token(b.comm).substr(0, 127).c_str(), b.deadline_s,
                static_cast<unsigned long long>(b.count), b.dtype, token(b.site).substr(0, 200).c_str(),
                token(b.lua).substr(0, 200).c_str(), b.lua_for_ms, b.lua_age_ms);
  return line;
}

bool parse_beat_fields(const char* s, Beat* b) {
  char coll[64] = {0}, comm[128] = {0}, site[256] = {0}, lua[256] = {0};
  unsigned long long started = 0, seq = 0, cseq = 0, bytes = 0, count = 0;
  int flying = 0, dtype = -1;
  double age = 0, deadline = 0, lua_for = -1, lua_age = -1;
  if (std::sscanf(s, "%llu %d %llu %llu %63s %llu %lf %127s %lf %llu %d %255s %255s %lf %lf", &started, &flying, &seq,
                  &cseq, coll, &bytes, &age, comm, &deadline, &count, &dtype, site, lua, &lua_for, &lua_age) != 15)
    return false;
  b->started = started;
  b->in_flight = flying != 0;
  b->seq = seq;
  b->cseq = cseq;
  b->coll = coll;
  b->bytes = bytes;
  b->age_ms = age;
  b->comm = comm;
  b->deadline_s = deadline;
  b->count = count;
  b->dtype = dtype;
  b->site = site;
  b->lua = lua;
  b->lua_for_ms = lua_for;
  b->lua_age_ms = lua_age;
  return true;
}

}  // namespace

std::string token(std::string s) {
  for (char& c : s)
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ';') c = '_';
  return s.empty() ? "-" : s;
}

std::string encode_beat(const Beat& b) { return "HB " + beat_fields(b); }

bool decode_beat(std::string_view line, Beat* b) {
  if (line.substr(0, 3) != "HB ") return false;
  return parse_beat_fields(std::string(line.substr(3)).c_str(), b);
}

std::string encode_hello(int rank, const std::string& host, int pid) {
  return "HELLO " + std::to_string(rank) + " " + token(host) + " " + std::to_string(pid);
}

bool decode_hello(std::string_view line, int* rank, std::string* host, int* pid) {
  char h[256] = {0};
  if (std::sscanf(std::string(line).c_str(), "HELLO %d %255s %d", rank, h, pid) != 3 || *rank < 0) return false;
  *host = h;
  return true;
}

std::string encode_relay_hello(int leader, const std::string& host) {
  return "RELAY " + std::to_string(leader) + " " + token(host);
}

bool decode_relay_hello(std::string_view line, int* leader, std::string* host) {
  char h[256] = {0};
  if (std::sscanf(std::string(line).c_str(), "RELAY %d %255s", leader, h) != 2 || *leader < 0) return false;
  *host = h;
  return true;
}

std::string encode_host_beats(int leader, const std::vector<RelayedBeat>& beats) {
  std::string out = "AGG " + std::to_string(leader) + " " + std::to_string(beats.size());
  char head[64];
  for (const RelayedBeat& r : beats) {
    std::snprintf(head, sizeof head, ";%d %.1f ", r.rank, r.hold_ms);
    out += head;
    out += beat_fields(r.beat);
  }
  return out;
}

bool decode_host_beats(std::string_view line, int* leader, std::vector<RelayedBeat>* beats) {
  if (line.substr(0, 4) != "AGG ") return false;
  const std::string s(line.substr(4));
  size_t n = 0;
  if (std::sscanf(s.c_str(), "%d %zu", leader, &n) != 2 || *leader < 0) return false;
  beats->clear();
  size_t at = s.find(';');
  while (at != std::string::npos) {
    const size_t end = s.find(';', at + 1);
    const std::string rec = s.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    RelayedBeat r;
    int used = 0;
    if (std::sscanf(rec.c_str(), "%d %lf %n", &r.rank, &r.hold_ms, &used) != 2 || r.rank < 0 || used <= 0 ||
        !parse_beat_fields(rec.c_str() + used, &r.beat))
      return false;
    beats->push_back(std::move(r));
    at = end;
  }
  return beats->size() == n;
}

std::string encode_addressed(const char* verb, int rank, std::string_view line) {
  std::string out = std::string(verb) + " " + std::to_string(rank) + " ";
  out += line;
  return out;
}

bool decode_addressed(std::string_view line, const char* verb, int* rank, std::string* rest) {
  const size_t vl = std::strlen(verb);
  if (line.size() < vl + 2 || line.substr(0, vl) != verb || line[vl] != ' ') return false;
  const std::string_view tail = line.substr(vl + 1);
  const size_t sp = tail.find(' ');
  const std::string num(tail.substr(0, sp));
  char* end = nullptr;
  const long r = std::strtol(num.c_str(), &end, 10);
  if (num.empty() || *end != '\0' || r < 0 || r > 1 << 30) return false;
  *rank = static_cast<int>(r);
  *rest = sp == std::string_view::npos ? std::string() : std::string(tail.substr(sp + 1));
  return true;
}

bool LineBuffer::next(std::string* line) {
  const size_t nl = buf_.find('\n', pos_);
  if (nl == std::string::npos) {
    if (pos_ > 0) {  // keep the buffer from growing: drop what was consumed
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    return false;
  }
  line->assign(buf_, pos_, nl - pos_);
  pos_ = nl + 1;
  return true;
}

std::string LineBuffer::take_rest() {
  std::string rest = buf_.substr(pos_);
  buf_.clear();
  pos_ = 0;
  return rest;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

bool write_all(int fd, std::string_view s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd, POLLOUT, 0};
        if (poll(&p, 1, kWriteStallMs) <= 0) return false;
        continue;
      }
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

int connect_to(const std::string& ip, int port, int timeout_ms) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  set_nonblocking(fd);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (rc == 0 && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) rc = -1;
  }
  if (rc != 0) {
    close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool parse_endpoints(const std::string& endpoint, bool same_host, std::vector<std::string>* ips, int* port) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return false;
  *port = std::atoi(endpoint.c_str() + colon + 1);
  if (*port <= 0 || *port > 65535) return false;
  ips->clear();
  std::stringstream ss(endpoint.substr(0, colon));
  for (std::string ip; std::getline(ss, ip, ',');)
    if (same_host || ip.rfind("127.", 0) != 0) ips->push_back(ip);
  std::stable_partition(ips->begin(), ips->end(),
                        [&](const std::string& ip) { return same_host == (ip.rfind("127.", 0) == 0); });
  return !ips->empty();
}

namespace {

std::mutex g_secret_mu;
std::string g_secret;

// Reads the listener's "CHAL c" line (byte by byte: nothing after it is consumed) and answers it.
bool answer_challenge(int fd, int timeout_ms) {
  std::string line;
  const int64_t until = now_ns() + static_cast<int64_t>(timeout_ms) * 1000000;
  while (line.size() < kMaxUnprovenLine) {
    char c = 0;
    const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 1) {
      if (c == '\n') break;
      line += c;
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return false;
    const int64_t left_ms = (until - now_ns()) / 1000000;
    if (left_ms <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(left_ms));
  }
  if (line.rfind("CHAL ", 0) != 0) return false;
  return write_all(fd, "AUTH " + job_auth::proof(job_secret(), line.substr(5)) + "\n");
}

}  // namespace

std::string cap_message(const std::string& m, size_t max) {
  if (m.size() <= max) return m;
  const std::string note = " [... message truncated: " + std::to_string(m.size()) + " bytes in all ...] ";
  const size_t tail = max / 8;
  const size_t head = max > tail + note.size() ? max - tail - note.size() : 0;
  return m.substr(0, head) + note + m.substr(m.size() - tail);
}

void set_job_secret(const std::string& secret) {
  std::lock_guard<std::mutex> g(g_secret_mu);
  g_secret = secret;
}

std::string job_secret() {
  std::lock_guard<std::mutex> g(g_secret_mu);
  return g_secret;
}

std::string encode_challenge(const std::string& challenge) { return "CHAL " + challenge; }

bool proves_secret(std::string_view line, const std::string& challenge) {
  if (line.substr(0, 5) != "AUTH ") return false;
  return job_auth::proof_ok(job_secret(), challenge, std::string(line.substr(5)));
}

int connect_endpoint(const std::string& endpoint, bool same_host, int timeout_ms) {
  std::vector<std::string> ips;
  int port = 0;
  if (!parse_endpoints(endpoint, same_host, &ips, &port)) return -1;
  for (const auto& ip : ips) {
    const int fd = connect_to(ip, port, timeout_ms);
    if (fd < 0) continue;
    if (answer_challenge(fd, std::max(timeout_ms, kProofTimeoutMs))) return fd;
    close(fd);
  }
  return -1;
}

bool drain(int fd, LineBuffer& into) {
  char tmp[16384];
  while (true) {
    const ssize_t n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (n > 0) {
      into.append(tmp, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

}  // namespace cs::coord
