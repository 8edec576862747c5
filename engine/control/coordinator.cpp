#include "coordinator.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "dtype.hpp"
#include "error.hpp"
#include "flight_recorder.hpp"
#include "job.hpp"
#include "progress.hpp"
#include "size.hpp"

namespace cs {

namespace {

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd, POLLOUT, 0};
        if (poll(&p, 1, 200) <= 0) return false;
        continue;
      }
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

// Connects to ip:port within timeout_ms; returns the fd or -1.
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

std::string sanitize(std::string s) {
  for (char& c : s)
    if (c == ' ' || c == '\n' || c == '\t') c = '_';
  return s.empty() ? "-" : s;
}

}  // namespace

// ---------------------------------------------------------------- client

HeartbeatClient::HeartbeatClient(const std::string& endpoint, int rank, const std::string& host, bool same_host_as_root,
                                 int interval_ms)
    : rank_(rank), interval_ms_(interval_ms) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return;
  const int port = std::atoi(endpoint.c_str() + colon + 1);
  std::vector<std::string> ips;
  std::stringstream ss(endpoint.substr(0, colon));
  for (std::string ip; std::getline(ss, ip, ',');) ips.push_back(ip);
  // Loopback only reaches the coordinator from its own host (network namespace).
  std::stable_partition(ips.begin(), ips.end(),
                        [&](const std::string& ip) { return same_host_as_root == (ip.rfind("127.", 0) == 0); });
  for (const auto& ip : ips) {
    if (!same_host_as_root && ip.rfind("127.", 0) == 0) continue;
    fd_ = connect_to(ip, port, 1000);
    if (fd_ >= 0) break;
  }
  if (fd_ < 0) return;
  send_line("HELLO " + std::to_string(rank) + " " + sanitize(host) + " " + std::to_string(getpid()));
  thread_ = std::thread([this] { loop(); });
}

HeartbeatClient::~HeartbeatClient() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  send_line("BYE");  // a clean end: the coordinator must not take the closed connection for a death
  if (fd_ >= 0) close(fd_);
}

void HeartbeatClient::send_line(const std::string& s) {
  std::lock_guard<std::mutex> g(write_mu_);
  if (fd_ >= 0) write_all(fd_, s + "\n");
}

void HeartbeatClient::send_event(const nlohmann::json& ev) { send_line("EV " + ev.dump()); }

void HeartbeatClient::send_goodbye(const char* why) { send_line(std::string("BYE ") + why); }

bool HeartbeatClient::report_failure(int code, const std::string& message, int wait_ms) {
  if (fd_ < 0) return false;
  send_line("ERR " + std::to_string(code) + " " + nlohmann::json(message).dump());
  for (int waited = 0; waited < wait_ms && !acked_; waited += 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return acked_;
}

void HeartbeatClient::loop() {
  std::string in;
  while (!stop_) {
    const Progress& p = Progress::instance();
    const OpRecord cur = p.current();
    const bool flying = p.in_flight();
    const double age_ms = cur.start_ns ? static_cast<double>(now_ns() - cur.start_ns) * 1e-6 : 0.0;
    char line[512];
    std::snprintf(line, sizeof line, "HB %llu %d %llu %s %llu %.1f %s %.3f %llu %d %s",
                  static_cast<unsigned long long>(p.ops_started()), flying ? 1 : 0,
                  static_cast<unsigned long long>(cur.seq), std::string(collective_name(cur.coll)).c_str(),
                  static_cast<unsigned long long>(cur.bytes), age_ms, sanitize(std::string(cur.comm_name())).c_str(),
                  cur.deadline_s, static_cast<unsigned long long>(cur.count), cur.dtype,
                  sanitize(p.site().substr(0, 200)).c_str());
    send_line(line);
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, interval_ms_) > 0) {
      char buf[512];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return;  // the coordinator is gone; mpirun will end this rank
      in.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = in.find('\n')) != std::string::npos) {
        const std::string cmd = in.substr(0, nl);
        in.erase(0, nl + 1);
        if (cmd == "DUMP") send_line("RING " + flight_ring_json().dump());
        if (cmd == "ACK") acked_ = true;
        if (cmd.rfind("CANCEL ", 0) == 0) job::request_cancel(std::atoi(cmd.c_str() + 7));
      }
    }
  }
}

