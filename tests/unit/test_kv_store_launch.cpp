// commscript's rendezvous store (kv_store.hpp) and the launcher variables (launch_env.hpp).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "error.hpp"
#include "kv_store.hpp"
#include "launch_env.hpp"

using namespace cs;
using namespace std::chrono_literals;

TEST_CASE("store: set, get, a key that never comes, and a dead rank", "[kv_store]") {
  KvServer server(0);
  REQUIRE(server.port() > 0);
  KvClient a("127.0.0.1", server.port(), 0, 2000ms);
  {
    KvClient b("127.0.0.1", server.port(), 1, 2000ms);
    a.set("k", std::string("v\0w", 3));
    CHECK(b.get("k", 1000ms) == std::string("v\0w", 3));
    std::string v;
    CHECK_FALSE(b.try_get("missing", &v));
    std::thread late([&] {
      std::this_thread::sleep_for(50ms);
      a.set("late", "x");
    });
    CHECK(b.get("late", 2000ms) == "x");
    late.join();
    CHECK_THROWS_WITH(b.get("never", 100ms), Catch::Contains("'never' did not appear"));
    CHECK(a.local_address() == "127.0.0.1");
  }  // b said goodbye: not dead
  std::this_thread::sleep_for(50ms);
  CHECK(a.dead_ranks().empty());
}

TEST_CASE("store: an address that is not HOST:PORT", "[kv_store]") {
  CHECK(parse_endpoint("h:29500", "x") == std::pair<std::string, int>{"h", 29500});
  CHECK_THROWS_AS(parse_endpoint("h", "x"), InputError);
  CHECK_THROWS_AS(parse_endpoint("h:0", "x"), InputError);
  CHECK_THROWS_AS(parse_endpoint("h:p", "x"), InputError);
}

namespace {
struct Env {
  explicit Env(std::initializer_list<std::pair<const char*, const char*>> kv) {
    for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "SLURM_NTASKS",
                          "SLURM_STEP_ID", "SLURM_LOCALID", "COMMSCRIPT_JOB_TOKEN", "COMMSCRIPT_JOB_TOKEN_FILE"}) {
      if (const char* v = std::getenv(k)) saved.emplace_back(k, v);
      unsetenv(k);
    }
    for (auto& [k, v] : kv) setenv(k, v, 1);
  }
  ~Env() {
    for (const char* k :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
          "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_LOCALID", "COMMSCRIPT_JOB_TOKEN", "COMMSCRIPT_JOB_TOKEN_FILE"})
      unsetenv(k);
    for (auto& [k, v] : saved) setenv(k.c_str(), v.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved;
};
}  // namespace

TEST_CASE("launcher: torchrun-style variables", "[launch_env]") {
  {
    Env e{{"RANK", "2"},         {"WORLD_SIZE", "4"},      {"LOCAL_RANK", "0"},
          {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29400"}, {"COMMSCRIPT_JOB_TOKEN", "0123456789abcdef-unit"}};
    const LaunchEnv l = read_launch_env("auto");
    CHECK(l.kind == "env");
    CHECK(l.detected);
    CHECK(l.rank == 2);
    CHECK(l.size == 4);
    CHECK(l.master_addr == "n1");
    CHECK(l.master_port == 29400);
  }
  {
    Env e{{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1"}};
    CHECK_THROWS_WITH(read_launch_env("env"), Catch::Contains("RANK=4 is not below WORLD_SIZE=4"));
  }
  {
    Env e{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "n1"}};
    CHECK_THROWS_WITH(read_launch_env("env"), Catch::Contains("MASTER_PORT is not set"));
  }
  {
    Env e{};
    CHECK(read_launch_env("auto").kind == "mpi");
    CHECK_THROWS_WITH(read_launch_env("env"), Catch::Contains("WORLD_SIZE is not set"));
  }
}

TEST_CASE("launcher: Slurm's variables, and MPI's win", "[launch_env]") {
  {
    Env e{{"SLURM_PROCID", "1"},
          {"SLURM_NTASKS", "2"},
          {"SLURM_STEP_ID", "0"},
          {"MASTER_ADDR", "n1"},
          {"COMMSCRIPT_JOB_TOKEN", "insecure"}};
    const LaunchEnv l = read_launch_env("auto");
    CHECK(l.insecure);
    CHECK(l.kind == "slurm");
    CHECK(l.rank == 1);
    CHECK(l.master_port == 29500);
  }
  {
    Env e{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}};
    CHECK_THROWS_WITH(read_launch_env("slurm"), Catch::Contains("MASTER_ADDR is not set"));
  }
  {
    Env e{{"PMIX_RANK", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}};
    CHECK(read_launch_env("auto").kind == "mpi");
  }
}

TEST_CASE("launcher: the job token (docs/security.md)", "[launch_env]") {
  {  // none: refused, naming the variables
    Env e{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1"}};
    CHECK_THROWS_WITH(read_launch_env("env"),
                      Catch::Contains("no job token") && Catch::Contains("COMMSCRIPT_JOB_TOKEN"));
  }
  {  // too short
    Env e{
        {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1"}, {"COMMSCRIPT_JOB_TOKEN", "x"}};
    CHECK_THROWS_WITH(read_launch_env("env"), Catch::Contains("at least 16"));
  }
  const std::string path = "/tmp/cs_unit_token_" + std::to_string(getpid());
  {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("0123456789abcdef0123\n", f);
    std::fclose(f);
  }
  {  // a file others can read: refused
    chmod(path.c_str(), 0644);
    Env e{{"RANK", "0"},
          {"WORLD_SIZE", "2"},
          {"MASTER_ADDR", "n1"},
          {"MASTER_PORT", "1"},
          {"COMMSCRIPT_JOB_TOKEN_FILE", path.c_str()}};
    CHECK_THROWS_WITH(read_launch_env("env"), Catch::Contains("readable or writable by others"));
  }
  {  // the user's own: read, without its newline
    chmod(path.c_str(), 0600);
    Env e{{"RANK", "0"},
          {"WORLD_SIZE", "2"},
          {"MASTER_ADDR", "n1"},
          {"MASTER_PORT", "1"},
          {"COMMSCRIPT_JOB_TOKEN_FILE", path.c_str()}};
    CHECK(read_launch_env("env").token == "0123456789abcdef0123");
  }
  {  // a FIFO or a directory: refused by type
    Env e{{"RANK", "0"},
          {"WORLD_SIZE", "2"},
          {"MASTER_ADDR", "n1"},
          {"MASTER_PORT", "1"},
          {"COMMSCRIPT_JOB_TOKEN_FILE", "/tmp"}};
    CHECK_THROWS_WITH(read_launch_env("env"), Catch::Contains("not a regular file"));
  }
  std::remove(path.c_str());
}

TEST_CASE("store: admits only a client that proves the secret", "[kv_store]") {
  KvServer server(0, 0, "the-job-secret-0123456789");
  KvClient good("127.0.0.1", server.port(), 0, 2000ms, 0, "the-job-secret-0123456789");
  good.set("k", "v");
  CHECK_THROWS_WITH(KvClient("127.0.0.1", server.port(), 1, 2000ms, 0, "another-secret-0123456789"),
                    Catch::Contains("did not admit"));
  std::string v;
  CHECK(good.try_get("k", &v));
  CHECK(v == "v");
  CHECK(job_auth::proof("s", "c") != job_auth::proof("t", "c"));
  CHECK(job_auth::proof_ok("s", "c", job_auth::proof("s", "c")));
  CHECK_FALSE(job_auth::proof_ok("s", "c", "00"));
}
