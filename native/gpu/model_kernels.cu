// The harness-form decoder kernels (kernels/model_kernels.h) compiled for the GPU: one
// launcher per kernel and storage type (bf16 and f32). The same structs run on the CPU in
// the tests (native/gpu/harness_ops.cc). Not yet called by a GPU engine, and not yet run on
// a GPU (docs/gpu.md).
#include "kernels/launch.cuh"
#include "kernels/model_kernels.h"
#include "model_kernels_cuda.h"

namespace murphy {
namespace gpu {

#define MURPHY_GPU_LAUNCHERS(T)                                                                                   \
  void rmsnorm_forward_cuda(const T* x, const T* w, T* y, float* rstd, int64_t rows, int64_t n, float eps,       \
                            cudaStream_t s) {                                                                      \
    launch_phased(RmsNormForward<T>{x, w, y, rstd, rows, n, eps}, kRowBlock, s);                                  \
  }                                                                                                                \
  void residual_rmsnorm_forward_cuda(const T* x, const T* d, const T* w, T* h, T* y, float* rstd, int64_t rows,  \
                                     int64_t n, float eps, cudaStream_t s) {                                       \
    launch_phased(ResidualRmsNormForward<T>{x, d, w, h, y, rstd, rows, n, eps}, kRowBlock, s);                    \
  }                                                                                                                \
  void rmsnorm_residual_forward_cuda(const T* a, const T* w, const T* x, T* h, float* rstd, int64_t rows,        \
                                     int64_t n, float eps, cudaStream_t s) {                                       \
    launch_phased(RmsNormResidualForward<T>{a, w, x, h, rstd, rows, n, eps}, kRowBlock, s);                       \
  }                                                                                                                \
  void rmsnorm_backward_input_cuda(const T* dy, const T* x, const T* w, const float* rstd, T* dx, int64_t rows,  \
                                   int64_t n, cudaStream_t s) {                                                    \
    launch_phased(RmsNormBackwardInput<T>{dy, x, w, rstd, dx, rows, n}, kRowBlock, s);                            \
  }                                                                                                                \
  void rmsnorm_backward_weight_cuda(const T* dy, const T* x, const float* rstd, float* dw, int64_t rows,          \
                                    int64_t n, cudaStream_t s) {                                                   \
    launch_phased(RmsNormBackwardWeight<T>{dy, x, rstd, dw, rows, n, kBlock}, kBlock, s);                         \
  }                                                                                                                \
  void rope_cuda(T* x, const int32_t* pos, const float* cos_t, const float* sin_t, int64_t tokens, int64_t heads, \
                 int64_t head_dim, bool inverse, cudaStream_t s) {                                                 \
    launch_phased(Rope<T>{x, pos, cos_t, sin_t, tokens, heads, head_dim, inverse, kBlock}, kBlock, s);            \
  }                                                                                                                \
  void swiglu_forward_cuda(const T* g, const T* u, T* act, int64_t n, cudaStream_t s) {                           \
    launch_phased(SwigluForward<T>{g, u, act, n, kBlock}, kBlock, s);                                             \
  }                                                                                                                \
  void swiglu_backward_cuda(const T* da, const T* g, const T* u, T* dg, T* du, int64_t n, cudaStream_t s) {       \
    launch_phased(SwigluBackward<T>{da, g, u, dg, du, n, kBlock}, kBlock, s);                                     \
  }                                                                                                                \
  void embedding_gather_cuda(const T* table, const int32_t* ids, T* y, int64_t tokens, int64_t dim,               \
                             cudaStream_t s) {                                                                     \
    launch_phased(EmbeddingGather<T>{table, ids, y, tokens, dim, kBlock}, kBlock, s);                             \
  }                                                                                                                \
  void embedding_scatter_cuda(const T* dy, const int32_t* ids, float* dtable, int64_t tokens, int64_t dim,        \
                              cudaStream_t s) {                                                                    \
    launch_phased(EmbeddingScatter<T>{dy, ids, dtable, tokens, dim, kBlock}, kBlock, s);                          \
  }

MURPHY_GPU_LAUNCHERS(float)
MURPHY_GPU_LAUNCHERS(uint16_t)
#undef MURPHY_GPU_LAUNCHERS

}  // namespace gpu
}  // namespace murphy