// ---------------------------------------------------------------- coordinator

struct Coordinator::RankState {
  bool hello = false, dead = false, bye = false;
  std::string host = "?";
  int pid = 0;
  int64_t last_hb_ns = 0, progress_ns = 0;
  uint64_t started = 0, op_seq = 0, bytes = 0;
  bool in_flight = false;
  double age_ms = 0, deadline_s = 0;  // the operation's own deadline (0: none)
  std::string coll, comm;
  uint64_t count = 0;
  int dtype = -1;
  std::string site;  // the recipe file:line of its latest verified call
  nlohmann::json ring;
  std::string inbuf;
};

Coordinator::Coordinator(Options o) : o_(std::move(o)) {
  ranks_.resize(static_cast<size_t>(o_.nranks));
  fds_.assign(static_cast<size_t>(o_.nranks), -1);
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(ExitCode::internal, std::string("coordinator: socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listen_fd_, 1024) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw Error(ExitCode::internal, std::string("coordinator: cannot listen: ") + std::strerror(errno));
  set_nonblocking(listen_fd_);
  std::string ips;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
      ips += (ips.empty() ? "" : ",") + std::string(buf);
    }
    freeifaddrs(ifs);
  }
  if (ips.empty()) ips = "127.0.0.1";
  endpoint_ = ips + ":" + std::to_string(ntohs(a.sin_port));
  thread_ = std::thread([this] { loop(); });
}

Coordinator::~Coordinator() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (int fd : fds_)
    if (fd >= 0) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

nlohmann::json Coordinator::events() const {
  std::lock_guard<std::mutex> g(mu_);
  return events_;
}

void Coordinator::cancel_all(int code) {
  std::lock_guard<std::mutex> g(mu_);
  judged_ = true;
  const std::string line = "CANCEL " + std::to_string(code) + "\n";
  for (int fd : fds_)
    if (fd >= 0) write_all(fd, line);
}

nlohmann::json Coordinator::snapshot() const {
  std::lock_guard<std::mutex> g(mu_);
  nlohmann::json out = nlohmann::json::array();
  const int64_t now = now_ns();
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    std::string state = !s.hello ? "never connected" : s.dead ? "dead (connection closed)" : "alive";
    if (s.hello && !s.dead && now - s.last_hb_ns > 1500000000LL) state = "no heartbeat";
    out.push_back({{"rank", r},
                   {"host", s.host},
                   {"pid", s.pid},
                   {"state", state},
                   {"op", s.coll},
                   {"seq", s.op_seq},
                   {"comm", s.comm},
                   {"in_flight", s.in_flight},
                   {"ops_started", s.started}});
  }
  return out;
}

