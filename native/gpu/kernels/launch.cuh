// Launching a harness-form kernel (harness.h) on the GPU: every phase in order, with
// __syncthreads() between phases, shared memory sized by the kernel. CUDA build only.
#pragma once
#include <climits>

#include "../../cuda/check.cuh"
#include "harness.h"

namespace murphy {
namespace gpu {

template <class K>
__global__ void __launch_bounds__(kMaxBlock) phased_kernel(K k) {
  extern __shared__ float sh[];
  const Thread t{int64_t(blockIdx.x), int(threadIdx.x), int(blockDim.x), int64_t(gridDim.x)};
  if constexpr (HasRuntimePhases<K>::value) {
    const int n = k.phases();
    for (int p = 0; p < n; ++p) {
      k(p, t, sh);
      if (p + 1 < n) __syncthreads();
    }
  } else {
#pragma unroll
    for (int p = 0; p < K::kPhases; ++p) {
      k(p, t, sh);
      if (p + 1 < K::kPhases) __syncthreads();
    }
  }
}

template <class K>
void launch_phased(const K& k, int block, cudaStream_t stream) {
  const int64_t grid = k.grid();
  if (grid == 0) return;
  if (block <= 0 || block > kMaxBlock || block % 32 != 0)
    throw Error("launch: block size " + std::to_string(block) + " must be a multiple of 32 in 32..1024");
  if (grid > int64_t(INT_MAX)) throw Error("launch: grid of " + std::to_string(grid) + " blocks exceeds 2^31 - 1");
  phased_kernel<K><<<unsigned(grid), unsigned(block), K::shared_floats(block) * sizeof(float), stream>>>(k);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace murphy
