#include "gpu_libs.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>

#include "cuda_support.hpp"

namespace cs {

void* cuda_sym(const char* name);
void* nccl_sym(const char* name);

namespace {

struct Loaded {
  GpuLib info;
  void* handle = nullptr;
};

Loaded open_lib(const char* env, const std::string& soname, const char* what, const std::string& hint) {
  Loaded l;
  std::string tried;
  auto attempt = [&](const std::string& p) {
    if (l.handle) return;
    dlerror();
    l.handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (l.handle) {
      l.info.path = p;
    } else {
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(e ? e : p.c_str());
    }
  };
  if (const char* p = std::getenv(env); p && *p) {
    attempt(p);
  } else {
#ifdef COMMSCRIPT_FAKE_GPU_DIR
    attempt(std::string(COMMSCRIPT_FAKE_GPU_DIR) + "/" + soname);
#endif
    attempt(soname);
  }
  if (!l.handle) {
    l.info.why = std::string("cannot load ") + what + " (" + tried + "); " + hint;
    return l;
  }
  l.info.loaded = true;
  l.info.fake = dlsym(l.handle, "commscript_fake_gpu") != nullptr;
  return l;
}

const Loaded& cudart() {
  static const Loaded l = [] {
    Loaded x =
        open_lib("COMMSCRIPT_CUDART", "libcudart.so." + std::to_string(CUDART_VERSION / 1000), "the CUDA runtime",
                 "--backend nccl needs the CUDA " + std::to_string(CUDART_VERSION / 1000) +
                     " runtime: install it, or point LD_LIBRARY_PATH or COMMSCRIPT_CUDART at it");
    if (x.handle) {
      using F = cudaError_t (*)(int*);
      if (auto f = reinterpret_cast<F>(dlsym(x.handle, "cudaRuntimeGetVersion"))) f(&x.info.version);
    }
    return x;
  }();
  return l;
}

const Loaded& nccl() {
  static const Loaded l = [] {
    Loaded x = open_lib("COMMSCRIPT_NCCL", "libnccl.so.2", "NCCL",
                        "--backend nccl needs NCCL >= 2.18 (libnccl.so.2): install it, or point LD_LIBRARY_PATH "
                        "or COMMSCRIPT_NCCL at it");
    if (!x.handle) return x;
    using F = ncclResult_t (*)(int*);
    if (auto f = reinterpret_cast<F>(dlsym(x.handle, "ncclGetVersion"))) f(&x.info.version);
    // Every symbol the engine uses must be there: a library older than the newest of them fails
    // here with a message, not in the middle of a run.
    std::string missing;
    for (const char* s :
         {"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRankConfig", "ncclCommSplit", "ncclCommGetAsyncError",
          "ncclCommAbort", "ncclCommDestroy", "ncclCommFinalize", "ncclGetLastError", "ncclGetErrorString",
          "ncclAllReduce", "ncclReduce", "ncclBroadcast", "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv",
          "ncclGroupStart", "ncclGroupEnd"})
      if (!dlsym(x.handle, s)) missing += (missing.empty() ? "" : ", ") + std::string(s);
    if (!missing.empty() || x.info.version < kMinNcclVersion) {
      const int v = x.info.version;
      x.info.why = "the NCCL at " + x.info.path + " is version " + nccl_version_string(v) +
                   (missing.empty() ? std::string() : " and lacks " + missing) +
                   "; --backend nccl needs NCCL >= 2.18 (point LD_LIBRARY_PATH or COMMSCRIPT_NCCL at a newer one)";
      x.info.loaded = false;
    }
    return x;
  }();
  return l;
}

}  // namespace

void* cuda_sym(const char* name) {
  const Loaded& l = cudart();
  return l.handle ? dlsym(l.handle, name) : nullptr;
}
void* nccl_sym(const char* name) {
  const Loaded& l = nccl();
  return l.handle && l.info.loaded ? dlsym(l.handle, name) : nullptr;
}

bool nccl_has(const char* symbol) { return nccl_sym(symbol) != nullptr; }

const GpuLib& cudart_lib() { return cudart().info; }
const GpuLib& nccl_lib() { return nccl().info; }

}  // namespace cs

// ---- the forwarders ----
// Each resolves its symbol once; without the library it fails the way the API fails.

