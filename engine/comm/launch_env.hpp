#pragma once
// How this process was launched, read from its environment: by an MPI launcher (mpirun, srun
// with PMIx), torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)
// or Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR/MASTER_PORT for the store).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cs {

struct LaunchEnv {
  std::string kind;       // "mpi", "env" or "slurm"
  bool detected = false;  // chosen by --launcher auto rather than named
  int rank = 0, size = 1, local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  // The job's secret (--launcher env/slurm): COMMSCRIPT_JOB_TOKEN, or the file named by
  // COMMSCRIPT_JOB_TOKEN_FILE; empty with `insecure` (COMMSCRIPT_JOB_TOKEN=insecure).
  std::string token;
  bool insecure = false;
  nlohmann::json to_json() const;
};

// The launchers commscript knows, in one list: "auto" (detected), "mpi", "env", "slurm".
const std::vector<std::string>& launcher_names();
// Whether `kind` is one of them; otherwise false and *why ("launcher 'x' is none of auto, mpi,
// env, slurm"). The one check of a launcher's name (the C API's session, the launch below).
bool launcher_known(const std::string& kind, std::string* why);

// `kind`: one of launcher_names(). Throws InputError naming the missing or inconsistent
// variable (for env and slurm: also no job token, docs/security.md).
LaunchEnv read_launch_env(const std::string& kind);

// The control plane's admission (docs/security.md): every listener (the Gloo store, the
// coordinator, the host relays) sends a fresh random challenge to each peer that connects and
// admits only a peer that answers with HMAC-SHA256(secret, challenge); the secret itself never
// crosses the wire. Under mpirun rank 0 draws the secret and MPI broadcasts it; under
// --launcher env/slurm it is the job token.
namespace job_auth {
inline constexpr const char* kInsecure = "insecure";                         // COMMSCRIPT_JOB_TOKEN=insecure: opted out
std::string random_secret();                                                 // 32 random bytes (RAND_bytes), as hex
std::string challenge();                                                     // 16 random bytes, as hex
std::string proof(const std::string& secret, const std::string& challenge);  // HMAC-SHA256, hex
bool proof_ok(const std::string& secret, const std::string& challenge, const std::string& proof);
// The job token of a launch without MPI: COMMSCRIPT_JOB_TOKEN, or the contents of the file
// COMMSCRIPT_JOB_TOKEN_FILE (which must be a regular file readable by its owner only).
// Throws InputError naming `who` when there is none; *insecure when the user opted out.
std::string token_from_env(const std::string& who, bool* insecure);
}  // namespace job_auth

}  // namespace cs
