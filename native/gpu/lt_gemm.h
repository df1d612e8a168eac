// cuBLASLt GEMMs for the GPU engine (CUDA build only): bf16 inputs, fp32 accumulation
// (CUBLAS_COMPUTE_32F), output in fp32 or bf16, the layout from gemm_plan.h, the heuristic's
// algorithm cached per shape, every call's status checked (LT_CHECK). cuBLASLt must have been
// installed first (cublaslt_load(..., install = true); lib/gpu/cublaslt.ts finds it).
// Written against the declared API of cublaslt.h; not yet run on a GPU (docs/gpu.md).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "gemm_plan.h"

namespace murphy {
namespace gpu {

enum class LtOut { F32, BF16 };

// out (+)= the product named by `which` (see gemm_plan.h) of the bf16 device matrices
// `first` and `second`, on `stream`. The weight gradient always accumulates (fp32 out).
void linear_lt(LinearProduct which, const uint16_t* first, const uint16_t* second, void* out, LtOut out_type,
               int64_t M, int64_t N, int64_t K, bool accumulate, cudaStream_t stream);

// The same with fp32 operands and output (fp32 compute): the device engine's f32 storage mode.
void linear_lt_f32(LinearProduct which, const float* first, const float* second, float* out, int64_t M, int64_t N,
                   int64_t K, bool accumulate, cudaStream_t stream);

// The bytes of workspace each device's cuBLASLt calls may use (docs/gpu.md's memory plan).
constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

}  // namespace gpu
}  // namespace murphy