void Coordinator::loop() {
  std::vector<int> pending;  // connected, no HELLO yet
  std::vector<std::string> pending_buf;
  const int64_t t_start = now_ns();
  while (!stop_) {
    std::vector<pollfd> pfs;
    pfs.push_back({listen_fd_, POLLIN, 0});
    for (int fd : pending) pfs.push_back({fd, POLLIN, 0});
    for (int fd : fds_)
      if (fd >= 0) pfs.push_back({fd, POLLIN, 0});
    poll(pfs.data(), pfs.size(), 50);
    const int64_t now = now_ns();
    if (pfs[0].revents & POLLIN) {
      while (true) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        pending.push_back(fd);
        pending_buf.emplace_back();
      }
    }
    struct Failure {
      int rank, code;
      std::string message;
    };
    std::vector<Failure> failures;
    std::vector<int> deaths;
    std::unique_lock<std::mutex> g(mu_);
    auto handle = [&](int rank, const std::string& line) {
      RankState& s = ranks_[static_cast<size_t>(rank)];
      if (line.rfind("HB ", 0) == 0) {
        char coll[64] = {0}, comm[128] = {0}, site[256] = {0};
        unsigned long long started = 0, seq = 0, bytes = 0, count = 0;
        int flying = 0, dtype = -1;
        double age = 0, deadline = 0;
        if (std::sscanf(line.c_str(), "HB %llu %d %llu %63s %llu %lf %127s %lf %llu %d %255s", &started, &flying, &seq,
                        coll, &bytes, &age, comm, &deadline, &count, &dtype, site) == 11) {
          s.count = count;
          s.dtype = dtype;
          s.site = std::strcmp(site, "-") == 0 ? "?" : site;  // unknown with call verification off
          s.deadline_s = deadline;
          if (started != s.started) s.progress_ns = now;
          s.started = started;
          s.in_flight = flying != 0;
          s.op_seq = seq;
          s.coll = coll;
          s.bytes = bytes;
          s.age_ms = age;
          s.comm = comm;
          s.last_hb_ns = now;
        }
      } else if (line.rfind("EV ", 0) == 0) {
        try {
          events_.push_back(nlohmann::json::parse(line.substr(3)));
        } catch (const nlohmann::json::exception&) {
        }
      } else if (line.rfind("RING ", 0) == 0) {
        try {
          s.ring = nlohmann::json::parse(line.substr(5));
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
          msg = line.substr(sp + 1);
        }
        failures.push_back({rank, std::atoi(line.c_str() + 4), msg});  // handled without the lock
      }
    };
    auto drain = [](int fd, std::string& buf) -> bool {  // false on EOF/error
      char tmp[4096];
      while (true) {
        const ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n > 0) {
          buf.append(tmp, static_cast<size_t>(n));
          continue;
        }
        if (n == 0) return false;
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
    };
    for (size_t i = 0; i < pending.size();) {
      const bool alive = drain(pending[i], pending_buf[i]);
      const size_t nl = pending_buf[i].find('\n');
      int rank = -1;
      if (nl != std::string::npos) {
        char host[256] = {0};
        int pid = 0;
        if (std::sscanf(pending_buf[i].c_str(), "HELLO %d %255s %d", &rank, host, &pid) == 3 && rank >= 0 &&
            rank < o_.nranks && fds_[static_cast<size_t>(rank)] < 0) {
          RankState& s = ranks_[static_cast<size_t>(rank)];
          s.hello = true;
          s.host = host;
          s.pid = pid;
          s.last_hb_ns = s.progress_ns = now;
          s.inbuf = pending_buf[i].substr(nl + 1);
          fds_[static_cast<size_t>(rank)] = pending[i];
        } else {
          rank = -1;
          close(pending[i]);
        }
      } else if (!alive) {
        close(pending[i]);
        rank = -2;
      }
      if (rank != -1 || nl != std::string::npos) {
        pending.erase(pending.begin() + static_cast<long>(i));
        pending_buf.erase(pending_buf.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    for (size_t r = 0; r < fds_.size(); ++r) {
      if (fds_[r] < 0) continue;
      RankState& s = ranks_[r];
      const bool alive = drain(fds_[r], s.inbuf);
      size_t nl;
      while ((nl = s.inbuf.find('\n')) != std::string::npos) {
        const std::string line = s.inbuf.substr(0, nl);
        s.inbuf.erase(0, nl + 1);
        handle(static_cast<int>(r), line);
      }
      if (!alive) {
        close(fds_[r]);
        fds_[r] = -1;
        s.dead = !s.bye;
        // The first death is the news; the ranks mpirun then ends close their connections too.
        if (s.dead && first_death_ < 0) {
          first_death_ = static_cast<int>(r);
          deaths.push_back(static_cast<int>(r));
        }
      }
    }
    // Setup has a deadline too: a rank that never connects is missing.
    if (o_.timeout_s > 0 && !judged_ && static_cast<double>(now - t_start) * 1e-9 > o_.timeout_s) {
      for (size_t r = 0; r < ranks_.size(); ++r)
        if (!ranks_[r].hello) {
          nlohmann::json inc = {
              {"kind", "timeout"},
              {"line", "timeout: rank " + std::to_string(r) + " never reached the coordinator within " +
                           std::to_string(static_cast<int>(o_.timeout_s)) + " s"},
              {"missing", nlohmann::json::array({{{"rank", r}, {"state", "never connected"}}})}};
          g.unlock();  // end_job locks again and (unless embedded) never returns
          end_job(inc);
          g.lock();
          break;
        }
    }
    if (!deaths.empty() && o_.on_death) {
      const RankState& d = ranks_[static_cast<size_t>(deaths[0])];
      nlohmann::json inc = {
          {"kind", "rank_died"},
          {"dead_ranks", nlohmann::json::array({{{"rank", deaths[0]}, {"host", d.host}, {"pid", d.pid}}})},
          {"last_op", {{"op", d.coll}, {"seq", d.op_seq}, {"comm", d.comm}, {"in_flight", d.in_flight}}},
          {"message", "rank " + std::to_string(deaths[0]) + " (host " + d.host + ", pid " + std::to_string(d.pid) +
                          ") died during the run (its connection closed without a goodbye) after " + d.coll + " #" +
                          std::to_string(d.op_seq) + "; mpirun ends the job with its exit status"},
          {"detected_by", "heartbeat"}};
      g.unlock();
      inc["ranks"] = snapshot();
      o_.on_death(inc);
      continue;
    }
    if (!failures.empty()) {
      g.unlock();  // the callback may ask for events() or snapshot()
      for (const Failure& f : failures) {
        if (o_.on_error) o_.on_error(f.rank, f.code, f.message);
        std::lock_guard<std::mutex> g2(mu_);
        if (fds_[static_cast<size_t>(f.rank)] >= 0) write_all(fds_[static_cast<size_t>(f.rank)], "ACK\n");
      }
      if (!o_.end_process) cancel_all(failures.front().code);
      continue;
    }
    check_desync(now);
    report_waiting(now);
    check_deadlines(now);
  }
}

namespace {
bool point_to_point(const std::string& coll) { return coll == "send" || coll == "recv" || coll == "sendrecv"; }
}  // namespace

void Coordinator::check_desync(int64_t now) {
  // (comm, seq) -> call -> ranks
  std::map<std::pair<std::string, uint64_t>, std::map<std::string, std::vector<int>>> at;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    if (!s.hello || s.dead || !s.in_flight || s.dtype < 0 || point_to_point(s.coll)) continue;
    if (now - s.last_hb_ns > 1500000000LL) continue;
    std::string call = s.coll;
    if (s.coll != "barrier")
      call += " count=" + std::to_string(s.count) + " " + std::string(dtype_name(static_cast<DType>(s.dtype)));
    at[{s.comm, s.op_seq}][call].push_back(static_cast<int>(r));
  }
  for (const auto& [key, calls] : at) {
    if (calls.size() < 2) continue;
    // Heartbeats come every 100 ms: give the ranks that are still on their way a few of them to
    // show where they are, so that every rank is on a side or named as elsewhere.
    const std::string k = key.first + "#" + std::to_string(key.second);
    if (desync_key_ != k) {
      desync_key_ = k;
      desync_seen_ns_ = now;
    }
    if (now - desync_seen_ns_ < 400000000LL) return;
    std::string line = "desync: " + key.first + " operation #" + std::to_string(key.second) +
                       ": the ranks called different operations";
    nlohmann::json sides = nlohmann::json::array(), mism = nlohmann::json::array();
    for (const auto& [call, rs] : calls) {
      // Within a side, ranks by call site.
      std::map<std::string, std::vector<int>> by_site;
      for (int r : rs)
        by_site[ranks_[static_cast<size_t>(r)].site.empty() ? "?" : ranks_[static_cast<size_t>(r)].site].push_back(r);
      std::string who;
      for (const auto& [site, ids] : by_site) {
        who += (who.empty() ? "" : ", ") + std::string(ids.size() > 1 ? "ranks " : "rank ");
        for (size_t i = 0; i < ids.size(); ++i) who += (i ? ", " : "") + std::to_string(ids[i]);
        who += " at " + site;
      }
      line += "; " + who + " called " + call;
      nlohmann::json members = nlohmann::json::array();
      for (int r : rs) {
        const RankState& s = ranks_[static_cast<size_t>(r)];
        members.push_back({{"rank", r}, {"host", s.host}, {"site", s.site}});
        mism.push_back({{"rank", r},
                        {"host", s.host},
                        {"op", s.coll},
                        {"seq", s.op_seq},
                        {"bytes", s.bytes},
                        {"count", s.count},
                        {"dtype", std::string(dtype_name(static_cast<DType>(s.dtype)))},
                        {"site", s.site}});
      }
      sides.push_back({{"call", call}, {"ranks", members}});
    }
    nlohmann::json elsewhere = nlohmann::json::array();
    std::string others;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const RankState& s = ranks_[r];
      bool on_side = false;
      for (const auto& [call, rs] : calls) on_side = on_side || std::count(rs.begin(), rs.end(), static_cast<int>(r));
      if (on_side) continue;
      const std::string where = !s.hello ? "never connected"
                                : s.dead ? "dead"
                                : s.in_flight
                                    ? "in " + s.coll + " #" + std::to_string(s.op_seq) + " on " + s.comm
                                    : "not in an operation (last: " + s.coll + " #" + std::to_string(s.op_seq) + ")";
      elsewhere.push_back({{"rank", r}, {"host", s.host}, {"state", where}});
      others += (others.empty() ? "" : ", ") + std::to_string(r) + " (" + where + ")";
    }
    if (!others.empty()) line += "; elsewhere: rank " + others;
    nlohmann::json inc = {{"kind", "desync"},  {"elsewhere", elsewhere},
                          {"line", line},      {"comm", key.first},
                          {"seq", key.second}, {"sides", sides},
                          {"mismatch", mism},  {"detected_by", "heartbeat (call verification)"}};
    mu_.unlock();  // end_job takes the lock itself and never returns
    end_job(inc);
  }
}

