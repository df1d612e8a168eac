// Launching a harness-form kernel (harness.h) on the GPU: every phase in order, with
// __syncthreads() between phases, shared memory sized by the kernel. CUDA build only.
#pragma once
#include <climits>

#include "../../cuda/check.cuh"
#include "harness.h"

namespace murphy {
namespace gpu {

template <class K>
__global__ void __launch_bounds__(BlockLimit<K>::value) phased_kernel(K k) {
  extern __shared__ float sh[];
  const Thread t{int64_t(blockIdx.x), int(threadIdx.x), int(blockDim.x), int64_t(gridDim.x)};
  if constexpr (HasBlockPhases<K>::value || HasRuntimePhases<K>::value) {
    const int phases = kernel_phases(k, t.block);  // the same for every thread of the block
    for (int p = 0; p < phases; ++p) {
      k(p, t, sh);
      if (p + 1 < phases) __syncthreads();
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
  constexpr int limit = BlockLimit<K>::value;
  if (block <= 0 || block > limit || block % 32 != 0)
    throw Error("launch: block size " + std::to_string(block) + " must be a multiple of 32 in 32.." + std::to_string(limit));
  if (grid > int64_t(INT_MAX)) throw Error("launch: grid of " + std::to_string(grid) + " blocks exceeds 2^31 - 1");
  const size_t shared = k.shared_floats(block) * sizeof(float);
  if (shared > 48 * 1024)  // above it a kernel would need cudaFuncAttributeMaxDynamicSharedMemorySize (no kernel does)
    throw Error("launch: " + std::to_string(shared) + " bytes of shared memory per block exceed the 48 KiB default");
  phased_kernel<K><<<unsigned(grid), unsigned(block), shared, stream>>>(k);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace murphy
