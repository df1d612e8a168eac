// Kernel family 1 on the CPU: batched log-prob gathering and its gradient.
// Formulas: see native/include/murphy/logprob.h.
//
// Reference (one row, plain loops):
//   m   = max_j z[j]
//   s   = sum_j exp((z[j] - m) / T)
//   lse = m / T + log(s)
//   logp = z[y] / T - lse
//   H    = log(s) - sum_j e_j * d_j / s,   d_j = (z[j] - m) / T, e_j = exp(d_j)
//   grad[j] = g * (1[j = y] - exp(z[j] / T - lse)) / T
// Fast path: the same loops, vectorized (MURPHY_SIMD_CLONES) and parallel over rows.
// A row is read twice in the forward pass (max, then sum) but the second read comes
// from cache (a 151,936-entry fp32 row is 600 KB), so memory traffic is one read.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "murphy/logprob.h"
#include "simd.h"
#include "threads.h"

namespace murphy {
namespace cpu_detail {

struct RowStats {
  float max;
  double sum;     // sum_j exp(d_j)
  double sum_ed;  // sum_j exp(d_j) * d_j
  int nan;
};

template <typename Load>
inline __attribute__((always_inline)) RowStats row_stats(const Load& load, int64_t V, float inv_t,
                                                         bool want_entropy) {
  float m = -std::numeric_limits<float>::infinity();
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
  for (int64_t j = 0; j < V; ++j) {
    float z = load(j);
    nan |= (z != z);
    m = z > m ? z : m;
  }
  RowStats st{m, 0.0, 0.0, nan};
  if (nan || m == -std::numeric_limits<float>::infinity()) return st;
  // Blocked sums: fp32 lane-partial sums within a block of 1024, fp64 across blocks.
  // A single fp32 accumulator per lane would drop the many terms far below its ulp
  // (at V = 151,936 that biases lse by ~1e-4).
  constexpr int64_t kBlock = 1024;
  double s = 0.0, sed = 0.0;
  for (int64_t b = 0; b < V; b += kBlock) {
    const int64_t e = b + kBlock < V ? b + kBlock : V;
    float bs = 0.0f, bsed = 0.0f;
    if (want_entropy) {
#pragma omp simd reduction(+ : bs, bsed)
      for (int64_t j = b; j < e; ++j) {
        float d = (load(j) - m) * inv_t;
        d = d < -88.0f ? -88.0f : d;  // keeps 0 * (-inf) out of sed; exp underflows to 0 anyway
        float x = vexp(d);
        bs += x;
        bsed += x * d;
      }
    } else {
#pragma omp simd reduction(+ : bs)
      for (int64_t j = b; j < e; ++j) bs += vexp((load(j) - m) * inv_t);
    }
    s += bs;
    sed += bsed;
  }
  st.sum = s;
  st.sum_ed = sed;
  return st;
}

MURPHY_SIMD_CLONES RowStats row_stats_f32(const float* z, int64_t V, float inv_t, bool want_entropy) {
  return row_stats([z](int64_t j) { return z[j]; }, V, inv_t, want_entropy);
}

MURPHY_SIMD_CLONES RowStats row_stats_bf16(const uint16_t* z, int64_t V, float inv_t, bool want_entropy) {
  return row_stats([z](int64_t j) { return bf16_bits_to_f32(z[j]); }, V, inv_t, want_entropy);
}

// grad[j] = c * exp(z[j] * inv_t - lse), c = -g / T; the target's +g/T is added after.
MURPHY_SIMD_CLONES void row_grad_f32(const float* z, float* out, int64_t V, float inv_t, float lse, float c) {
#pragma omp simd
  for (int64_t j = 0; j < V; ++j) out[j] = c * vexp(z[j] * inv_t - lse);
}

MURPHY_SIMD_CLONES void row_grad_bf16(const uint16_t* z, uint16_t* out, int64_t V, float inv_t, float lse,
                                      float c) {
#pragma omp simd
  for (int64_t j = 0; j < V; ++j) {
    float gv = c * vexp(bf16_bits_to_f32(z[j]) * inv_t - lse);
    // round to nearest even (inputs are finite or zero here)
    uint32_t u;
    std::memcpy(&u, &gv, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    out[j] = uint16_t(u >> 16);
  }
}

}  // namespace cpu_detail

namespace {

void check_common(const void* logits, int64_t n_rows, int64_t vocab, const int32_t* targets, float temperature) {
  if (n_rows < 0) throw Error("logprob: nRows must be >= 0, got " + std::to_string(n_rows));
  if (vocab < 1) throw Error("logprob: vocab must be >= 1, got " + std::to_string(vocab));
  if (!(temperature > 0.0f) || !std::isfinite(temperature))
    throw Error("logprob: temperature must be a finite number > 0, got " + std::to_string(temperature));
  if (n_rows > 0 && (!logits || !targets)) throw Error("logprob: logits and targets are required");
}

void check_target(int64_t row, int32_t y, int64_t vocab) {
  if (y < 0 || int64_t(y) >= vocab)
    throw Error("logprob: target id " + std::to_string(y) + " at row " + std::to_string(row) +
                " is outside the vocabulary [0, " + std::to_string(vocab) + "); check the token ids");
}

float load_logit(const void* logits, DType dt, int64_t idx) {
  return dt == DType::F32 ? static_cast<const float*>(logits)[idx]
                          : bf16_to_f32(static_cast<const uint16_t*>(logits)[idx]);
}

}  // namespace

void logprob_forward_cpu(const LogprobForwardArgs& a) {
  check_common(a.logits, a.n_rows, a.vocab, a.targets, a.temperature);
  for (int64_t n = 0; n < a.n_rows; ++n) check_target(n, a.targets[n], a.vocab);
  const float inv_t = 1.0f / a.temperature;
  const int64_t V = a.vocab;
  const bool want_entropy = a.entropy != nullptr;
  // rows are independent; each parallel chunk writes only its own rows
  parallel_for(a.n_rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int64_t off = n * V;
      cpu_detail::RowStats st =
          a.dtype == DType::F32
              ? cpu_detail::row_stats_f32(static_cast<const float*>(a.logits) + off, V, inv_t, want_entropy)
              : cpu_detail::row_stats_bf16(static_cast<const uint16_t*>(a.logits) + off, V, inv_t, want_entropy);
      float lse, logp, ent;
      if (st.nan) {
        lse = logp = ent = std::numeric_limits<float>::quiet_NaN();
      } else if (st.max == -std::numeric_limits<float>::infinity()) {  // fully masked row
        lse = logp = -std::numeric_limits<float>::infinity();
        ent = 0.0f;
      } else {
        const double log_s = std::log(st.sum);
        lse = float(double(st.max) * inv_t + log_s);
        // relative to the max, so that large logits keep their precision
        logp = float(double(load_logit(a.logits, a.dtype, off + a.targets[n]) - st.max) * inv_t - log_s);
        ent = float(log_s - st.sum_ed / st.sum);
      }
      a.logp[n] = logp;
      if (a.lse) a.lse[n] = lse;
      if (a.entropy) a.entropy[n] = ent;
    }
  });
  for (int64_t n = 0; n < a.n_rows; ++n)
    if (std::isnan(a.logp[n]))
      throw Error("logprob: NaN in the logits of row " + std::to_string(n) +
                  "; the model produced NaN (check the learning rate and the inputs)");
}

