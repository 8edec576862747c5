// Pinned and device tensors: compiled only in a build with CUDA (engine/CMakeLists.txt);
// cuda_absent.cpp refuses them in a build without.
#include <cstring>
#include <memory>
#include <string>

#include "cuda_device.hpp"
#include "error.hpp"
#include "size.hpp"
#include "tensor_storage.hpp"

namespace cs {

Tensor Tensor::pinned(DType dtype, size_t count) {
  const size_t bytes = tensor_bytes(dtype, count);
  require_host_memory(bytes, "pinned tensor");
  require_cuda_devices("pinned tensor");
  auto st = std::make_shared<Storage>();
  const cudaError_t e = cudaHostAlloc(&st->ptr, bytes ? bytes : 1, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    st->ptr = nullptr;
    cudaGetLastError();
    throw InputError("cannot allocate a " + format_size(bytes) +
                     "B pinned tensor: cudaHostAlloc: " + cuda_error_text(e));
  }
  st->location = MemLocation::pinned;
  std::memset(st->ptr, 0, bytes ? bytes : 1);
  st->bytes = bytes;
  return adopt(std::move(st), dtype, count);
}

Tensor Tensor::on_device(DType dtype, size_t count, int device) {
  const size_t bytes = tensor_bytes(dtype, count);
  const int n = require_cuda_devices("device tensor");
  if (device < 0 || device >= n)
    throw InputError("device tensor: CUDA device " + std::to_string(device) + " does not exist (this process sees " +
                     std::to_string(n) + ")");
  DeviceGuard g(device);
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  if (bytes > free_b)
    throw InputError("cannot allocate a " + format_size(bytes) + "B tensor on GPU " + std::to_string(device) +
                     ": it has only " + format_size(free_b / 1048576 * 1048576) + "B free");
  auto st = std::make_shared<Storage>();
  const cudaError_t e = cudaMalloc(&st->ptr, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    st->ptr = nullptr;
    cudaGetLastError();
    throw InputError("cannot allocate a " + format_size(bytes) + "B tensor on GPU " + std::to_string(device) +
                     ": cudaMalloc: " + cuda_error_text(e));
  }
  st->location = MemLocation::device;
  st->device = device;
  st->bytes = bytes;
  cuda_check(cudaMemset(st->ptr, 0, bytes ? bytes : 1), "cudaMemset");
  settle_legacy_stream();
  return adopt(std::move(st), dtype, count);
}

}  // namespace cs
