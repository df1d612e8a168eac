// See gemm_plan.h.
#include "gemm_plan.h"

#include <string>

#include "murphy/common.h"

namespace murphy {
namespace gpu {

static_assert(lt_alignment(0) == 256 && lt_alignment(0x7f0000000100) == 256 && lt_alignment(0x7f0000000140) == 64);
static_assert(lt_alignment(0x7f0000000020) == 32 && lt_alignment(0x7f0000000002) == 2 && lt_alignment(0x7f0000000001) == 1);

LtGemmPlan linear_plan(LinearProduct p, int64_t M, int64_t N, int64_t K, bool accumulate) {
  LtGemmPlan g;
  switch (p) {
    case LinearProduct::Forward:  // Y^T[N,M] = op_T(W stored as W^T[K,N], ld K) * (X^T[K,M], ld K)
      g.trans_a = true, g.trans_b = false;
      g.m = N, g.n = M, g.k = K;
      g.a_is = 1, g.lda = K;
      g.b_is = 0, g.ldb = K;
      g.ldc = N;
      g.beta = accumulate ? 1.0f : 0.0f;
      break;
    case LinearProduct::BackwardInput:  // dX^T[K,M] = (W^T[K,N], ld K) * (dY^T[N,M], ld N)
      g.trans_a = false, g.trans_b = false;
      g.m = K, g.n = M, g.k = N;
      g.a_is = 1, g.lda = K;
      g.b_is = 0, g.ldb = N;
      g.ldc = K;
      g.beta = accumulate ? 1.0f : 0.0f;
      break;
    case LinearProduct::BackwardWeight:  // dW^T[K,N] += (X^T[K,M], ld K) * op_T(dY^T[N,M], ld N)
      g.trans_a = false, g.trans_b = true;
      g.m = K, g.n = N, g.k = M;
      g.a_is = 1, g.lda = K;
      g.b_is = 0, g.ldb = N;
      g.ldc = K;
      g.beta = 1.0f;
      break;
  }
  return g;
}

void colmajor_gemm_ref(const LtGemmPlan& p, const float* A, int64_t a_len, const float* B, int64_t b_len, float* C,
                       int64_t c_len) {
  // Largest index each operand is read at: a stored (rows x cols) matrix with ld reaches (rows-1) + (cols-1) ld.
  const int64_t a_last = p.trans_a ? (p.k - 1) + (p.m - 1) * p.lda : (p.m - 1) + (p.k - 1) * p.lda;
  const int64_t b_last = p.trans_b ? (p.n - 1) + (p.k - 1) * p.ldb : (p.k - 1) + (p.n - 1) * p.ldb;
  const int64_t c_last = (p.m - 1) + (p.n - 1) * p.ldc;
  if (a_last >= a_len || b_last >= b_len || c_last >= c_len)
    throw Error("colmajor_gemm_ref: the plan reaches past an operand (A " + std::to_string(a_last) + "/" +
                std::to_string(a_len) + ", B " + std::to_string(b_last) + "/" + std::to_string(b_len) + ", C " +
                std::to_string(c_last) + "/" + std::to_string(c_len) + ")");
  for (int64_t j = 0; j < p.n; ++j) {
    for (int64_t i = 0; i < p.m; ++i) {
      double s = 0.0;
      for (int64_t q = 0; q < p.k; ++q) {
        const float a = p.trans_a ? A[q + i * p.lda] : A[i + q * p.lda];
        const float b = p.trans_b ? B[j + q * p.ldb] : B[q + j * p.ldb];
        s += double(a) * double(b);
      }
      float& c = C[i + j * p.ldc];
      c = float(s + (p.beta != 0.0f ? double(p.beta) * double(c) : 0.0));
    }
  }
}

}  // namespace gpu
}  // namespace murphy
