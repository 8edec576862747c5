#pragma once
// commscript's own rendezvous store: a small key-value store served over TCP by rank 0, used
// by backends that need one (Gloo) instead of a shared file system. The server also notices
// which ranks' connections closed without saying goodbye (a killed process): the first, cheap
// witness of a dropped rank. Given the world's size (a launch without MPI, where every process
// read its rank and size from its own variables), it also refuses a process whose size differs
// from rank 0's, whose rank is out of range or taken by another live process; every rank then
// learns that refusal at its next wait for a key, instead of waiting out the deadline.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cs {

// Admission (docs/security.md): the server sends each new connection a random challenge and
// serves only a peer whose first request proves the job's secret (HMAC-SHA256 of the challenge,
// launch_env.hpp job_auth); anyone else is logged and dropped, and the store goes on. At most
// kMaxPendingPeers connections may be unproven at once (more wait in the backlog), each for
// kProofTimeoutMs; a frame from
// an unproven peer is at most kMaxUnprovenFrame bytes, from a proven one kMaxFrame, and memory
// grows only with the bytes that really arrive.
inline constexpr int kMaxPendingPeers = 16;
inline constexpr int kProofTimeoutMs = 3000;
inline constexpr uint32_t kMaxUnprovenFrame = 256;
inline constexpr uint32_t kMaxFrame = 64u << 20;

class KvServer {
 public:
  // Listens on `bind_ip` ("127.0.0.1" by default; "" for every interface, the fallback when the
  // job's address is not one of this host's) at `port` (0: any free port). `world_size` > 0:
  // the ranks' hellos are checked against it (and against each other: one live process per
  // rank). `secret`: what a peer must prove (empty: the insecure opt-out, still a handshake).
  explicit KvServer(int port = 0, int world_size = 0, std::string secret = "",
                    const std::string& bind_ip = "127.0.0.1");
  // The IPv4 address to listen on for a job whose store is reached as `host`: loopback when all
  // ranks share this host; else what `host` resolves to (empty, every interface, when that is a
  // loopback address that other hosts cannot use: Debian maps the host name to 127.0.1.1).
  static std::string listen_ip_for(const std::string& host, bool one_host);
  // Where this host's own client dials the server.
  const std::string& dial_ip() const { return dial_ip_; }
  ~KvServer();
  KvServer(const KvServer&) = delete;
  KvServer& operator=(const KvServer&) = delete;
  int port() const { return port_; }
  // The key set once every rank of a checked launch (world_size > 0) has joined.
  static constexpr const char* kLaunchKey = "cs/launch/complete";
  // After a refused launch: waits up to `limit` for the other joined processes to leave (each
  // reads the refusal from its next wait for a key), so they exit with its words rather than a
  // lost connection when this, rank 0's, process ends.
  void drain(std::chrono::milliseconds limit);

 private:
  void accept_loop();
  void serve(int fd);
  bool admit(int fd);  // the challenge and the peer's proof
  int listen_fd_ = -1, port_ = 0;
  std::string secret_, dial_ip_;
  std::atomic<int> pending_{0};
  std::atomic<int> refusals_logged_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, std::string> data_;
  std::set<int> dead_;               // ranks whose connection closed without a goodbye
  std::map<int, std::string> live_;  // rank -> the address of the process that joined as it
  int world_size_ = 0;
  std::string refused_;  // the first launch refusal: the answer to every later wait for a key
  struct Peer {
    std::thread thread;
    int fd = -1;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Peer> peers_;  // one thread per connection; finished ones reaped by the acceptor
  std::thread acceptor_;
};

class KvClient {
 public:
  // Connects to host:port, retrying until `connect_timeout` (the server may start later).
  // `rank` (>= 0) is announced so that the server can tell when this process disappears;
  // `world_size` (> 0) with it, for a server that checks the launch (throws InputError when it
  // refuses this process: rank taken, out of range, or a size other than rank 0's).
  // `secret`: the job's, proved to the server in answer to its challenge (throws InputError
  // when the server does not accept the proof: another job's secret).
  KvClient(const std::string& host, int port, int rank, std::chrono::milliseconds connect_timeout, int world_size = 0,
           const std::string& secret = "");
  ~KvClient();
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  void set(const std::string& key, const std::string& value);
  // Waits for `key` up to `timeout`; throws Error(timeout) naming the key when it never comes,
  // InputError with the server's words when it refused a process of the launch meanwhile.
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  bool try_get(const std::string& key, std::string* value);
  // Ranks whose connection to the server closed without a goodbye, ascending.
  std::vector<int> dead_ranks();
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // This process's address on the interface that reaches the server (what peers should dial).
  std::string local_address() const;

 private:
  std::string request(char op, const std::string& key, const std::string& value, char* status);
  std::mutex mu_;
  int fd_ = -1;
  std::string host_;
  int port_ = 0;
};

// "host:port" -> parts; throws InputError naming `what` on a malformed address.
std::pair<std::string, int> parse_endpoint(const std::string& endpoint, const std::string& what);

}  // namespace cs
