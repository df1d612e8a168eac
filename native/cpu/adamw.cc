// Kernel family 3 on the CPU: fused multi-tensor AdamW with global-norm clipping.
// Formulas: see native/include/murphy/adamw.h (torch.optim.AdamW after
// torch.nn.utils.clip_grad_norm_).
//
// Reference, per element (after the global norm and coef are known):
//   g  = coef * grad
//   p  = p * (1 - lr wd)                      if the tensor decays
//   m  = m + (1 - b1) (g - m)                 (torch's lerp form of b1 m + (1-b1) g)
//   v  = b2 v + (1 - b2) g^2
//   p  = p - lr/(1 - b1^t) * m / (sqrt(v)/sqrt(1 - b2^t) + eps)
// Scalars are formed in double and rounded to fp32 once, as torch does.
//   p_bf16 = bf16(p)
// Fast path: work is cut into chunks of up to 64K elements across all tensors and run in
// parallel; the per-element loop is vectorized (adamw_simd.inc, one copy per SIMD target). With clipping the
// gradients are read twice (norm pass, update pass); without, the norm is accumulated
// during the update pass.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "murphy/adamw.h"
#include "murphy/validate.h"
#include "simd.h"
#include "threads.h"

namespace murphy {
namespace cpu_detail {

struct AdamWScalars {
  float coef, decay_mul, b1, b2, one_minus_b1, one_minus_b2, step_size, bc2_sqrt, eps;
};

}  // namespace cpu_detail
}  // namespace murphy

#define MURPHY_SIMD_BODY "adamw_simd.inc"
#include "simd_multiversion.inc"

namespace murphy {

namespace {

struct Chunk {
  int64_t tensor, begin, end;
};

std::vector<Chunk> make_chunks(const AdamWArgs& a) {
  const int64_t size = 1 << 16;
  std::vector<Chunk> out;
  for (int64_t t = 0; t < a.n_tensors; ++t)
    for (int64_t b = 0; b < a.tensors[t].numel; b += size)
      out.push_back({t, b, std::min(a.tensors[t].numel, b + size)});
  return out;
}

cpu_detail::AdamWScalars scalars(const AdamWArgs& a, double coef, bool decay) {
  const double bc1 = 1.0 - std::pow(a.beta1, double(a.step));
  const double bc2 = 1.0 - std::pow(a.beta2, double(a.step));
  cpu_detail::AdamWScalars k;
  k.coef = float(coef);
  k.decay_mul = decay ? float(1.0 - a.lr * a.weight_decay) : 1.0f;
  k.b1 = float(a.beta1);
  k.b2 = float(a.beta2);
  k.one_minus_b1 = float(1.0 - a.beta1);
  k.one_minus_b2 = float(1.0 - a.beta2);
  k.step_size = float(a.lr / bc1);
  k.bc2_sqrt = float(std::sqrt(bc2));
  k.eps = float(a.eps);
  return k;
}

}  // namespace

AdamWResult adamw_cpu(const AdamWArgs& a) {
  validate_adamw(a);
  const std::vector<Chunk> chunks = make_chunks(a);
  const int64_t nc = int64_t(chunks.size());
  std::vector<double> sq(size_t(nc), 0.0);
  AdamWResult res;
  const bool clip = a.max_grad_norm > 0.0f;
  if (clip) {
    parallel_for(nc, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const Chunk& ch = chunks[size_t(c)];
        const AdamWTensor& x = a.tensors[ch.tensor];
        const int64_t n = ch.end - ch.begin;
        sq[size_t(c)] = x.grad_dtype == DType::F32
                            ? MURPHY_SIMD_CALL(sumsq_f32, static_cast<const float*>(x.grad) + ch.begin, n)
                            : MURPHY_SIMD_CALL(sumsq_bf16, static_cast<const uint16_t*>(x.grad) + ch.begin, n);
      }
    });
    double total = 0;
    for (double s : sq) total += s;
    res.grad_norm = std::sqrt(total);
    if (!std::isfinite(res.grad_norm)) {
      res.skipped = true;
      res.clip_coef = 0;
      return res;
    }
    res.clip_coef = std::min(1.0, double(a.max_grad_norm) / (res.grad_norm + 1e-6));
  }
  parallel_for(nc, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const Chunk& ch = chunks[size_t(c)];
      const AdamWTensor& x = a.tensors[ch.tensor];
      const int64_t n = ch.end - ch.begin, o = ch.begin;
      const cpu_detail::AdamWScalars k = scalars(a, res.clip_coef, x.decay);
      // stochastic rounding writes the bf16 copy itself, below
      uint16_t* pb = (x.param_bf16 && !a.stochastic_rounding) ? x.param_bf16 + o : nullptr;
      const float ss = x.grad_dtype == DType::F32
                           ? MURPHY_SIMD_CALL(update_f32, static_cast<const float*>(x.grad) + o, x.param + o, x.m + o,
                                                    x.v + o, pb, n, k)
                           : MURPHY_SIMD_CALL(update_bf16, static_cast<const uint16_t*>(x.grad) + o, x.param + o,
                                                     x.m + o, x.v + o, pb, n, k);
      if (!clip) sq[size_t(c)] = ss;
      if (x.param_bf16 && a.stochastic_rounding) {
        const uint64_t seed = a.seed ^ (uint64_t(ch.tensor) * 0x9E3779B97F4A7C15ull);
        for (int64_t i = o; i < ch.end; ++i)
          x.param_bf16[i] = f32_to_bf16_stochastic(x.param[i], hash_u32(seed, uint64_t(i)));
      }
    }
  });
  if (!clip) {
    double total = 0;
    for (double s : sq) total += s;
    res.grad_norm = std::sqrt(total);
  }
  return res;
}

}  // namespace murphy
