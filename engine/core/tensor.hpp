#pragma once
// A typed buffer. Views (slices) share the storage of the tensor they came from.
//
// Where the storage lives: ordinary host memory (the default, what the MPI and self backends
// use), page-locked host memory (cudaHostAlloc: what host<->device copies need to run at link
// speed) or the memory of one CUDA device (what the NCCL backend needs). Pinned and device
// tensors exist only in a build with CUDA (tensor_cuda.cpp); elsewhere asking for one is an
// InputError (cuda_absent.cpp). get/set/fill work everywhere: on a device tensor they copy through the host, so
// they are for setting up and checking, never for timed regions.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "dtype.hpp"

namespace cs {

enum class MemLocation : uint8_t { host, pinned, device };
std::string_view mem_location_name(MemLocation l);

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled host buffer. Refuses (InputError) sizes larger than the memory this host has
  // available, before allocating anything.
  static Tensor host(DType dtype, size_t count);
  // A zero-filled page-locked host buffer (cudaHostAlloc). InputError without CUDA, or when the
  // host cannot give that much.
  static Tensor pinned(DType dtype, size_t count);
  // A zero-filled buffer in the memory of CUDA device `device` (cudaMalloc). InputError without
  // CUDA, without that device, or when the device has less free memory than asked for.
  static Tensor on_device(DType dtype, size_t count, int device);
  static Tensor allocate(MemLocation where, DType dtype, size_t count, int device = 0);

  DType dtype() const { return dtype_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * dtype_size(dtype_); }
  size_t elem_size() const { return dtype_size(dtype_); }
  bool valid() const { return storage_ != nullptr; }
  void* data() const;
  MemLocation location() const;
  bool host_accessible() const { return location() != MemLocation::device; }
  int device() const;  // the CUDA device of a device tensor, -1 otherwise
  // Elements [first, first + count) of this tensor; throws InputError when out of range.
  Tensor slice(size_t first, size_t count) const;

  double get(size_t i) const;        // element i as a double (range checked)
  void set(size_t i, double value);  // converts to the dtype (range checked)
  void fill(double value);

  // Copies every element of `src` (same dtype and count) into this tensor, from and to any
  // location (cudaMemcpy between locations; memcpy between host buffers). Not for timed regions.
  void copy_from(const Tensor& src);
  // The elements as a host-accessible tensor: this tensor itself (a shared view) when it is
  // already host-accessible, otherwise a new host copy.
  Tensor to_host() const;

 private:
  struct Storage;
  // A tensor of `count` elements over storage just allocated (host, pinned or device).
  static Tensor adopt(std::shared_ptr<Storage> st, DType dtype, size_t count);
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // in elements
  size_t count_ = 0;
  DType dtype_ = DType::float32;
};

// Bytes of memory this host can still give (MemAvailable), or 0 when unknown.
size_t host_memory_available();

// The 16-bit floating-point conversions (float_to_half, ...) are in dtype.hpp.

}  // namespace cs
