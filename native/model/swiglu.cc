// Op family "pointwise" on the CPU: the SwiGLU activation and residual adds.
//   act = silu(g) u,  silu(g) = g s,  s = sigmoid(g) = 1 / (1 + exp(-g))
//   dg = da u s (1 + g (1 - s)),  du = da silu(g)
#include <cmath>

#include "../cpu/simd.h"
#include "../cpu/threads.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace model {

namespace {
MURPHY_SIMD_CLONES void fwd(const float* __restrict g, const float* __restrict u, float* __restrict a, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + vexp(-g[i]));
    a[i] = g[i] * s * u[i];
  }
}
MURPHY_SIMD_CLONES void bwd(const float* __restrict da, const float* __restrict g, const float* __restrict u,
                            float* __restrict dg, float* __restrict du, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + vexp(-g[i]));
    dg[i] = da[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    du[i] = da[i] * g[i] * s;
  }
}
MURPHY_SIMD_CLONES void addv(float* __restrict y, const float* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}
}  // namespace

void swiglu_forward_cpu(const float* g, const float* u, float* act, int64_t n) {
  parallel_for(n, 16384, [&](int64_t a, int64_t b) { fwd(g + a, u + a, act + a, b - a); });
}
void swiglu_backward_cpu(const float* da, const float* g, const float* u, float* dg, float* du, int64_t n) {
  parallel_for(n, 16384, [&](int64_t a, int64_t b) { bwd(da + a, g + a, u + a, dg + a, du + a, b - a); });
}
void add_inplace(float* y, const float* x, int64_t n) {
  parallel_for(n, 32768, [&](int64_t a, int64_t b) { addv(y + a, x + a, b - a); });
}

}  // namespace model
}  // namespace murphy
