#include "launch_env.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "error.hpp"
#include "file_read.hpp"

namespace cs {

namespace {

const char* get(const char* v) {
  const char* s = std::getenv(v);
  return s && *s ? s : nullptr;
}

int int_var(const std::string& who, const char* v, bool required, int fallback, int lo, int hi) {
  const char* s = get(v);
  if (!s) {
    if (required) throw InputError(who + ": " + v + " is not set");
    return fallback;
  }
  char* end = nullptr;
  const long x = std::strtol(s, &end, 10);
  if (*end || x < lo || x > hi)
    throw InputError(who + ": " + v + "='" + s + "' is not an integer in " + std::to_string(lo) + ".." +
                     std::to_string(hi));
  return static_cast<int>(x);
}

void check_rank(const std::string& who, const LaunchEnv& e, const char* rank_var, const char* size_var) {
  if (e.rank >= e.size)
    throw InputError(who + ": " + rank_var + "=" + std::to_string(e.rank) + " is not below " + size_var + "=" +
                     std::to_string(e.size));
}

}  // namespace

nlohmann::json LaunchEnv::to_json() const {
  nlohmann::json j = {{"kind", kind}, {"detected", detected}};
  if (kind != "mpi") {  // MPI's size is the run's ranks
    j["size"] = size;
    j["master_addr"] = master_addr;
    j["master_port"] = master_port;
  }
  return j;
}

const std::vector<std::string>& launcher_names() {
  static const std::vector<std::string> names = {"auto", "mpi", "env", "slurm"};
  return names;
}

bool launcher_known(const std::string& kind, std::string* why) {
  const auto& n = launcher_names();
  if (std::find(n.begin(), n.end(), kind) != n.end()) return true;
  std::string list;
  for (const auto& x : n) list += (list.empty() ? "" : ", ") + x;
  return *why = "launcher '" + kind + "' is none of " + list, false;
}

LaunchEnv read_launch_env(const std::string& kind_in) {
  LaunchEnv e;
  e.kind = kind_in;
  if (kind_in == "auto") {
    e.detected = true;
    if (get("OMPI_COMM_WORLD_RANK") || get("PMI_RANK") || get("PMIX_RANK"))
      e.kind = "mpi";
    else if (get("RANK") && get("WORLD_SIZE"))
      e.kind = "env";
    else if (get("SLURM_PROCID") && get("SLURM_NTASKS") && get("SLURM_STEP_ID"))
      e.kind = "slurm";
    else
      e.kind = "mpi";  // mpirun, or a process on its own (an MPI singleton)
  }
  if (e.kind == "mpi") return e;
  if (e.kind == "env") {
    const std::string who = "--launcher env (torchrun-style: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)";
    e.size = int_var(who, "WORLD_SIZE", true, 1, 1, 1 << 20);
    e.rank = int_var(who, "RANK", true, 0, 0, 1 << 20);
    check_rank(who, e, "RANK", "WORLD_SIZE");
    e.local_rank = int_var(who, "LOCAL_RANK", false, 0, 0, 1 << 20);
    if (get("LOCAL_WORLD_SIZE")) {
      const int lws = int_var(who, "LOCAL_WORLD_SIZE", true, 1, 1, 1 << 20);
      if (e.local_rank >= lws)
        throw InputError(who + ": LOCAL_RANK=" + std::to_string(e.local_rank) +
                         " is not below LOCAL_WORLD_SIZE=" + std::to_string(lws));
      if (lws > e.size)
        throw InputError(who + ": LOCAL_WORLD_SIZE=" + std::to_string(lws) +
                         " exceeds WORLD_SIZE=" + std::to_string(e.size));
    }
    if (!get("MASTER_ADDR")) throw InputError(who + ": MASTER_ADDR is not set");
    e.master_addr = get("MASTER_ADDR");
    e.master_port = int_var(who, "MASTER_PORT", true, 0, 1, 65535);
    e.token = job_auth::token_from_env(who, &e.insecure);
    return e;
  }
  if (e.kind == "slurm") {
    const std::string who = "--launcher slurm (SLURM_PROCID, SLURM_NTASKS; MASTER_ADDR, MASTER_PORT)";
    e.size = int_var(who, "SLURM_NTASKS", true, 1, 1, 1 << 20);
    e.rank = int_var(who, "SLURM_PROCID", true, 0, 0, 1 << 20);
    check_rank(who, e, "SLURM_PROCID", "SLURM_NTASKS");
    e.local_rank = int_var(who, "SLURM_LOCALID", false, 0, 0, 1 << 20);
    if (!get("MASTER_ADDR"))
      throw InputError(who +
                       ": MASTER_ADDR is not set (export the first node's address, e.g. from "
                       "scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)");
    e.master_addr = get("MASTER_ADDR");
    e.master_port = int_var(who, "MASTER_PORT", false, 29500, 1, 65535);
    e.token = job_auth::token_from_env(who, &e.insecure);
    return e;
  }
  std::string list;  // "auto, mpi, env or slurm"
  const auto& n = launcher_names();
  for (size_t i = 0; i < n.size(); ++i) list += (i == 0 ? "" : i + 1 == n.size() ? " or " : ", ") + n[i];
  throw InputError("--launcher " + kind_in + ": expected " + list);
}

namespace job_auth {

namespace {

std::string hex(const unsigned char* p, size_t n) {
  static const char* const d = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

std::string random_hex(size_t n) {
  unsigned char b[64];
  if (n > sizeof b || RAND_bytes(b, static_cast<int>(n)) != 1)
    throw Error(ExitCode::internal, "control plane: no random bytes for the job's secret (RAND_bytes failed)");
  return hex(b, n);
}

}  // namespace

std::string random_secret() { return random_hex(32); }
std::string challenge() { return random_hex(16); }

std::string proof(const std::string& secret, const std::string& challenge) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  static const unsigned char kEmpty = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmpty) : secret.data();
  if (!HMAC(EVP_sha256(), key, static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(challenge.data()), challenge.size(), mac, &n))
    throw Error(ExitCode::internal, "control plane: HMAC-SHA256 failed");
  return hex(mac, n);
}

bool proof_ok(const std::string& secret, const std::string& challenge, const std::string& given) {
  const std::string want = proof(secret, challenge);
  return given.size() == want.size() && CRYPTO_memcmp(given.data(), want.data(), want.size()) == 0;
}

std::string token_from_env(const std::string& who, bool* insecure) {
  *insecure = false;
  const char* t = get("COMMSCRIPT_JOB_TOKEN");
  const char* f = get("COMMSCRIPT_JOB_TOKEN_FILE");
  const std::string how =
      " (docs/security.md: every process of the job needs the same secret, e.g. export COMMSCRIPT_JOB_TOKEN=$(openssl "
      "rand -hex 32) before the launcher, or COMMSCRIPT_JOB_TOKEN_FILE=FILE readable only by you; "
      "COMMSCRIPT_JOB_TOKEN=insecure or --insecure-control-plane on a trusted network only)";
  std::string token;
  if (t) {
    token = t;
  } else if (f) {
    const FileRead r = read_regular_file(f, 4096);  // file_read.hpp: no FIFO, no device, bounded
    std::string why = r.why;
    if (r.ok() && r.st.st_uid != ::geteuid())
      why = "not owned by this user";
    else if (r.ok() && (r.st.st_mode & (S_IRWXG | S_IRWXO)))
      why = "readable or writable by others (chmod 600 it)";
    if (!why.empty()) throw InputError(who + ": COMMSCRIPT_JOB_TOKEN_FILE=" + f + ": " + why);
    token = r.text;
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  } else {
    throw InputError(who +
                     ": no job token: without MPI the control plane admits only processes that know the job's "
                     "secret" +
                     how);
  }
  if (token == kInsecure) {
    *insecure = true;
    return "";
  }
  if (token.size() < 16)
    throw InputError(who + ": the job token is " + std::to_string(token.size()) +
                     " characters long; at least 16 are needed" + how);
  return token;
}

}  // namespace job_auth

}  // namespace cs
