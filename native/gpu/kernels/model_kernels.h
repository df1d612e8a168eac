// The decoder's elementwise and row kernels for the GPU engine, in harness form (harness.h):
// each struct is one kernel; the formulas are those of the CPU ops in native/model/ (their
// spec) and native/include/murphy/model/ops.h. T is the storage type of activations and
// weights (float, or uint16_t holding bf16); statistics and gradient accumulators are fp32;
// all arithmetic is fp32.
#pragma once
#include "harness.h"

namespace murphy {
namespace gpu {

// Phases shared by the forward RMSNorms (one block per row, kPhases = 4):
//   phase 0: each thread's share of sum_i v_i^2 over its row, into sh[thread]
//            (rms_sum_squares, or the kernel's own loop when it writes as it reads);
//   phases 1-2 (rms_rstd_phases): the block total, then thread 0's
//            rstd = 1 / sqrt(total / n + eps), kept in shared memory and stored in *rstd_row;
//   phase 3: the kernel's output, reading rstd back with rms_rstd_shared.
template <typename T>
MURPHY_HD void rms_sum_squares(const Thread& t, const T* row, int64_t n, float* sh) {
  float s = 0.0f;
  for (int64_t i = t.thread; i < n; i += t.block_dim) {
    const float v = ld(row, i);
    s += v * v;
  }
  sh[t.thread] = s;
}
MURPHY_HD void rms_rstd_phases(int phase, const Thread& t, float* sh, int64_t n, float eps, float* rstd_row) {
  if (phase == 1) {
    block_sum_warps(t, sh);
  } else if (t.thread == 0) {
    const float r = 1.0f / sqrtf(block_sum_total(t, sh) / float(n) + eps);
    sh[block_sum_slot(t)] = r;
    *rstd_row = r;
  }
}
MURPHY_HD float rms_rstd_shared(const Thread& t, const float* sh) { return sh[block_sum_slot(t)]; }

// ---- RMSNorm forward, one block per row (also Qwen3's per-head q/k norms: rows = tokens x
// heads, n = head_dim; and OLMo-2's full-width q/k norms: n = heads x head_dim):
//   rstd = 1 / sqrt(mean_i x_i^2 + eps);  y_i = (x_i rstd) w_i
template <typename T>
struct RmsNormForward {
  const T* x;
  const T* w;
  T* y;
  float* rstd;  // [rows]
  int64_t rows, n;
  float eps;
  static constexpr int kPhases = 4;
  static size_t shared_floats(int block) { return block_sum_shared_floats(block); }
  int64_t grid() const { return rows; }
  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const T* xr = x + t.block * n;
    switch (phase) {
      case 0: rms_sum_squares(t, xr, n, sh); break;
      case 1:
      case 2: rms_rstd_phases(phase, t, sh, n, eps, rstd + t.block); break;
      default: {
        const float r = rms_rstd_shared(t, sh);
        for (int64_t i = t.thread; i < n; i += t.block_dim) st(y + t.block * n, i, (ld(xr, i) * r) * ld(w, i));
      }
    }
  }
};

// ---- Residual add fused with the next RMSNorm (Qwen3's pre-norm layers), one block per row:
//   h = x + d (stored);  rstd = 1 / sqrt(mean_i h_i^2 + eps);  y_i = (h_i rstd) w_i
// The norm reads h as stored (rounded to T), exactly as an unfused add-then-norm would.
template <typename T>
struct ResidualRmsNormForward {
  const T* x;
  const T* d;
  const T* w;
  T* h;
  T* y;
  float* rstd;
  int64_t rows, n;
  float eps;
  static constexpr int kPhases = 4;
  static size_t shared_floats(int block) { return block_sum_shared_floats(block); }
  int64_t grid() const { return rows; }
  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int64_t o = t.block * n;
    switch (phase) {
      case 0: {
        float s = 0.0f;
        for (int64_t i = t.thread; i < n; i += t.block_dim) {
          st(h, o + i, ld(x, o + i) + ld(d, o + i));
          const float v = ld(h, o + i);  // the same thread wrote it
          s += v * v;
        }
        sh[t.thread] = s;
        break;
      }
      case 1:
      case 2: rms_rstd_phases(phase, t, sh, n, eps, rstd + t.block); break;
      default: {
        const float r = rms_rstd_shared(t, sh);
        for (int64_t i = t.thread; i < n; i += t.block_dim) st(y, o + i, (ld(h, o + i) * r) * ld(w, i));
      }
    }
  }
};

// ---- RMSNorm of a branch output fused with the residual add (OLMo-2's post-norm layers):
//   rstd = 1 / sqrt(mean_i a_i^2 + eps);  h_i = x_i + (a_i rstd) w_i   (the normed value is never stored)
template <typename T>
struct RmsNormResidualForward {
  const T* a;
  const T* w;
  const T* x;
  T* h;
  float* rstd;
  int64_t rows, n;
  float eps;
  static constexpr int kPhases = 4;
  static size_t shared_floats(int block) { return block_sum_shared_floats(block); }
  int64_t grid() const { return rows; }
  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int64_t o = t.block * n;
    switch (phase) {
      case 0: rms_sum_squares(t, a + o, n, sh); break;
      case 1:
      case 2: rms_rstd_phases(phase, t, sh, n, eps, rstd + t.block); break;
      default: {
        const float r = rms_rstd_shared(t, sh);
        for (int64_t i = t.thread; i < n; i += t.block_dim) st(h, o + i, ld(x, o + i) + (ld(a, o + i) * r) * ld(w, i));
      }
    }
  }
};

