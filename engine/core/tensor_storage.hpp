#pragma once
// Inside core only: a tensor's storage, shared by tensor.cpp (both builds) and the file that
// allocates pinned and device tensors, which CMake picks per build: tensor_cuda.cpp with CUDA,
// cuda_absent.cpp (the refusals) without.
#include <cstddef>

#include "tensor.hpp"

namespace cs {

struct Tensor::Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  MemLocation location = MemLocation::host;
  int device = -1;
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

// count x the dtype's size; InputError when that overflows.
size_t tensor_bytes(DType dtype, size_t count);

// InputError "cannot allocate a <size>B <what>: this host has only <free>B available" when the
// host (or its cgroup) cannot give `bytes`; what: "tensor", "pinned tensor".
void require_host_memory(size_t bytes, const char* what);

}  // namespace cs
