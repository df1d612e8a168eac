// How the decoder's three linear-layer products map onto one cuBLASLt call (column-major
// BLAS semantics: D[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C, element (i, j) of a stored
// m x n matrix at [i + j ld]). Our tensors are row-major; a row-major R[r, c] with row length
// L is the column-major R^T with ld L, so each row-major product is computed transposed:
//   forward         Y[M,N]   = X[M,K] W^T        ->  Y^T[N,M]  = op_T(W) X^T
//   input grad      dX[M,K]  = dY[M,N] W[N,K]    ->  dX^T[K,M] = W^T dY^T
//   weight grad     dW[N,K] += dY^T X            ->  dW^T[K,N] = X^T op_T(dY^T)   (beta 1)
// (W is HF's nn.Linear layout [N = out, K = in].) Pure and host-only: the CUDA wrapper feeds
// the plan to cuBLASLt, and the tests execute it with a plain column-major GEMM on the CPU
// against native/model's linear ops, so the layout is checked without a GPU.
#pragma once
#include <cstdint>

namespace murphy {
namespace gpu {

enum class LinearProduct { Forward, BackwardInput, BackwardWeight };

struct LtGemmPlan {
  bool trans_a = false, trans_b = false;  // CUBLAS_OP_T when true
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  // Which of the product's operands is cuBLASLt's A and B: 0 = the first named (X, dY, dY),
  // 1 = the second (W, W, X) of linear_forward(X, W) / backward_input(dY, W) / backward_weight(dY, X).
  int a_is = 0, b_is = 0;
  float beta = 0.0f;  // 1 for the weight gradient (accumulates), else 0 or 1 by `accumulate`
};

LtGemmPlan linear_plan(LinearProduct p, int64_t M, int64_t N, int64_t K, bool accumulate);

// The alignment of a matrix's start address for cuBLASLt: the largest power of two that divides
// it, at most 256. cuBLASLt's heuristic picks algorithms for 256-byte aligned matrices unless
// told otherwise (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and an algorithm that needs more
// than a pointer has fails or faults; the engine's operands start at parameter offsets, which
// are 64-byte aligned (native/model/weights.cc: 16 values, so 32 bytes in bf16), and at row
// offsets inside activation buffers.
constexpr uint32_t lt_alignment(uintptr_t address) {
  uint32_t a = 1;
  while (a < 256 && address % (2 * uintptr_t(a)) == 0) a *= 2;
  return a;
}

// Column-major reference GEMM with BLAS semantics (alpha = 1), fp32: the meaning of a plan.
// Throws when the plan would touch an element outside the given lengths.
void colmajor_gemm_ref(const LtGemmPlan& p, const float* A, int64_t a_len, const float* B, int64_t b_len, float* C,
                       int64_t c_len);

}  // namespace gpu
}  // namespace murphy
