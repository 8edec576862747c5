#include "tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <string>

#include "cuda_support.hpp"
#include "error.hpp"
#include "memory_share.hpp"
#include "size.hpp"

namespace cs {

std::string_view mem_location_name(MemLocation l) {
  switch (l) {
    case MemLocation::host:
      return "host";
    case MemLocation::pinned:
      return "pinned";
    case MemLocation::device:
      return "device";
  }
  return "?";
}

struct Tensor::Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  MemLocation location = MemLocation::host;
  int device = -1;
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    switch (location) {
      case MemLocation::host:
        std::free(ptr);
        break;
#ifdef COMMSCRIPT_HAVE_NCCL
      case MemLocation::pinned:
        cudaFreeHost(ptr);
        break;
      case MemLocation::device:
        cudaFree(ptr);
        break;
#else
      default:
        break;
#endif
    }
  }
};

#ifdef COMMSCRIPT_HAVE_NCCL
// cudaMemcpy from pageable memory to a device, device-to-device copies and cudaMemset on device
// memory may return before the data lands, and they run on the legacy default stream, which
// the NCCL backend's non-blocking stream does not wait for: a write to a device tensor is
// complete only after this (else a fill or a poisoning may land after NCCL read the buffer).
static void settle() { cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize"); }
#endif

// MemAvailable, or the cgroup's limit less its usage when lower (memory_share.hpp): a job under
// Slurm or Kubernetes is killed at its cgroup's limit, which /proc/meminfo does not show.
size_t host_memory_available() { return memory_share().available; }

static size_t checked_bytes(DType dtype, size_t count) {
  const size_t es = dtype_size(dtype);
  if (count > SIZE_MAX / es) throw InputError("tensor of " + std::to_string(count) + " elements overflows");
  return count * es;
}

Tensor Tensor::host(DType dtype, size_t count) {
  const size_t bytes = checked_bytes(dtype, count);
  const size_t avail = host_memory_available();
  if (avail && bytes > avail)
    throw InputError("cannot allocate a " + format_size(bytes) + "B tensor: this host has only " +
                     format_size(avail / 1048576 * 1048576) + "B available");
  auto st = std::make_shared<Storage>();
  const size_t alloc = ((bytes ? bytes : 1) + 63) / 64 * 64;
  st->ptr = std::aligned_alloc(64, alloc);
  if (!st->ptr) throw InputError("cannot allocate a " + format_size(bytes) + "B tensor: out of memory");
  std::memset(st->ptr, 0, alloc);
  st->bytes = bytes;
  Tensor t;
  t.storage_ = std::move(st);
  t.count_ = count;
  t.dtype_ = dtype;
  return t;
}

#ifndef COMMSCRIPT_HAVE_NCCL

Tensor Tensor::pinned(DType, size_t) {
  throw InputError("pinned host tensors need a commscript built with CUDA (this one was built without)");
}

Tensor Tensor::on_device(DType, size_t, int) {
  throw InputError("device tensors need a commscript built with CUDA (this one was built without)");
}

#else

Tensor Tensor::pinned(DType dtype, size_t count) {
  const size_t bytes = checked_bytes(dtype, count);
  const size_t avail = host_memory_available();
  if (avail && bytes > avail)
    throw InputError("cannot allocate a " + format_size(bytes) + "B pinned tensor: this host has only " +
                     format_size(avail / 1048576 * 1048576) + "B available");
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
  Tensor t;
  t.storage_ = std::move(st);
  t.count_ = count;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::on_device(DType dtype, size_t count, int device) {
  const size_t bytes = checked_bytes(dtype, count);
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
  settle();
  Tensor t;
  t.storage_ = std::move(st);
  t.count_ = count;
  t.dtype_ = dtype;
  return t;
}

#endif

Tensor Tensor::allocate(MemLocation where, DType dtype, size_t count, int device) {
  switch (where) {
    case MemLocation::pinned:
      return pinned(dtype, count);
    case MemLocation::device:
      return on_device(dtype, count, device);
    default:
      return host(dtype, count);
  }
}

void* Tensor::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->ptr) + offset_ * dtype_size(dtype_);
}

MemLocation Tensor::location() const { return storage_ ? storage_->location : MemLocation::host; }

int Tensor::device() const { return storage_ ? storage_->device : -1; }