void Coordinator::report_waiting(int64_t now) {
  // The longest wait among the ranks in an operation.
  int longest = -1;
  double longest_ms = 0;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    if (!s.hello || s.dead || !s.in_flight) continue;
    const double ms = s.age_ms + static_cast<double>(now - s.last_hb_ns) * 1e-6;
    if (ms > longest_ms) {
      longest = static_cast<int>(r);
      longest_ms = ms;
    }
  }
  if (longest < 0) return;
  const RankState& ref = ranks_[static_cast<size_t>(longest)];
  // 10 % of the deadline, at least 10 s; then again every such interval.
  const double every_s = std::max(10.0, ref.deadline_s > 0 ? ref.deadline_s * 0.1 : 0.0);
  const std::string op = ref.comm + "#" + std::to_string(ref.op_seq);
  if (longest_ms * 1e-3 < every_s) return;
  if (op == waited_op_ && static_cast<double>(now - last_wait_note_ns_) * 1e-9 < every_s) return;
  waited_op_ = op;
  last_wait_note_ns_ = now;
  const nlohmann::json v = verdict(longest, now);
  std::string arrived, missing;
  for (const auto& a : v["arrived"]) arrived += (arrived.empty() ? "" : ", ") + std::to_string(a.get<size_t>());
  for (const auto& m : v["missing"]) {
    missing += (missing.empty() ? "" : "; ") + std::to_string(m["rank"].get<size_t>()) + " (host " +
               m.value("host", std::string("?")) + ", " + m.value("state", std::string("?"));
    if (m.contains("detail")) missing += ": " + m["detail"].get<std::string>();
    missing += ")";
  }
  std::fprintf(
      stderr, "commscript: waiting %.0f s in %s #%llu (%sB, %s)%s; arrived: %s; missing: %s\n", longest_ms * 1e-3,
      ref.coll.c_str(), static_cast<unsigned long long>(ref.op_seq), format_size(ref.bytes).c_str(), ref.comm.c_str(),
      ref.deadline_s > 0 ? (", deadline " + std::to_string(static_cast<long>(ref.deadline_s)) + " s").c_str() : "",
      arrived.empty() ? "none" : arrived.c_str(), missing.empty() ? "none" : missing.c_str());
  std::fflush(stderr);
}

