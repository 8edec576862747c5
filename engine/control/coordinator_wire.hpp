#pragma once
// The control plane's wire protocol (docs/hangs-chaos-replay.md): newline-framed text messages
// over TCP, their encoding and decoding (pure functions), and the few socket helpers the
// coordinator, the host relays and the heartbeat clients share.
//
// rank -> its relay (or the coordinator)   HELLO r host pid | HB beat | EV json | RING json |
//                                           ERR code json | BYE [why] | MOVE (leaving the relay)
// relay -> coordinator                     RELAY leader host | AGG leader n (;rank hold_ms beat)* |
//                                           FWD rank <a rank's line> | GONE rank
// coordinator -> relay                      ALL cmd | TO rank cmd
// coordinator or relay -> rank              DUMP | ACK | CANCEL code | END [why] (rank 0 ends on
//                                           purpose) | TICK, LOST, RELAYEND (from a relay: it
//                                           is alive / lost rank 0 / ends)
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cs::coord {

// One heartbeat: what a rank is doing right now.
struct Beat {
  uint64_t started = 0;  // operations started so far
  bool in_flight = false;
  uint64_t seq = 0;        // the current (or last) operation's sequence number on its communicator
  uint64_t cseq = 0;       // its collective number there (Communicator::cseq(): comparable across ranks)
  std::string coll = "-";  // its collective
  uint64_t bytes = 0;
  double age_ms = 0;  // how long it has been in flight when the beat was sent
  std::string comm = "-";
  double deadline_s = 0;  // the operation's own deadline (0: none)
  uint64_t count = 0;
  int dtype = -1;
  std::string site = "-";  // the recipe file:line of the latest verified call ("-": unknown)
  // Out of any operation and seen running Lua since its latest one started: where (the
  // profiler's file:line), for how long (ms since the first such sample) and how fresh the
  // latest sample is (ms). "-", -1, -1 otherwise.
  std::string lua = "-";
  double lua_for_ms = -1;
  double lua_age_ms = -1;
};

// A beat a host leader forwards: whose, and how long the leader held it (ms since it arrived).
struct RelayedBeat {
  int rank = -1;
  double hold_ms = 0;
  Beat beat;
};

// Spaces, tabs and newlines become '_' (fields are space separated); empty becomes "-".
std::string token(std::string s);

std::string encode_beat(const Beat& b);  // "HB ..."
bool decode_beat(std::string_view line, Beat* b);
std::string encode_hello(int rank, const std::string& host, int pid);
bool decode_hello(std::string_view line, int* rank, std::string* host, int* pid);
std::string encode_relay_hello(int leader, const std::string& host);
bool decode_relay_hello(std::string_view line, int* leader, std::string* host);
std::string encode_host_beats(int leader, const std::vector<RelayedBeat>& beats);  // "AGG ..."
bool decode_host_beats(std::string_view line, int* leader, std::vector<RelayedBeat>* beats);
// "FWD r line" / "TO r cmd": a line about (or for) rank r.
std::string encode_addressed(const char* verb, int rank, std::string_view line);
bool decode_addressed(std::string_view line, const char* verb, int* rank, std::string* rest);

// Splits a byte stream into lines.
class LineBuffer {
 public:
  void append(const char* data, size_t n) { buf_.append(data, n); }
  bool next(std::string* line);  // the next complete line, without its '\n'
  std::string take_rest();       // what is left (an incomplete line)
  size_t size() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
};

// Sockets.
void set_nonblocking(int fd);
// Writes all of `s`; waits up to kWriteStallMs whenever the socket is full. False on failure.
bool write_all(int fd, std::string_view s);
// Connects to ip:port within timeout_ms; the fd (blocking mode off, TCP_NODELAY) or -1.
int connect_to(const std::string& ip, int port, int timeout_ms);
// "ip1,ip2:port" -> the ips in the order to try (loopback first on root's host, never
// elsewhere: loopback reaches the coordinator only from its own host) and the port.
bool parse_endpoints(const std::string& endpoint, bool same_host, std::vector<std::string>* ips, int* port);
// Connects to the first reachable address of `endpoint` that admits this process (it answers
// the listener's challenge with the proof of job_secret()); -1 when none answers or admits.
int connect_endpoint(const std::string& endpoint, bool same_host, int timeout_ms);

// A message carried through the control plane and into report.json (a recipe's error, on any
// rank) is at most kMaxMessageBytes: longer ones keep their head and tail and say how long they
// were (a 50 MiB error message outlasted the abort path, and report.json told another story).
inline constexpr size_t kMaxMessageBytes = 64 * 1024;
std::string cap_message(const std::string& message, size_t max = kMaxMessageBytes);

// Admission (docs/security.md): a listener (coordinator, host relay) greets every connection
// with "CHAL <challenge>"; the peer's first line must be "AUTH <HMAC-SHA256(secret, challenge)>"
// (launch_env.hpp job_auth), else it is logged and dropped. The secret is the job's, set on
// every rank before the control plane starts (rank 0 draws it, the world broadcasts it).
void set_job_secret(const std::string& secret);
std::string job_secret();
std::string encode_challenge(const std::string& challenge);  // "CHAL c"
// True when `line` is "AUTH <proof>" of job_secret() for `challenge`.
bool proves_secret(std::string_view line, const std::string& challenge);
// At most this many connections beyond the job's ranks may be unproven at once at the
// coordinator (kMaxPendingRelayPeers at a host relay, which serves its host's ranks), each for
// kProofTimeoutMs; an unproven peer's line is at most kMaxUnprovenLine bytes, a proven one's
// kMaxLineBytes.
inline constexpr size_t kMaxPendingPeers = 32;
inline constexpr size_t kMaxPendingRelayPeers = 1024;
inline constexpr int kProofTimeoutMs = 3000;
inline constexpr size_t kMaxUnprovenLine = 256;
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;
// Reads what is there; false on EOF or error (the peer is gone).
bool drain(int fd, LineBuffer& into);

}  // namespace cs::coord
