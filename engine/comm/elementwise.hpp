#pragma once
// Element arithmetic the backends share on host buffers: where element `elems` of a buffer of
// dtype `t` starts, and the division by the rank count that turns a sum into ReduceOp::avg (MPI
// and Gloo have no average; avg is defined for floating-point dtypes only, others are untouched).
#include <cstddef>
#include <type_traits>

#include "dtype.hpp"

namespace cs {

inline char* at(const void* p, size_t elems, DType t) {
  return static_cast<char*>(const_cast<void*>(p)) + elems * dtype_size(t);
}

inline void divide(void* buf, size_t count, DType t, int n) {
  visit_dtype(t, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      T* p = static_cast<T*>(buf);
      const T d = static_cast<T>(n);
      for (size_t i = 0; i < count; ++i) p[i] /= d;
    }
  });
}

}  // namespace cs