#define CS_CUDA(name, params, args)                                     \
  extern "C" cudaError_t name params {                                  \
    using Fn = cudaError_t(*) params;                                   \
    static const auto fwd_ = reinterpret_cast<Fn>(cs::cuda_sym(#name)); \
    return fwd_ ? fwd_ args : cudaErrorSharedObjectInitFailed;          \
  }
#define CS_NCCL(name, params, args)                                     \
  extern "C" ncclResult_t name params {                                 \
    using Fn = ncclResult_t(*) params;                                  \
    static const auto fwd_ = reinterpret_cast<Fn>(cs::nccl_sym(#name)); \
    return fwd_ ? fwd_ args : ncclSystemError;                          \
  }

CS_CUDA(cudaDeviceCanAccessPeer, (int* p1, int p2, int p3), (p1, p2, p3))
CS_CUDA(cudaDeviceEnablePeerAccess, (int p1, unsigned int p2), (p1, p2))
CS_CUDA(cudaDeviceGetPCIBusId, (char* p1, int p2, int p3), (p1, p2, p3))
CS_CUDA(cudaDeviceSynchronize, (void), ())
CS_CUDA(cudaDriverGetVersion, (int* p1), (p1))
CS_CUDA(cudaEventCreate, (cudaEvent_t * p1), (p1))
CS_CUDA(cudaEventDestroy, (cudaEvent_t p1), (p1))
CS_CUDA(cudaEventElapsedTime, (float* p1, cudaEvent_t p2, cudaEvent_t p3), (p1, p2, p3))
CS_CUDA(cudaEventQuery, (cudaEvent_t p1), (p1))
CS_CUDA(cudaEventRecord, (cudaEvent_t p1, cudaStream_t p2), (p1, p2))
CS_CUDA(cudaEventSynchronize, (cudaEvent_t p1), (p1))
CS_CUDA(cudaFree, (void* p1), (p1))
CS_CUDA(cudaFreeHost, (void* p1), (p1))
CS_CUDA(cudaGetDevice, (int* p1), (p1))
CS_CUDA(cudaGetDeviceCount, (int* p1), (p1))
CS_CUDA(cudaGetDeviceProperties, (cudaDeviceProp * p1, int p2), (p1, p2))
CS_CUDA(cudaGetLastError, (void), ())
CS_CUDA(cudaHostAlloc, (void** p1, size_t p2, unsigned int p3), (p1, p2, p3))
CS_CUDA(cudaMalloc, (void** p1, size_t p2), (p1, p2))
CS_CUDA(cudaMemGetInfo, (size_t * p1, size_t* p2), (p1, p2))
CS_CUDA(cudaMemcpy, (void* p1, const void* p2, size_t p3, cudaMemcpyKind p4), (p1, p2, p3, p4))
CS_CUDA(cudaMemcpyAsync, (void* p1, const void* p2, size_t p3, cudaMemcpyKind p4, cudaStream_t p5),
        (p1, p2, p3, p4, p5))
CS_CUDA(cudaMemset, (void* p1, int p2, size_t p3), (p1, p2, p3))
CS_CUDA(cudaMemsetAsync, (void* p1, int p2, size_t p3, cudaStream_t p4), (p1, p2, p3, p4))
CS_CUDA(cudaPointerGetAttributes, (cudaPointerAttributes * p1, const void* p2), (p1, p2))
CS_CUDA(cudaRuntimeGetVersion, (int* p1), (p1))
CS_CUDA(cudaSetDevice, (int p1), (p1))
CS_CUDA(cudaStreamCreateWithFlags, (cudaStream_t * p1, unsigned int p2), (p1, p2))
CS_CUDA(cudaStreamDestroy, (cudaStream_t p1), (p1))
CS_CUDA(cudaStreamQuery, (cudaStream_t p1), (p1))
CS_CUDA(cudaStreamSynchronize, (cudaStream_t p1), (p1))

CS_NCCL(ncclAllGather, (const void* p1, void* p2, size_t p3, ncclDataType_t p4, ncclComm_t p5, cudaStream_t p6),
        (p1, p2, p3, p4, p5, p6))
CS_NCCL(ncclAllReduce,
        (const void* p1, void* p2, size_t p3, ncclDataType_t p4, ncclRedOp_t p5, ncclComm_t p6, cudaStream_t p7),
        (p1, p2, p3, p4, p5, p6, p7))
CS_NCCL(ncclBroadcast, (const void* p1, void* p2, size_t p3, ncclDataType_t p4, int p5, ncclComm_t p6, cudaStream_t p7),
        (p1, p2, p3, p4, p5, p6, p7))
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)  // optional: nccl_has("ncclAlltoAll") before a call
CS_NCCL(ncclAlltoAll, (const void* p1, void* p2, size_t p3, ncclDataType_t p4, ncclComm_t p5, cudaStream_t p6),
        (p1, p2, p3, p4, p5, p6))
#endif
CS_NCCL(ncclCommAbort, (ncclComm_t p1), (p1))
CS_NCCL(ncclCommDestroy, (ncclComm_t p1), (p1))
CS_NCCL(ncclCommFinalize, (ncclComm_t p1), (p1))
CS_NCCL(ncclCommGetAsyncError, (ncclComm_t p1, ncclResult_t* p2), (p1, p2))
CS_NCCL(ncclCommInitRankConfig, (ncclComm_t * p1, int p2, ncclUniqueId p3, int p4, ncclConfig_t* p5),
        (p1, p2, p3, p4, p5))
CS_NCCL(ncclCommRevoke, (ncclComm_t p1, int p2), (p1, p2))
CS_NCCL(ncclCommShrink, (ncclComm_t p1, int* p2, int p3, ncclComm_t* p4, ncclConfig_t* p5, int p6),
        (p1, p2, p3, p4, p5, p6))
CS_NCCL(ncclCommSplit, (ncclComm_t p1, int p2, int p3, ncclComm_t* p4, ncclConfig_t* p5), (p1, p2, p3, p4, p5))
CS_NCCL(ncclGetUniqueId, (ncclUniqueId * p1), (p1))
CS_NCCL(ncclGetVersion, (int* p1), (p1))
CS_NCCL(ncclGroupEnd, (), ())
CS_NCCL(ncclGroupStart, (), ())
CS_NCCL(ncclRecv, (void* p1, size_t p2, ncclDataType_t p3, int p4, ncclComm_t p5, cudaStream_t p6),
        (p1, p2, p3, p4, p5, p6))
CS_NCCL(ncclReduce,
        (const void* p1, void* p2, size_t p3, ncclDataType_t p4, ncclRedOp_t p5, int p6, ncclComm_t p7,
         cudaStream_t p8),
        (p1, p2, p3, p4, p5, p6, p7, p8))
CS_NCCL(ncclReduceScatter,
        (const void* p1, void* p2, size_t p3, ncclDataType_t p4, ncclRedOp_t p5, ncclComm_t p6, cudaStream_t p7),
        (p1, p2, p3, p4, p5, p6, p7))
CS_NCCL(ncclSend, (const void* p1, size_t p2, ncclDataType_t p3, int p4, ncclComm_t p5, cudaStream_t p6),
        (p1, p2, p3, p4, p5, p6))

extern "C" const char* cudaGetErrorName(cudaError_t e) {
  static const auto f = reinterpret_cast<decltype(&::cudaGetErrorName)>(cs::cuda_sym("cudaGetErrorName"));
  return f ? f(e) : "cudaErrorSharedObjectInitFailed";
}
extern "C" const char* cudaGetErrorString(cudaError_t e) {
  static const auto f = reinterpret_cast<decltype(&::cudaGetErrorString)>(cs::cuda_sym("cudaGetErrorString"));
  return f ? f(e) : "the CUDA runtime library could not be loaded";
}
extern "C" const char* ncclGetErrorString(ncclResult_t r) {
  static const auto f = reinterpret_cast<decltype(&::ncclGetErrorString)>(cs::nccl_sym("ncclGetErrorString"));
  return f ? f(r) : "NCCL could not be loaded";
}
extern "C" const char* ncclGetLastError(ncclComm_t c) {
  static const auto f = reinterpret_cast<decltype(&::ncclGetLastError)>(cs::nccl_sym("ncclGetLastError"));
  return f ? f(c) : cs::nccl_lib().why.c_str();
}