void Coordinator::check_deadlines(int64_t now) {
  int worst = -1;
  double worst_ms = 0;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    if (!s.hello || s.dead || !s.in_flight || s.deadline_s <= 0) continue;
    const double ms = s.age_ms + static_cast<double>(now - s.last_hb_ns) * 1e-6;
    if (ms > s.deadline_s * 1000 && ms > worst_ms) {
      worst = static_cast<int>(r);
      worst_ms = ms;
    }
  }
  if (worst < 0 || judged_) return;
  nlohmann::json inc = verdict(worst, now);
  mu_.unlock();  // end_job takes the lock itself and (unless embedded) never returns
  end_job(inc);
  mu_.lock();
}

nlohmann::json Coordinator::verdict(int stuck, int64_t now) const {
  const RankState& ref = ranks_[static_cast<size_t>(stuck)];
  const double after_s = (ref.age_ms + static_cast<double>(now - ref.last_hb_ns) * 1e-6) * 1e-3;
  nlohmann::json missing = nlohmann::json::array(), mismatch = nlohmann::json::array(),
                 arrived = nlohmann::json::array();
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    nlohmann::json who = {{"rank", r}, {"host", s.host}, {"pid", s.pid}};
    const bool silent = s.hello && !s.dead && now - s.last_hb_ns > 1500000000LL;
    const bool same_op = s.in_flight && s.comm == ref.comm && s.op_seq == ref.op_seq;
    if (!s.hello) {
      who["state"] = "never connected";
    } else if (s.dead) {
      who["state"] = "dead";
      who["detail"] = "process gone (connection closed)";
    } else if (silent) {
      who["state"] = "stuck";
      who["detail"] = "no heartbeat for " + std::to_string((now - s.last_hb_ns) / 1000000) + " ms (stopped or frozen)";
    } else if (same_op && (s.coll != ref.coll || s.bytes != ref.bytes)) {
      mismatch.push_back({{"rank", r}, {"host", s.host}, {"op", s.coll}, {"seq", s.op_seq}, {"bytes", s.bytes}});
      continue;
    } else if (same_op) {
      arrived.push_back(r);
      continue;
    } else if (s.comm == ref.comm && s.op_seq > ref.op_seq) {
      arrived.push_back(r);  // already past it (e.g. a rooted op's early finisher)
      continue;
    } else {
      const bool progressing =
          now - s.progress_ns < std::min<int64_t>(2000000000LL, static_cast<int64_t>(o_.timeout_s * 5e8));
      who["state"] = progressing ? "slow" : "stuck";
      who["detail"] = std::string(progressing ? "still progressing, " : "no progress, ") +
                      (s.in_flight ? "in " + s.coll + " #" + std::to_string(s.op_seq) + " on " + s.comm
                                   : "not in an operation (last: " + s.coll + " #" + std::to_string(s.op_seq) + ")");
      who["last_seq"] = s.op_seq;
    }
    missing.push_back(who);
  }
  // Desync: when every rank that arrived called the same thing as `ref`, but others called
  // something else at the same sequence number, list both sides.
  nlohmann::json mism = nlohmann::json::array();
  if (!mismatch.empty()) {
    mism.push_back({{"rank", stuck}, {"host", ref.host}, {"op", ref.coll}, {"seq", ref.op_seq}, {"bytes", ref.bytes}});
    for (auto& m : mismatch) mism.push_back(m);
  }
  char head[256];
  std::snprintf(head, sizeof head, "timeout: %s #%llu (%sB, %s) after %.1f s", ref.coll.c_str(),
                static_cast<unsigned long long>(ref.op_seq), format_size(ref.bytes).c_str(), ref.comm.c_str(), after_s);
  std::string line = head;
  if (!missing.empty()) {
    line += "; missing ranks: ";
    for (size_t i = 0; i < missing.size(); ++i) {
      const auto& m = missing[i];
      line += (i ? ", " : "") + std::to_string(m["rank"].get<size_t>()) + " (host " + m["host"].get<std::string>() +
              ", " + m["state"].get<std::string>() + ")";
    }
  }
  if (!mism.empty()) {
    line += "; mismatch:";
    for (auto& m : mism)
      line += " rank " + std::to_string(m["rank"].get<size_t>()) + " called " + m["op"].get<std::string>() + " #" +
              std::to_string(m["seq"].get<uint64_t>()) + " (" + format_size(m["bytes"].get<uint64_t>()) + "B);";
    line.pop_back();
  }
  return {{"kind", "timeout"},  {"line", line},     {"op", ref.coll},     {"seq", ref.op_seq},
          {"bytes", ref.bytes}, {"comm", ref.comm}, {"after_s", after_s}, {"timeout_s", ref.deadline_s},
          {"missing", missing}, {"mismatch", mism}, {"arrived", arrived}, {"detected_by", "deadline"}};
}

