#pragma once
// The CUDA side shared by the device code of the engine (tensors, the NCCL backend, GPU
// topology): probing for devices, error checks, the current-device guard.
//
// Everything here compiles without CUDA and declares no CUDA type: then there is no device,
// cuda_probe() says why, and the memory functions below are those of host memory. What needs
// CUDA's types (error checks, the device guard) is in cuda_device.hpp, for the files only a CUDA
// build compiles. engine/CMakeLists.txt picks the definitions: cuda_device.cpp with CUDA,
// cuda_absent.cpp without; no source outside the backends tests the build.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace cs {

// What cudaGetDeviceCount says on this process. count is 0 when there is no usable device, and
// `error` then tells why ("cudaErrorNoDevice: no CUDA-capable device is detected", or "built
// without CUDA"); it is empty when the call succeeded.
struct CudaProbe {
  int count = 0;
  std::string error;
};
CudaProbe cuda_probe();

// "<what>: no usable CUDA device on host <host> (cudaGetDeviceCount: <error or '0 devices'>)".
std::string no_device_message(std::string_view what, const std::string& host, const CudaProbe& p);

// Throws InputError with no_device_message() when this process sees no device; returns the
// number of devices otherwise.
int require_cuda_devices(std::string_view what);

// A CUDA version number (cudaRuntimeGetVersion, cudaDriverGetVersion, NVML's) as text: 13000 -> "13.0".
std::string cuda_version_text(int v);

// NCCL_VERSION_CODE -> "2.28.9" (codes below 2.9 are major*1000 + minor*100 + patch); "unknown"
// for 0. The one formula for NCCL version text (the loader's refusal, --version, the backend).
std::string nccl_version_string(int code);
// "2.28.9" -> 22809 (and "2.8.4" -> 2804); nullopt when it is not major.minor.patch.
std::optional<int> nccl_version_code(std::string_view text);

// PCI addresses as sysfs writes them: "00000000:3B:00.0" (NVML) or "0000:3B:00.0" (CUDA) ->
// "0000:3b:00.0". Anything that is not domain:bus:dev.fn is returned lower-cased.
std::string normalize_bdf(std::string_view bdf);

// The rank's place on its host as the launcher tells it, read before MPI_Init (so CUDA-aware MPI
// and NCCL find the right device current): Open MPI (OMPI_COMM_WORLD_LOCAL_RANK/_SIZE),
// MPICH/Hydra (MPI_LOCALRANKID/MPI_LOCALNRANKS), Slurm (SLURM_LOCALID; the size from
// SLURM_NTASKS_PER_NODE when set), torchrun (LOCAL_RANK/LOCAL_WORLD_SIZE), first found wins.
// rank is -1 when no launcher says; size is -1 when it says only the rank. `source` names the
// variable read. `env` looks a variable up (nullptr: unset).
struct LauncherLocal {
  int rank = -1, size = -1;
  std::string source;
};
LauncherLocal launcher_local(const char* (*env)(const char*));

// The device a rank uses, chosen from the launcher's local rank before MPI_Init: COMMSCRIPT_DEVICE
// (`device_env`, nullptr when unset) when given, else local.rank % count. Throws InputError, naming
// the host, the local ranks and the GPU count, when the launcher put more ranks on this host than
// it has GPUs (NCCL refuses two ranks of one communicator on one GPU: "Duplicate GPU detected").
// Returns -1 when no launcher variable says the local rank (the NCCL backend then splits the
// ranks by host name, after MPI_Init).
int early_device(const LauncherLocal& local, int count, const char* device_env, const std::string& host);

// What early_device chose for this process (-1: nothing chosen before MPI_Init).
void set_preselected_device(int device);
int preselected_device();

// Memory the CUDA runtime owns (pinned host and device memory). Without CUDA there is none:
// nothing is device memory, copy_memory is memcpy and zero_device_memory returns false.
bool is_device_memory(const void* p);  // cudaPointerGetAttributes says device memory
// cudaMemcpy(cudaMemcpyDefault), then the legacy stream synchronized (cuda_device.hpp,
// settle_legacy_stream): the bytes have landed when it returns. Not for timed regions.
void copy_memory(void* dst, const void* src, size_t n);
bool zero_device_memory(void* p, size_t n);  // cudaMemset to 0, settled; false without CUDA
void free_pinned_memory(void* p);            // cudaFreeHost
void free_device_memory(void* p);            // cudaFree

}  // namespace cs
