// What a build without CUDA answers where a build with CUDA asks the runtime: compiled only in a
// build without CUDA (engine/CMakeLists.txt picks this file or cuda_device.cpp and
// tensor_cuda.cpp). There is no device and no memory the runtime owns, so the device tensors are
// refused and the memory functions are those of host memory. The layers above have their own
// (host/cuda_absent.cpp, measure/cuda_absent.cpp).
#include <cstring>

#include "cuda_support.hpp"
#include "error.hpp"
#include "tensor_storage.hpp"

namespace cs {

CudaProbe cuda_probe() { return {0, "built without CUDA"}; }

Tensor Tensor::pinned(DType, size_t) {
  throw InputError("pinned host tensors need a commscript built with CUDA (this one was built without)");
}

Tensor Tensor::on_device(DType, size_t, int) {
  throw InputError("device tensors need a commscript built with CUDA (this one was built without)");
}

bool is_device_memory(const void*) { return false; }

void copy_memory(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }

bool zero_device_memory(void*, size_t) { return false; }

// Never reached: no pinned or device storage exists without CUDA.
void free_pinned_memory(void*) {}
void free_device_memory(void*) {}

}  // namespace cs
