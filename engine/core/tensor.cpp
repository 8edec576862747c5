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
#include "tensor_storage.hpp"

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

Tensor::Storage::~Storage() {
  switch (location) {
    case MemLocation::host:
      std::free(ptr);
      break;
    case MemLocation::pinned:
      free_pinned_memory(ptr);
      break;
    case MemLocation::device:
      free_device_memory(ptr);
      break;
  }
}

// MemAvailable, or the cgroup's limit less its usage when lower (memory_share.hpp): a job under
// Slurm or Kubernetes is killed at its cgroup's limit, which /proc/meminfo does not show.
size_t host_memory_available() { return memory_share().available; }

size_t tensor_bytes(DType dtype, size_t count) {
  const size_t es = dtype_size(dtype);
  if (count > SIZE_MAX / es) throw InputError("tensor of " + std::to_string(count) + " elements overflows");
  return count * es;
}

void require_host_memory(size_t bytes, const char* what) {
  const size_t avail = host_memory_available();
  if (avail && bytes > avail)
    throw InputError("cannot allocate a " + format_size(bytes) + "B " + what + ": this host has only " +
                     format_size(avail / 1048576 * 1048576) + "B available");
}

Tensor Tensor::adopt(std::shared_ptr<Storage> st, DType dtype, size_t count) {
  Tensor t;
  t.storage_ = std::move(st);
  t.count_ = count;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::host(DType dtype, size_t count) {
  const size_t bytes = tensor_bytes(dtype, count);
  require_host_memory(bytes, "tensor");
  auto st = std::make_shared<Storage>();
  const size_t alloc = ((bytes ? bytes : 1) + 63) / 64 * 64;
  st->ptr = std::aligned_alloc(64, alloc);
  if (!st->ptr) throw InputError("cannot allocate a " + format_size(bytes) + "B tensor: out of memory");
  std::memset(st->ptr, 0, alloc);
  st->bytes = bytes;
  return adopt(std::move(st), dtype, count);
}

// Tensor::pinned and Tensor::on_device: tensor_cuda.cpp in a build with CUDA, cuda_absent.cpp
// (the refusals) without.

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

static void check_index(size_t i, size_t n) {
  if (i >= n)
    throw UsageError("index " + std::to_string(i) + " is outside a tensor of " + std::to_string(n) + " elements");
}

double Tensor::get(size_t i) const {
  check_index(i, count_);
  if (storage_->location == MemLocation::device) [[unlikely]] {
    alignas(8) unsigned char b[8];
    copy_memory(b, static_cast<const char*>(data()) + i * elem_size(), elem_size());
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
    copy_memory(static_cast<char*>(data()) + i * elem_size(), b, elem_size());
    return;
  }
  visit_dtype(dtype_, [&]<class T>() { static_cast<T*>(data())[i] = static_cast<T>(value); });
}

void Tensor::fill(double value) {
  check_value(dtype_, value);
  if (storage_ && storage_->location == MemLocation::device) [[unlikely]] {
    if (value == 0 && zero_device_memory(data(), bytes())) return;  // every dtype's zero is all bits zero
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
    copy_memory(data(), src.data(), bytes());
}

Tensor Tensor::to_host() const {
  if (host_accessible()) return *this;
  Tensor h = host(dtype_, count_);
  h.copy_from(*this);
  return h;
}

}  // namespace cs
