// Op family "attention" on the CPU (formulas in murphy/model/ops.h): causal softmax attention
// with grouped-query heads over packed sequences, and the same against a KV cache.
// One path, written as plain loops: per (token, head) a score row over the keys of its own
// sequence, a max-subtracted softmax, and a weighted sum of values; dot products of head_dim
// vectorize. The backward pass recomputes the probabilities from the saved log-sum-exp
// (no [T, T] matrix is kept) in two passes, so that every output has exactly one writer:
// dq per (token, head), then dk and dv per (key, kv head).
#include <cmath>
#include <limits>
#include <vector>

#include "../cpu/simd.h"
#include "../cpu/threads.h"
#include "murphy/model/ops.h"

#define MURPHY_SIMD_BODY "../model/attention_simd.inc"
#include "../cpu/simd_multiversion.inc"

namespace murphy {
namespace model {

namespace {


// start of each token's sequence
std::vector<int64_t> seq_starts(const AttnArgs& a) {
  std::vector<int64_t> st(static_cast<size_t>(a.T));
  for (int64_t s = 0; s < a.n_seqs; ++s)
    for (int64_t t = a.seq_offsets[s]; t < a.seq_offsets[s + 1]; ++t) st[size_t(t)] = a.seq_offsets[s];
  return st;
}

// softmax over scores[0, n) in place; returns log-sum-exp
float softmax_inplace(float* sc, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = sc[j] > m ? sc[j] : m;
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    sc[j] = std::exp(sc[j] - m);
    sum += sc[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) sc[j] *= inv;
  return m + std::log(sum);
}

}  // namespace

void attention_forward_cpu(const AttnArgs& a) {
  const int64_t H = a.n_heads, G = a.n_kv, D = a.head_dim, rep = H / G;
  const std::vector<int64_t> start = seq_starts(a);
  parallel_for(a.T * H, 4, [&](int64_t i0, int64_t i1) {
    std::vector<float> sc;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, g = h / rep, s0 = start[size_t(t)], n = t - s0 + 1;
      sc.resize(static_cast<size_t>(n));
      const float* q = a.q + (t * H + h) * D;
      MURPHY_SIMD_CALL(vdot_rows, q, a.k + (s0 * G + g) * D, G * D, n, D, a.scale, sc.data());
      a.lse[t * H + h] = softmax_inplace(sc.data(), n);
      float* o = a.out + (t * H + h) * D;
      for (int64_t e = 0; e < D; ++e) o[e] = 0.0f;
      MURPHY_SIMD_CALL(axpy_rows, o, sc.data(), a.v + (s0 * G + g) * D, G * D, n, D);
    }
  });
}

void attention_backward_cpu(const AttnArgs& a) {
  const int64_t H = a.n_heads, G = a.n_kv, D = a.head_dim, rep = H / G, T = a.T;
  const std::vector<int64_t> start = seq_starts(a);
  std::vector<int64_t> end(static_cast<size_t>(T));
  for (int64_t s = 0; s < a.n_seqs; ++s)
    for (int64_t t = a.seq_offsets[s]; t < a.seq_offsets[s + 1]; ++t) end[size_t(t)] = a.seq_offsets[s + 1];
  std::vector<float> Dt(static_cast<size_t>(T * H));
  // pass 1: dq_t = scale sum_j p_tj (dO_t . v_j - D_t) k_j
  parallel_for(T * H, 4, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, g = h / rep, s0 = start[size_t(t)];
      const float* q = a.q + (t * H + h) * D;
      const float* dO = a.dout + (t * H + h) * D;
      const float dt = MURPHY_SIMD_CALL(vdot, dO, a.out + (t * H + h) * D, D);
      Dt[size_t(i)] = dt;
      const float lse = a.lse[t * H + h];
      float* dq = a.dq + (t * H + h) * D;
      for (int64_t e = 0; e < D; ++e) dq[e] = 0.0f;
      MURPHY_SIMD_CALL(attn_dq_row, q, dO, a.k + (s0 * G + g) * D, a.v + (s0 * G + g) * D, G * D, t - s0 + 1, D, a.scale, lse, dt, dq);
    }
  });
  // pass 2: dk_j = scale sum_t dS_tj q_t,  dv_j = sum_t p_tj dO_t  over heads of kv group g
  parallel_for(T * G, 2, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t j = i / G, g = i % G, e_end = end[size_t(j)];
      const float* k = a.k + (j * G + g) * D;
      const float* v = a.v + (j * G + g) * D;
      float* dk = a.dk + (j * G + g) * D;
      float* dv = a.dv + (j * G + g) * D;
      for (int64_t e = 0; e < D; ++e) dk[e] = dv[e] = 0.0f;
      for (int64_t h = g * rep; h < (g + 1) * rep; ++h)
        MURPHY_SIMD_CALL(attn_dkv_rows, k, v, a.q + (j * H + h) * D, a.dout + (j * H + h) * D, H * D, a.lse + j * H + h,
                         Dt.data() + j * H + h, H, e_end - j, D, a.scale, dk, dv);
    }
  });
}

void attention_cached_cpu(const AttnCacheArgs& a) {
  const int64_t H = a.n_heads, G = a.n_kv, D = a.head_dim, rep = H / G;
  parallel_for(a.B * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> sc;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H, g = h / rep;
      const int64_t n0 = a.len0[b], n1 = a.len1 ? a.len1[b] : 0, n = n0 + n1;
      sc.resize(static_cast<size_t>(n));
      const float* q = a.q + (b * H + h) * D;
      MURPHY_SIMD_CALL(vdot_rows, q, a.k0[b] + g * D, G * D, n0, D, a.scale, sc.data());
      if (n1 > 0) MURPHY_SIMD_CALL(vdot_rows, q, a.k1[b] + g * D, G * D, n1, D, a.scale, sc.data() + n0);
      softmax_inplace(sc.data(), n);
      float* o = a.out + (b * H + h) * D;
      for (int64_t e = 0; e < D; ++e) o[e] = 0.0f;
      MURPHY_SIMD_CALL(axpy_rows, o, sc.data(), a.v0[b] + g * D, G * D, n0, D);
      if (n1 > 0) MURPHY_SIMD_CALL(axpy_rows, o, sc.data() + n0, a.v1[b] + g * D, G * D, n1, D);
    }
  });
}


}  // namespace model
}  // namespace murphy
