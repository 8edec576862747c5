// What this layer answers in a build without CUDA (compiled only then; engine/CMakeLists.txt
// picks this file or copy_bw_cuda.cpp): there is no device, so require_cuda_devices refuses with
// cuda_probe's "built without CUDA".
#include "copy_bw.hpp"
#include "cuda_support.hpp"

namespace cs {

nlohmann::json gpu_copy_bandwidth(const CopyBwSpec&) {
  require_cuda_devices("gpu_copy_bw");
  return nullptr;  // not reached
}

}  // namespace cs
