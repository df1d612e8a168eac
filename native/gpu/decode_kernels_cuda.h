// GPU launchers of the harness-form decode kernels (native/gpu/decode_kernels.cu; CUDA build
// only): KV append into a paged pool, paged attention (partitions, then their merge), sampling
// one token per row. Pointers are device pointers; T is float or uint16_t (bf16 bits); launches
// go on `s` and are checked. Formulas: kernels/paged_attention.h and kernels/sampling.h.
// Called by the device engine's paged step (engine/cuda_engine.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/decode_shape.h"

namespace murphy {
namespace gpu {

#define MURPHY_DECODE_LAUNCHER_DECLS(T)                                                                            \
  void kv_append_cuda(const T* k, const T* v, const int64_t* slot, T* k_pool, T* v_pool, int64_t n_new,          \
                      int64_t row, cudaStream_t s);                                                                \
  void paged_attention_cuda(const T* q, const T* k_pool, const T* v_pool, const int32_t* block_table,            \
                            const int32_t* seq, const int32_t* pos, float* workspace, T* out, float* lse,        \
                            const PagedAttentionShape& a, cudaStream_t s);                                         \
  void sample_cuda(const T* logits, const float* temperature, const float* top_p, const float* min_p,            \
                   const int32_t* top_k, const uint64_t* stream, const int64_t* step, int32_t* token, float* logp, \
                   int64_t rows, int64_t V, cudaStream_t s);

MURPHY_DECODE_LAUNCHER_DECLS(float)
MURPHY_DECODE_LAUNCHER_DECLS(uint16_t)
#undef MURPHY_DECODE_LAUNCHER_DECLS

}  // namespace gpu
}  // namespace murphy