void logprob_backward_cpu(const LogprobBackwardArgs& a) {
  check_common(a.logits, a.n_rows, a.vocab, a.targets, a.temperature);
  if (a.n_rows > 0 && (!a.lse || !a.grad_logp || !a.grad_logits))
    throw Error("logprob backward: lse, gradLogp and the gradLogits output are required");
  for (int64_t n = 0; n < a.n_rows; ++n) check_target(n, a.targets[n], a.vocab);
  const float inv_t = 1.0f / a.temperature;
  const int64_t V = a.vocab;
  parallel_for(a.n_rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int64_t off = n * V;
      const float g = a.grad_logp[n];
      const float lse = a.lse[n];
      const int32_t y = a.targets[n];
      if (a.dtype == DType::F32) {
        float* out = static_cast<float*>(a.grad_logits) + off;
        if (g == 0.0f || std::isinf(lse)) {
          std::memset(out, 0, size_t(V) * 4);
          continue;
        }
        cpu_detail::row_grad_f32(static_cast<const float*>(a.logits) + off, out, V, inv_t, lse, -g * inv_t);
        out[y] += g * inv_t;
      } else {
        uint16_t* out = static_cast<uint16_t*>(a.grad_logits) + off;
        if (g == 0.0f || std::isinf(lse)) {
          std::memset(out, 0, size_t(V) * 2);
          continue;
        }
        const uint16_t* z = static_cast<const uint16_t*>(a.logits) + off;
        cpu_detail::row_grad_bf16(z, out, V, inv_t, lse, -g * inv_t);
        // the target entry in full precision, then rounded once
        float p = std::exp(bf16_to_f32(z[y]) * inv_t - lse);
        out[y] = f32_to_bf16(g * inv_t * (1.0f - p));
      }
    }
  });
}

}  // namespace murphy
