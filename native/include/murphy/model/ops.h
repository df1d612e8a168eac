// The decoder's op families. The policy model runs on the host: each family has a CPU file
// under native/model/ (the readable reference loops with the formula, then the fast path,
// switched by use_reference_ops()), and the model calls these functions directly. There is
// no Device argument: a GPU model backend would come with its own entry points (and the
// kernels of native/cuda/ keep their own host/device dispatch, native/dispatch.cc).
// All tensors are row-major fp32; "rows" are tokens.
#pragma once
#include <cstdint>

#include "murphy/common.h"

namespace murphy {
namespace model {

// True when the plain reference loops should run instead of the fast paths
// (MURPHY_REFERENCE_OPS=1 or setReferenceOps(true)); used by tests to check one against the other.
bool use_reference_ops();
void set_reference_ops(bool on);

// ---- matmul: C[M,N] = op(A)[M,K] * op(B)[K,N] (+ beta * C), fp32 accumulation.
// Strided views: element (i, k) of A is A[i * a_rs + k * a_cs], (k, j) of B is B[k * b_rs + j * b_cs].
struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;
  const float* A = nullptr;
  int64_t a_rs = 0, a_cs = 1;
  const float* B = nullptr;
  int64_t b_rs = 0, b_cs = 1;
  float* C = nullptr;
  int64_t ldc = 0;
  float beta = 0.0f;  // 0: C is overwritten (never read); 1: accumulate
};
void gemm_cpu(const GemmArgs& a);
// The three products of a linear layer y = x W^T with W [N, K] (HF's nn.Linear layout):
//   forward   Y[M,N]  = X[M,K] W^T          (accumulate: Y += ...)
//   input grad dX[M,K] = dY[M,N] W           (accumulate: dX += ...)
//   weight grad dW[N,K] += dY^T X
void linear_forward(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate);
void linear_backward_input(const float* dY, const float* W, float* dX, int64_t M, int64_t N, int64_t K, bool accumulate);
void linear_backward_weight(const float* dY, const float* X, float* dW, int64_t M, int64_t N, int64_t K);
// The forward product with bf16 weights Wb [N, K] (raw bits): Y (+)= bf16(X) Wb^T, X rounded to
// bf16 (nearest even), fp32 accumulation; vdpbf16ps where the CPU has AVX512_BF16.
void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate);

// ---- rmsnorm: y = x / sqrt(mean(x^2) + eps) * w, over rows of length n; rstd[r] kept for backward.
//   backward: xh = x * rstd;  dx = rstd * (w dy - xh * mean(w dy xh));  dw += sum_rows dy xh
void rmsnorm_forward_cpu(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t n, float eps);
void rmsnorm_backward_cpu(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                          int64_t rows, int64_t n, bool accumulate_dx);

// ---- rope (HF rotate_half convention), in place on x[T, n_heads, head_dim]:
//   inv_freq_i = 1 / theta^(2i/d), a = pos * inv_freq_i, h = d/2, for i < h:
//   y_i = x_i cos a - x_{i+h} sin a;   y_{i+h} = x_{i+h} cos a + x_i sin a
//   backward (the transpose, a rotation by -a) with inverse = true.
struct RopeTable {
  int64_t head_dim = 0, max_pos = 0;
  float* cos = nullptr;  // [max_pos, head_dim / 2]
  float* sin = nullptr;
};
void rope_table_init(float* cos, float* sin, int64_t max_pos, int64_t head_dim, double theta);
void rope_cpu(float* x, const int32_t* pos, int64_t T, int64_t n_heads, const RopeTable& tab, bool inverse);

// ---- attention over packed sequences (causal within each sequence, never across):
//   for token t in sequence s, head h with kv head g = h / (n_heads / n_kv):
//   p_tj = softmax_j (q_t . k_j * scale) over j in [start_s, t];  o_t = sum_j p_tj v_j
//   lse[t, h] = logsumexp_j (q_t . k_j * scale) is kept; backward recomputes p from it:
//   D_t = dO_t . o_t;  dS_tj = p_tj (dO_t . v_j - D_t);  dq_t = scale sum_j dS_tj k_j;
//   dk_j = scale sum_t dS_tj q_t;  dv_j = sum_t p_tj dO_t
struct AttnArgs {
  int64_t T = 0, n_heads = 0, n_kv = 0, head_dim = 0;
  const int64_t* seq_offsets = nullptr;  // [n_seqs + 1]
  int64_t n_seqs = 0;
  float scale = 1.0f;
  const float* q = nullptr;  // [T, n_heads, hd]
  const float* k = nullptr;  // [T, n_kv, hd]
  const float* v = nullptr;  // [T, n_kv, hd]
  float* out = nullptr;      // [T, n_heads, hd]
  float* lse = nullptr;      // [T, n_heads]
  // backward
  const float* dout = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
};
void attention_forward_cpu(const AttnArgs& a);
void attention_backward_cpu(const AttnArgs& a);
// Decode / prefill against a KV cache: B queries, query b attends to `len_b` keys that
// live in up to two segments (a shared prompt prefix, then its own continuation).
struct AttnCacheArgs {
  int64_t B = 0, n_heads = 0, n_kv = 0, head_dim = 0;
  float scale = 1.0f;
  const float* q = nullptr;                // [B, n_heads, hd]
  const float* const* k0 = nullptr;        // [B] segment 0 keys [len0_b, n_kv, hd]
  const float* const* v0 = nullptr;
  const int64_t* len0 = nullptr;           // [B]
  const float* const* k1 = nullptr;        // [B] segment 1 (may be null when len1 = 0)
  const float* const* v1 = nullptr;
  const int64_t* len1 = nullptr;           // [B]
  float* out = nullptr;                    // [B, n_heads, hd]
};
void attention_cached_cpu(const AttnCacheArgs& a);

// ---- swiglu: act = silu(g) * u, silu(g) = g * sigmoid(g)
//   dg = da * u * s (1 + g (1 - s)),  du = da * silu(g),  s = sigmoid(g)
void swiglu_forward_cpu(const float* g, const float* u, float* act, int64_t n);
void swiglu_backward_cpu(const float* da, const float* g, const float* u, float* dg, float* du, int64_t n);

// ---- embedding: y[t] = E[ids[t]];  backward dE[ids[t]] += dy[t]
void embedding_forward_cpu(const float* E, const int32_t* ids, float* y, int64_t T, int64_t dim);
void embedding_backward_cpu(const float* dy, const int32_t* ids, float* dE, int64_t T, int64_t dim);

// ---- elementwise helpers (part of the swiglu file's family "pointwise")
void add_inplace(float* y, const float* x, int64_t n);  // y += x

}  // namespace model
}  // namespace murphy
