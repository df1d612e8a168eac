// The harness-form decode kernels (kernels/paged_attention.h, kernels/sampling.h) compiled
// for the GPU: one launcher per kernel and storage type. The same structs run on the CPU in
// the tests (native/gpu/harness_decode.cc). Called by the device engine's paged step
// (engine/cuda_engine.cu); not yet run on a GPU (docs/gpu.md).
#include "decode_kernels_cuda.h"
#include "kernels/launch.cuh"
#include "kernels/paged_attention.h"
#include "kernels/sampling.h"

namespace murphy {
namespace gpu {

static_assert(kSampleBlock <= SampleRows<float>::kBlockLimit, "the sampler's launch bounds must admit its block");

#define MURPHY_DECODE_LAUNCHERS(T)                                                                                 \
  void kv_append_cuda(const T* k, const T* v, const int64_t* slot, T* k_pool, T* v_pool, int64_t n_new,          \
                      int64_t row, cudaStream_t s) {                                                               \
    launch_phased(KvAppend<T>{k, v, slot, k_pool, v_pool, n_new, row, kAppendBlock}, kAppendBlock, s);           \
  }                                                                                                                \
  void paged_attention_cuda(const T* q, const T* k_pool, const T* v_pool, const int32_t* block_table,            \
                            const int32_t* seq, const int32_t* pos, float* workspace, T* out, float* lse,        \
                            const PagedAttentionShape& a, cudaStream_t s) {                                        \
    if (a.D > kMaxHeadDim || a.partition > kMaxPartition || a.partition < 1)                                      \
      throw Error("paged_attention_cuda: head_dim must be <= 256 and the partition in 1..512");                   \
    float* o_part = workspace;                                                                                     \
    float* m_part = o_part + a.n_new * a.H * a.n_parts * a.D;                                                      \
    float* l_part = m_part + a.n_new * a.H * a.n_parts;                                                            \
    launch_phased(PagedAttentionPartial<T>{q, k_pool, v_pool, block_table, seq, pos, o_part, m_part, l_part,      \
                                           a.n_new, a.H, a.G, a.D, a.block_size, a.max_blocks, a.partition,       \
                                           a.n_parts, a.scale},                                                    \
                  kPagedAttnBlock, s);                                                                                  \
    launch_phased(PagedAttentionReduce<T>{o_part, m_part, l_part, pos, out, lse, a.n_new, a.H, a.D, a.partition,  \
                                          a.n_parts},                                                              \
                  kPagedAttnBlock, s);                                                                                  \
  }                                                                                                                \
  void sample_cuda(const T* logits, const float* temperature, const float* top_p, const float* min_p,            \
                   const int32_t* top_k, const uint64_t* stream, const int64_t* step, int32_t* token, float* logp, \
                   int64_t rows, int64_t V, cudaStream_t s) {                                                      \
    launch_phased(SampleRows<T>{logits, temperature, top_p, min_p, top_k, stream, step, token, logp, rows, V,     \
                                id_search_steps(V)},                                                            \
                  kSampleBlock, s);                                                                                \
  }

MURPHY_DECODE_LAUNCHERS(float)
MURPHY_DECODE_LAUNCHERS(uint16_t)
#undef MURPHY_DECODE_LAUNCHERS

}  // namespace gpu
}  // namespace murphy