void Coordinator::end_job(nlohmann::json inc) {
  std::fprintf(stderr, "%s\n", inc["line"].get<std::string>().c_str());
  std::fflush(stderr);
  {
    std::lock_guard<std::mutex> g(mu_);
    for (int fd : fds_)
      if (fd >= 0) write_all(fd, "DUMP\n");
  }
  // Collect the flight recorders for up to 1.5 s (the loop is this thread: read inline).
  const int64_t until = now_ns() + 1500000000LL;
  while (now_ns() < until) {
    bool all = true;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (size_t r = 0; r < fds_.size(); ++r) {
        if (fds_[r] < 0) continue;
        RankState& s = ranks_[r];
        char tmp[65536];
        ssize_t n;
        while ((n = recv(fds_[r], tmp, sizeof tmp, MSG_DONTWAIT)) > 0) s.inbuf.append(tmp, static_cast<size_t>(n));
        size_t nl;
        while ((nl = s.inbuf.find('\n')) != std::string::npos) {
          const std::string line = s.inbuf.substr(0, nl);
          s.inbuf.erase(0, nl + 1);
          if (line.rfind("RING ", 0) == 0) {
            try {
              s.ring = nlohmann::json::parse(line.substr(5));
            } catch (const nlohmann::json::exception&) {
            }
          } else if (line.rfind("EV ", 0) == 0) {
            try {
              events_.push_back(nlohmann::json::parse(line.substr(3)));
            } catch (const nlohmann::json::exception&) {
            }
          }
        }
        if (s.ring.is_null()) all = false;
      }
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  nlohmann::json files = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> g(mu_);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].ring.is_null()) continue;
      const std::string f = write_flight_record(o_.out_dir, static_cast<int>(r), ranks_[r].host, ranks_[r].ring);
      if (!f.empty()) files.push_back(f);
    }
  }
  inc["flight_recorder"] = files;
  inc["ranks"] = snapshot();
  if (o_.on_timeout) o_.on_timeout(inc);
  std::fflush(nullptr);
  if (!o_.end_process) {  // embedded: the run ends, the host's process goes on
    cancel_all(static_cast<int>(ExitCode::timeout));
    return;
  }
  _exit(static_cast<int>(ExitCode::timeout));
}

}  // namespace cs