Tensor Tensor::slice(size_t first, size_t count) const {
  if (first > count_ || count > count_ - first)
    throw UsageError("slice [" + std::to_string(first) + ", " + std::to_string(first + count) +
                     ") is outside a tensor of " + std::to_string(count_) + " elements");
  Tensor t = *this;
  t.offset_ = offset_ + first;
  t.count_ = count;
  return t;
}

// Bytes between the host and wherever `dev` points (a device tensor's storage).
static void copy_bytes(void* dst, const void* src, size_t n) {
#ifdef COMMSCRIPT_HAVE_NCCL
  cuda_check(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy");
  settle();
#else
  std::memcpy(dst, src, n);
#endif
}

static void check_index(size_t i, size_t n) {
  if (i >= n)
    throw UsageError("index " + std::to_string(i) + " is outside a tensor of " + std::to_string(n) + " elements");
}

double Tensor::get(size_t i) const {
  check_index(i, count_);
  if (storage_->location == MemLocation::device) [[unlikely]] {
    alignas(8) unsigned char b[8];
    copy_bytes(b, static_cast<const char*>(data()) + i * elem_size(), elem_size());
    return visit_dtype(dtype_, [&]<class T>() {
      T v;
      std::memcpy(&v, b, sizeof v);
      return static_cast<double>(v);
    });
  }
  return visit_dtype(dtype_, [&]<class T>() { return static_cast<double>(static_cast<T*>(data())[i]); });
}

// A value the dtype cannot hold is refused: converting it would be undefined behaviour.
static void check_value(DType t, double v) {
  visit_dtype(t, [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      // max + 1 is exact in double for every integer width (2^63 and 2^64 included), so the
      // upper bound is exclusive and never rounds a too-large value in.
      if (!(v >= static_cast<double>(std::numeric_limits<T>::min()) &&
            v < static_cast<double>(std::numeric_limits<T>::max()) + 1.0) ||
          v != std::floor(v))
        throw UsageError("value " + std::to_string(v) + " does not fit in " + std::string(dtype_name(t)));
    }
  });
}

void Tensor::set(size_t i, double value) {
  check_index(i, count_);
  check_value(dtype_, value);
  if (storage_->location == MemLocation::device) [[unlikely]] {
    alignas(8) unsigned char b[8];
    visit_dtype(dtype_, [&]<class T>() {
      const T v = static_cast<T>(value);
      std::memcpy(b, &v, sizeof v);
    });
    copy_bytes(static_cast<char*>(data()) + i * elem_size(), b, elem_size());
    return;
  }
  visit_dtype(dtype_, [&]<class T>() { static_cast<T*>(data())[i] = static_cast<T>(value); });
}

void Tensor::fill(double value) {
  check_value(dtype_, value);
  if (storage_ && storage_->location == MemLocation::device) [[unlikely]] {
#ifdef COMMSCRIPT_HAVE_NCCL
    if (value == 0) {  // every dtype's zero is all bits zero
      cuda_check(cudaMemset(data(), 0, bytes()), "cudaMemset");
      settle();
      return;
    }
#endif
    // Through a host buffer of at most 8 MiB, copied as many times as it takes.
    const size_t chunk = std::min(count_, std::max<size_t>(1, (size_t{8} << 20) / elem_size()));
    Tensor h = host(dtype_, chunk);
    h.fill(value);
    for (size_t done = 0; done < count_; done += chunk)
      slice(done, std::min(chunk, count_ - done)).copy_from(h.slice(0, std::min(chunk, count_ - done)));
    return;
  }
  visit_dtype(dtype_, [&]<class T>() {
    T* p = static_cast<T*>(data());
    const T v = static_cast<T>(value);
    for (size_t i = 0; i < count_; ++i) p[i] = v;
  });
}

void Tensor::copy_from(const Tensor& src) {
  if (src.dtype_ != dtype_ || src.count_ != count_)
    throw UsageError("copy: source is " + std::to_string(src.count_) + " " + std::string(dtype_name(src.dtype_)) +
                     " elements, destination " + std::to_string(count_) + " " + std::string(dtype_name(dtype_)));
  if (bytes() == 0) return;
  if (host_accessible() && src.host_accessible())
    std::memmove(data(), src.data(), bytes());
  else
    copy_bytes(data(), src.data(), bytes());
}

Tensor Tensor::to_host() const {
  if (host_accessible()) return *this;
  Tensor h = host(dtype_, count_);
  h.copy_from(*this);
  return h;
}

}  // namespace cs
