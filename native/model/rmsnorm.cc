// Op family "rmsnorm" on the CPU (formulas in murphy/model/ops.h):
//   rstd = 1 / sqrt(mean_i x_i^2 + eps);  y_i = x_i rstd w_i
//   dx_i = rstd (w_i dy_i - xh_i mean_j(w_j dy_j xh_j)),  xh = x rstd;   dw_i += sum_rows dy_i xh_i
// One path: plain loops vectorized with omp simd, parallel over rows; the weight gradient is
// reduced from fixed per-block partial sums (deterministic for a given thread count).
#include <cmath>
#include <vector>

#include "../cpu/simd.h"
#include "../cpu/threads.h"
#include "murphy/model/ops.h"

#define MURPHY_SIMD_BODY "../model/rmsnorm_simd.inc"
#include "../cpu/simd_multiversion.inc"

namespace murphy {
namespace model {

namespace {

}  // namespace

void rmsnorm_forward_cpu(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t n, float eps) {
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) MURPHY_SIMD_CALL(row_fwd, x + r * n, w, y + r * n, rstd + r, n, eps);
  });
}

void rmsnorm_backward_cpu(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                          int64_t rows, int64_t n, bool accumulate_dx) {
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(rows, int64_t(num_threads()) * 2));
  std::vector<float> part(static_cast<size_t>(blocks * n), 0.0f);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = rows * b / blocks, r1 = rows * (b + 1) / blocks;
      for (int64_t r = r0; r < r1; ++r)
        MURPHY_SIMD_CALL(row_bwd, dy + r * n, x + r * n, w, rstd[r], dx + r * n, part.data() + b * n, n, accumulate_dx);
    }
  });
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < n; ++i) dw[i] += part[size_t(b * n + i)];
}

}  // namespace model
}  // namespace murphy
