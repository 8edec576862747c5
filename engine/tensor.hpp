#pragma once
// A typed buffer. Views (slices) share the storage of the tensor they came from.
#include <cstddef>
#include <memory>

#include "dtype.hpp"

namespace cs {

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled host buffer. Refuses (InputError) sizes larger than the memory this host has
  // available, before allocating anything.
  static Tensor host(DType dtype, size_t count);

  DType dtype() const { return dtype_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * dtype_size(dtype_); }
  size_t elem_size() const { return dtype_size(dtype_); }
  bool valid() const { return storage_ != nullptr; }
  void* data() const;
  // Elements [first, first + count) of this tensor; throws InputError when out of range.
  Tensor slice(size_t first, size_t count) const;

  double get(size_t i) const;        // element i as a double (range checked)
  void set(size_t i, double value);  // converts to the dtype (range checked)
  void fill(double value);

 private:
  struct Storage;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // in elements
  size_t count_ = 0;
  DType dtype_ = DType::float32;
};

// Bytes of memory this host can still give (MemAvailable), or 0 when unknown.
size_t host_memory_available();

}  // namespace cs
