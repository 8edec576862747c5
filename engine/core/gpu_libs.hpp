#pragma once
// The CUDA runtime and NCCL are opened at run time (dlopen), never linked: the same binary runs
// --backend mpi on a machine without them, and says what is missing for --backend nccl.
//
// Where they are looked for, first found wins: COMMSCRIPT_CUDART / COMMSCRIPT_NCCL (a path),
// then, in a build configured with COMMSCRIPT_FAKE_GPU=ON, the test stand-in's directory, then
// the loader's path with the sonames the headers were built for (libcudart.so.<major>,
// libnccl.so.2). Every cuda*/nccl* function the engine calls is defined in gpu_libs.cpp as a
// forwarder to the loaded library; without it, the forwarder fails with an error saying so.
#include <string>

namespace cs {

struct GpuLib {
  bool loaded = false;
  bool fake = false;  // the library is commscript's host-side test stand-in (tests/fake_gpu)
  std::string path;   // what was opened
  std::string why;    // when not loaded: what is missing, and how to provide it
  int version = 0;    // cudaRuntimeGetVersion / ncclGetVersion
};
const GpuLib& cudart_lib();
const GpuLib& nccl_lib();

// Whether the loaded NCCL has `symbol` (the fault-tolerance calls are newer than the oldest NCCL
// the engine runs on: ncclCommShrink 2.27, ncclCommRevoke 2.28).
bool nccl_has(const char* symbol);

// The oldest NCCL whose symbols the engine uses (ncclCommSplit: 2.18).
constexpr int kMinNcclVersion = 21800;

}  // namespace cs
