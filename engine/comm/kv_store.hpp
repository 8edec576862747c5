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

class KvServer {
 public:
  // Listens on all interfaces at `port` (0: any free port). `world_size` > 0: the ranks' hellos
  // are checked against it (and against each other: one live process per rank).
  explicit KvServer(int port = 0, int world_size = 0);
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
  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, std::string> data_;
  std::set<int> dead_;               // ranks whose connection closed without a goodbye
  std::map<int, std::string> live_;  // rank -> the address of the process that joined as it
  int world_size_ = 0;
  std::string refused_;  // the first launch refusal: the answer to every later wait for a key
  std::vector<std::thread> threads_;
  std::vector<int> fds_;
  std::thread acceptor_;
};

class KvClient {
 public:
  // Connects to host:port, retrying until `connect_timeout` (the server may start later).
  // `rank` (>= 0) is announced so that the server can tell when this process disappears;
  // `world_size` (> 0) with it, for a server that checks the launch (throws InputError when it
  // refuses this process: rank taken, out of range, or a size other than rank 0's).
  KvClient(const std::string& host, int port, int rank, std::chrono::milliseconds connect_timeout, int world_size = 0);
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
