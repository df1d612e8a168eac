// Op family "pointwise" on the CPU: the SwiGLU activation and residual adds.
//   act = silu(g) u,  silu(g) = g s,  s = sigmoid(g) = 1 / (1 + exp(-g))
//   dg = da u s (1 + g (1 - s)),  du = da silu(g)
#include <cmath>

#include "../cpu/simd.h"
#include "../cpu/threads.h"
#include "murphy/model/ops.h"

#define MURPHY_SIMD_BODY "../model/swiglu_simd.inc"
#include "../cpu/simd_multiversion.inc"

namespace murphy {
namespace model {


void swiglu_forward_cpu(const float* g, const float* u, float* act, int64_t n) {
  parallel_for(n, 16384, [&](int64_t a, int64_t b) { MURPHY_SIMD_CALL(fwd, g + a, u + a, act + a, b - a); });
}
void swiglu_backward_cpu(const float* da, const float* g, const float* u, float* dg, float* du, int64_t n) {
  parallel_for(n, 16384, [&](int64_t a, int64_t b) { MURPHY_SIMD_CALL(bwd, da + a, g + a, u + a, dg + a, du + a, b - a); });
}
void add_inplace(float* y, const float* x, int64_t n) {
  parallel_for(n, 32768, [&](int64_t a, int64_t b) { MURPHY_SIMD_CALL(addv, y + a, x + a, b - a); });
}

}  // namespace model
}  // namespace murphy
