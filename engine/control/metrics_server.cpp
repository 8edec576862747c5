// --metrics-listen's HTTP server and --metrics FILE's atomic writer (metrics.hpp).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "clock.hpp"
#include "error.hpp"
#include "metrics.hpp"

namespace cs {

namespace {

constexpr int kPollMs = 100;        // how soon the server notices that it should stop
constexpr int kClientTimeoutS = 2;  // a client has this long to send its request (and to read)

void send_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away or stalled past its timeout
    done += static_cast<size_t>(n);
  }
}

std::string response(const std::string& status, const std::string& type, const std::string& body) {
  return "HTTP/1.0 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// The request's head (up to the blank line), at most `max` bytes; "" when it is not complete
// within kClientTimeoutS in all (a client trickling a byte at a time holds the server no longer);
// `too_long` when it is longer.
std::string read_head(int fd, size_t max, bool* too_long) {
  std::string head;
  char buf[1024];
  *too_long = false;
  const int64_t until = deadline_ns(std::chrono::seconds(kClientTimeoutS));
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() > max) {
      *too_long = true;
      return head;
    }
    if (now_ns() > until) return "";
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    head.append(buf, static_cast<size_t>(n));
  }
  return head;
}

}  // namespace

MetricsServer::MetricsServer(const std::string& address) {
  const auto [ip, port] = parse_listen_address(address);
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw InputError("--metrics-listen " + address + ": socket: " + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw InputError("--metrics-listen " + address + ": cannot listen there: " + why);
  }
  port_ = port;
  thread_ = std::thread([this] { serve(); });
}

MetricsServer::~MetricsServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

void MetricsServer::set_text(std::string text) {
  std::lock_guard<std::mutex> g(mu_);
  text_ = std::move(text);
}

void MetricsServer::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    timeval tv{kClientTimeoutS, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    answer(c);
    ::close(c);
  }
}

void MetricsServer::answer(int fd) {
  bool too_long = false;
  const std::string head = read_head(fd, kMaxRequest, &too_long);
  if (too_long) return send_all(fd, response("431 Request Header Fields Too Large", "text/plain", "too long\n"));
  if (head.empty()) return;
  const std::string line = head.substr(0, head.find_first_of("\r\n"));
  const size_t sp1 = line.find(' '), sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos) return send_all(fd, response("400 Bad Request", "text/plain", "bad request\n"));
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET" && method != "HEAD")
    return send_all(fd, response("405 Method Not Allowed", "text/plain", "GET /metrics\n"));
  if (path != "/metrics") return send_all(fd, response("404 Not Found", "text/plain", "see /metrics\n"));
  std::string body;
  {
    std::lock_guard<std::mutex> g(mu_);
    body = text_;
  }
  std::string r = response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body);
  if (method == "HEAD") r.resize(r.size() - body.size());
  send_all(fd, r);
}

MetricsSink::MetricsSink(const std::string& file, const std::string& listen, MetricLabels common)
    : file_(file), common_(std::move(common)) {
  if (!listen.empty()) server_ = std::make_unique<MetricsServer>(listen);
  write(metrics_text(metrics_from_report(nlohmann::json::object(), false), common_), true);
}

void MetricsSink::publish(const nlohmann::json& doc, const std::vector<MetricFamily>& extra) {
  extra_ = extra;
  write(metrics_text(merge_families(metrics_from_report(doc, false), extra_), common_), false);
}

void MetricsSink::publish_final(const nlohmann::json& doc) {
  write(metrics_text(merge_families(metrics_from_report(doc, true), extra_), common_), false);
}

void MetricsSink::write(const std::string& text, bool first) {
  if (server_) server_->set_text(text);
  if (file_.empty()) return;
  // node_exporter's textfile collector reads *.prom: written beside it under another name, then
  // renamed over it, so that a scrape never reads half a file.
  const std::string tmp = file_ + ".tmp";
  std::string why;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f || !(f << text) || !(f.flush())) why = std::strerror(errno ? errno : EIO);
  }
  if (why.empty() && std::rename(tmp.c_str(), file_.c_str()) != 0) why = std::strerror(errno);
  if (why.empty()) return;
  std::remove(tmp.c_str());
  const std::string msg = "--metrics " + file_ + ": cannot write it: " + why;
  if (first) throw Error(ExitCode::output, msg);
  if (!warned_)
    std::fprintf(stderr, "commscript: warning: %s (the run goes on; later writes say nothing)\n", msg.c_str());
  warned_ = true;
}

}  // namespace cs
