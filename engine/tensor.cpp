#include "tensor.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "error.hpp"
#include "size.hpp"

namespace cs {

struct Tensor::Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~Storage() { std::free(ptr); }
};

size_t host_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

Tensor Tensor::host(DType dtype, size_t count) {
  const size_t es = dtype_size(dtype);
  if (count > SIZE_MAX / es) throw InputError("tensor of " + std::to_string(count) + " elements overflows");
  const size_t bytes = count * es;
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

void* Tensor::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->ptr) + offset_ * dtype_size(dtype_);
}

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
    throw UsageError("index " + std::to_string(i) + " is outside a tensor of " + std::to_string(n) +
                     " elements");
}

double Tensor::get(size_t i) const {
  check_index(i, count_);
  return visit_dtype(dtype_, [&]<class T>() { return static_cast<double>(static_cast<T*>(data())[i]); });
}

// A value the dtype cannot hold is refused: converting it would be undefined behaviour.
static void check_value(DType t, double v) {
  visit_dtype(t, [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      // max + 1 is exact in double for every integer width (2^63 and 2^64 included), so the
      // upper bound is exclusive and never rounds a too-large value in.
      if (!(v >= static_cast<double>(std::numeric_limits<T>::min()) &&
            v < static_cast<double>(std::numeric_limits<T>::max()) + 1.0) || v != std::floor(v))
        throw UsageError("value " + std::to_string(v) + " does not fit in " + std::string(dtype_name(t)));
    }
  });
}

void Tensor::set(size_t i, double value) {
  check_index(i, count_);
  check_value(dtype_, value);
  visit_dtype(dtype_, [&]<class T>() { static_cast<T*>(data())[i] = static_cast<T>(value); });
}

void Tensor::fill(double value) {
  check_value(dtype_, value);
  visit_dtype(dtype_, [&]<class T>() {
    T* p = static_cast<T*>(data());
    const T v = static_cast<T>(value);
    for (size_t i = 0; i < count_; ++i) p[i] = v;
  });
}

}  // namespace cs