// ---- RMSNorm backward, input gradient, one block per row:
//   xh = x rstd;  c = mean_j(w_j dy_j xh_j);  dx_i = rstd (w_i dy_i - xh_i c)
template <typename T>
struct RmsNormBackwardInput {
  const T* dy;
  const T* x;
  const T* w;
  const float* rstd;
  T* dx;
  int64_t rows, n;
  static constexpr int kPhases = 4;
  static size_t shared_floats(int block) { return block_sum_shared_floats(block); }
  int64_t grid() const { return rows; }
  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int64_t o = t.block * n;
    const float r = rstd[t.block];
    switch (phase) {
      case 0: {
        float s = 0.0f;
        for (int64_t i = t.thread; i < n; i += t.block_dim) s += ld(w, i) * ld(dy, o + i) * (ld(x, o + i) * r);
        sh[t.thread] = s;
        break;
      }
      case 1: block_sum_warps(t, sh); break;
      case 2:
        if (t.thread == 0) sh[block_sum_slot(t)] = block_sum_total(t, sh) / float(n);
        break;
      default: {
        const float c = sh[block_sum_slot(t)];
        for (int64_t i = t.thread; i < n; i += t.block_dim) {
          const float xh = ld(x, o + i) * r;
          st(dx, o + i, r * (ld(w, i) * ld(dy, o + i) - xh * c));
        }
      }
    }
  }
};

// ---- RMSNorm backward, weight gradient: one thread per column, rows summed in order
//   dw_i += sum_r dy_ri x_ri rstd_r        (no atomics: deterministic)
template <typename T>
struct RmsNormBackwardWeight {
  const T* dy;
  const T* x;
  const float* rstd;
  float* dw;
  int64_t rows, n;
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n, block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i >= n) return;
    float s = 0.0f;
    for (int64_t r = 0; r < rows; ++r) s += ld(dy, r * n + i) * (ld(x, r * n + i) * rstd[r]);
    dw[i] += s;
  }
};

// ---- RoPE (Hugging Face rotate_half), in place on x[T, heads, d], one thread per pair (i, i + d/2):
//   y_i = x_i cos a - x_{i+h} sin a;  y_{i+h} = x_{i+h} cos a + x_i sin a;  inverse: rotation by -a
template <typename T>
struct Rope {
  T* x;
  const int32_t* pos;  // [T]
  const float* cos_t;  // [max_pos, d/2]
  const float* sin_t;
  int64_t tokens, heads, head_dim;
  bool inverse;
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(tokens * heads * (head_dim / 2), block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t h = head_dim / 2;
    const int64_t k = t.block * t.block_dim + t.thread;
    if (k >= tokens * heads * h) return;
    const int64_t i = k % h, row = k / h, tok = row / heads;
    const int64_t base = row * head_dim;
    const float c = cos_t[int64_t(pos[tok]) * h + i], s = sin_t[int64_t(pos[tok]) * h + i];
    const float a = ld(x, base + i), b = ld(x, base + i + h);
    if (!inverse) {
      st(x, base + i, a * c - b * s);
      st(x, base + i + h, b * c + a * s);
    } else {
      st(x, base + i, a * c + b * s);
      st(x, base + i + h, b * c - a * s);
    }
  }
};

MURPHY_HD float sigmoidf_(float g) { return 1.0f / (1.0f + expf(-g)); }

// ---- SwiGLU forward, one thread per element: act = g s u,  s = sigmoid(g)
template <typename T>
struct SwigluForward {
  const T* g;
  const T* u;
  T* act;
  int64_t n;
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n, block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i >= n) return;
    const float gv = ld(g, i);
    st(act, i, gv * sigmoidf_(gv) * ld(u, i));
  }
};

// ---- SwiGLU backward: dg = da u s (1 + g (1 - s)),  du = da g s
template <typename T>
struct SwigluBackward {
  const T* da;
  const T* g;
  const T* u;
  T* dg;
  T* du;
  int64_t n;
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n, block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i >= n) return;
    const float gv = ld(g, i), d = ld(da, i), s = sigmoidf_(gv);
    st(dg, i, d * ld(u, i) * s * (1.0f + gv * (1.0f - s)));
    st(du, i, d * gv * s);
  }
};

// ---- Embedding gather, one thread per output element: y[t, j] = E[ids[t], j]
// (ids are checked on the host before the launch)
template <typename T>
struct EmbeddingGather {
  const T* table;
  const int32_t* ids;
  T* y;
  int64_t tokens, dim;
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(tokens * dim, block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t k = t.block * t.block_dim + t.thread;
    if (k >= tokens * dim) return;
    const int64_t tok = k / dim, j = k % dim;
    st(y, k, ld(table, int64_t(ids[tok]) * dim + j));
  }
};

// ---- Embedding gradient scatter: one thread per column j, tokens in order:
//   dE[ids[t], j] += dy[t, j]    (two tokens with one id never race; deterministic, no atomics)
template <typename T>
struct EmbeddingScatter {
  const T* dy;
  const int32_t* ids;
  float* dtable;
  int64_t tokens, dim;
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(dim, block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t j = t.block * t.block_dim + t.thread;
    if (j >= dim) return;
    for (int64_t tok = 0; tok < tokens; ++tok) dtable[int64_t(ids[tok]) * dim + j] += ld(dy, tok * dim + j);
  }
};

}  // namespace gpu
}  // namespace murphy
