// GPU launchers of the harness-form decoder kernels (native/gpu/model_kernels.cu; CUDA build
// only). Pointers are device pointers; T is float or uint16_t (bf16 bits); launches go on
// `s` and are checked (CUDA_CHECK_LAUNCH). Formulas: kernels/model_kernels.h.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace murphy {
namespace gpu {

constexpr int kBlock = 256;     // elementwise and column kernels
constexpr int kRowBlock = 256;  // one block per row (RMSNorm)

#define MURPHY_GPU_LAUNCHER_DECLS(T)                                                                              \
  void rmsnorm_forward_cuda(const T* x, const T* w, T* y, float* rstd, int64_t rows, int64_t n, float eps,       \
                            cudaStream_t s);                                                                       \
  void residual_rmsnorm_forward_cuda(const T* x, const T* d, const T* w, T* h, T* y, float* rstd, int64_t rows,  \
                                     int64_t n, float eps, cudaStream_t s);                                        \
  void rmsnorm_residual_forward_cuda(const T* a, const T* w, const T* x, T* h, float* rstd, int64_t rows,        \
                                     int64_t n, float eps, cudaStream_t s);                                        \
  void rmsnorm_backward_input_cuda(const T* dy, const T* x, const T* w, const float* rstd, T* dx, int64_t rows,  \
                                   int64_t n, cudaStream_t s);                                                     \
  void rmsnorm_backward_weight_cuda(const T* dy, const T* x, const float* rstd, float* dw, int64_t rows,          \
                                    int64_t n, cudaStream_t s);                                                    \
  void rope_cuda(T* x, const int32_t* pos, const float* cos_t, const float* sin_t, int64_t tokens, int64_t heads, \
                 int64_t head_dim, bool inverse, cudaStream_t s);                                                  \
  void swiglu_forward_cuda(const T* g, const T* u, T* act, int64_t n, cudaStream_t s);                            \
  void swiglu_backward_cuda(const T* da, const T* g, const T* u, T* dg, T* du, int64_t n, cudaStream_t s);        \
  void embedding_gather_cuda(const T* table, const int32_t* ids, T* y, int64_t tokens, int64_t dim,               \
                             cudaStream_t s);                                                                      \
  void embedding_scatter_cuda(const T* dy, const int32_t* ids, float* dtable, int64_t tokens, int64_t dim,        \
                              cudaStream_t s);

MURPHY_GPU_LAUNCHER_DECLS(float)
MURPHY_GPU_LAUNCHER_DECLS(uint16_t)
#undef MURPHY_GPU_LAUNCHER_DECLS

}  // namespace gpu
}  // namespace murphy
