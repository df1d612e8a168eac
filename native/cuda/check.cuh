// Shared by the CUDA kernel files: error checking, launch helpers, a small pool of
// scratch device buffers, and warp/block reductions.
//
// Every CUDA runtime call is wrapped in CUDA_CHECK, every kernel launch is followed by
// CUDA_CHECK_LAUNCH(). A failure throws murphy::Error with the CUDA error's name and
// text, the failing expression and where it is.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "murphy/common.h"

namespace murphy {
namespace cudadetail {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  std::string msg = "CUDA error ";
  msg += cudaGetErrorName(e);
  msg += " (";
  msg += cudaGetErrorString(e);
  msg += ") in ";
  msg += expr;
  msg += " at ";
  msg += file;
  msg += ":";
  msg += std::to_string(line);
  throw Error(msg, ErrorCode::Cuda);
}

}  // namespace cudadetail
}  // namespace murphy

#define CUDA_CHECK(expr)                                                          \
  do {                                                                            \
    cudaError_t murphy_cuda_err_ = (expr);                                        \
    if (murphy_cuda_err_ != cudaSuccess)                                          \
      ::murphy::cudadetail::throw_cuda(murphy_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: reports launch-configuration errors at once.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

namespace murphy {
namespace cudadetail {

// A device scratch buffer borrowed from a process-wide pool (kept between calls so
// that small per-call buffers cost no cudaMalloc/cudaFree). Returned on destruction.
// Implemented in device.cu.
class Scratch {
 public:
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr_) + byte_offset);
  }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  int device_ = 0;
};

// Number of multiprocessors of the current device (cached per device).
int sm_count();

// Synchronise the device and turn any asynchronous kernel fault into an Error.
inline void sync_check(const char* what) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::string msg = std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                      ") while running " + what;
    throw Error(msg, ErrorCode::Cuda);
  }
}

inline bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace cudadetail
}  // namespace murphy

#if defined(__CUDACC__)
namespace murphy {
namespace cudadetail {

template <typename T>
__device__ __forceinline__ T warp_sum(T x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Sum over the block; the result is valid in every thread. `sh` holds >= 32 T.
// Fixed reduction order, so the result is deterministic.
template <typename T, int BLOCK>
__device__ __forceinline__ T block_sum(T x, T* sh) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "block size");
  constexpr int W = BLOCK / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  x = warp_sum(x);
  __syncthreads();  // sh may be in use by a previous reduction
  if (lane == 0) sh[warp] = x;
  __syncthreads();
  T r = lane < W ? sh[lane] : T(0);
  return warp_sum(r);
}

}  // namespace cudadetail
}  // namespace murphy
#endif
