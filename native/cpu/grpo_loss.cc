// Kernel family 2 on the CPU: clipped GRPO surrogate with KL, per token.
// Formulas and aggregation modes: see native/include/murphy/grpo_loss.h.
//
// Per active token (mask 1), with w_t the aggregation weight of its sequence:
//   r     = exp(logp - old)
//   u     = -r A                       (unclipped)      du/dlogp = -r A
//   c     = -clip(r, 1-el, 1+eh) A     (clipped)        dc/dlogp = 0 outside the range
//   pg    = max(u, c)                  ( = -min(rA, clip(r)A) as in TRL / PPO )
//   if dual clip and A < 0: pg = min(pg, -c_dual A)     (verl's clip_ratio_c; gradient 0 there)
//   kl    = exp(ref - logp) - (ref - logp) - 1       dkl/dlogp = 1 - exp(ref - logp)
//   l     = pg + beta kl,   L = sum_t w_t l_t,   dL/dlogp_t = w_t (dpg + beta dkl)
// Weights: TokenMean w = 1/max(1, N_active); SeqMean w = 1/(S max(1, n_s));
// ConstNorm w = 1/(S L).  These match TRL's GRPOTrainer loss_type "dapo", "grpo" and
// "dr_grpo" (including the clamp(min=1) on the token counts).
// Fast path: one branch-free vectorized pass over runs of tokens with a common weight,
// parallel in chunks of 64K tokens, fp32 sums per run and fp64 across runs.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "murphy/grpo_loss.h"
#include "murphy/validate.h"
#include "simd.h"
#include "threads.h"

namespace murphy {
namespace {


struct Partial {
  double loss = 0, ratio = 0, kl = 0;
  int64_t low = 0, high = 0, dual = 0, active = 0, bad = 0;
};

}  // namespace

namespace cpu_detail {

struct SegParams {
  float lo, hi, dual_c, beta, w;
  bool dual;
};

struct SegSums {
  float loss, ratio, kl;
  int32_t low, high, dual, active, bad;
};

// One token of a run (scalar; also the reference for the vector body below).
template <bool kRef>
inline __attribute__((always_inline)) void token(int64_t t, const float* logp, const float* old, const float* ref, const float* adv,
                         const uint8_t* mask, const SegParams& q, float* grad, float* tok, SegSums& acc) {
  const bool on = !mask || mask[t] != 0;
  const float A = adv[t], lp = logp[t];
  const float r = vexp(lp - old[t]);
  float rc = r < q.lo ? q.lo : r;
  rc = rc > q.hi ? q.hi : rc;
  const float u = -r * A, cl = -rc * A;
  const bool take_u = u >= cl;
  float pg = take_u ? u : cl;
  float dpg = (take_u || (r > q.lo && r < q.hi)) ? -r * A : 0.0f;
  const float bound = -q.dual_c * A;
  const bool is_dual = q.dual && A < 0.0f && bound < pg;
  pg = is_dual ? bound : pg;
  dpg = is_dual ? 0.0f : dpg;
  float kl = 0.0f, dkl = 0.0f;
  if (kRef) {
    const float d = ref[t] - lp;
    const float ed = vexp(d);
    kl = ed - d - 1.0f;
    dkl = 1.0f - ed;
  }
  const float l = pg + q.beta * kl;
  // false for NaN and +-inf in the loss or the ratio (an infinite ratio times a zero
  // advantage would otherwise hide behind the clipped branch)
  const bool finite = (l - l) == 0.0f && (r - r) == 0.0f;
  if (grad) grad[t] = on ? q.w * (dpg + q.beta * dkl) : 0.0f;
  if (tok) tok[t] = on ? l : 0.0f;
  if (!on) return;
  acc.loss += l;
  acc.ratio += r;
  acc.kl += kl;
  acc.low += (A < 0.0f && r < q.lo);
  acc.high += (A > 0.0f && r > q.hi);
  acc.dual += is_dual;
  acc.active += 1;
  acc.bad += !finite;
}

// A run of tokens sharing the aggregation weight w (inside one sequence, or any run for the
// modes whose weight is global): the token() formulas on 16 lanes, branch-free, fp32 sums.
}  // namespace cpu_detail
}  // namespace murphy

#define MURPHY_SIMD_BODY "grpo_simd.inc"
#include "simd_multiversion.inc"

namespace murphy {

GrpoLossStats grpo_loss_cpu(const GrpoLossArgs& a) {
  validate_grpo(a, a.seq_offsets);
  const int64_t S = a.n_seqs;
  // Per-sequence active-token counts (SeqMean) and the global count (TokenMean).
  std::vector<int64_t> seq_active(size_t(S), 0);
  int64_t total_active = 0;
  for (int64_t s = 0; s < S; ++s) {
    int64_t c = 0;
    if (a.mask) {
      for (int64_t t = a.seq_offsets[s]; t < a.seq_offsets[s + 1]; ++t) c += a.mask[t] != 0;
    } else {
      c = a.seq_offsets[s + 1] - a.seq_offsets[s];
    }
    seq_active[size_t(s)] = c;
    total_active += c;
  }
  const double token_w = 1.0 / double(std::max<int64_t>(1, total_active));
  const double const_w = a.agg == LossAgg::ConstNorm ? 1.0 / (double(S) * double(a.norm_length)) : 0.0;
  cpu_detail::SegParams q{1.0f - a.eps_low, 1.0f + a.eps_high, a.dual_clip, a.beta, 0.0f, a.dual_clip > 1.0f};

  const int64_t chunk = 1 << 16;
  const int64_t n_chunks = (a.n_tokens + chunk - 1) / chunk;
  std::vector<Partial> parts(size_t(std::max<int64_t>(1, n_chunks)));
  parallel_for(n_chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      Partial p;
      const int64_t t0 = c * chunk, t1 = std::min(a.n_tokens, t0 + chunk);
      // the sequence holding t0: the last s with offsets[s] <= t0
      int64_t s = int64_t(std::upper_bound(a.seq_offsets, a.seq_offsets + S + 1, t0) - a.seq_offsets) - 1;
      int64_t t = t0;
      while (t < t1) {
        // SeqMean's weight changes at sequence boundaries; the other modes use one run
        int64_t end = t1;
        cpu_detail::SegParams qs = q;
        if (a.agg == LossAgg::SeqMean) {
          while (a.seq_offsets[s + 1] <= t) ++s;
          end = std::min(t1, a.seq_offsets[s + 1]);
          qs.w = float(1.0 / (double(S) * double(std::max<int64_t>(1, seq_active[size_t(s)]))));
        } else {
          qs.w = float(a.agg == LossAgg::TokenMean ? token_w : const_w);
        }
        const uint8_t* mk = a.mask ? a.mask + t : nullptr;
        float* g = a.grad_logp ? a.grad_logp + t : nullptr;
        float* tk = a.token_loss ? a.token_loss + t : nullptr;
        cpu_detail::SegSums r =
            a.ref_logp ? MURPHY_SIMD_CALL(segment_ref, a.logp + t, a.old_logp + t, a.ref_logp + t, a.advantages + t,
                                          mk, end - t, qs, g, tk)
                       : MURPHY_SIMD_CALL(segment_noref, a.logp + t, a.old_logp + t, a.advantages + t, mk, end - t, qs,
                                          g, tk);
        p.loss += double(qs.w) * double(r.loss);
        p.ratio += r.ratio;
        p.kl += r.kl;
        p.low += r.low;
        p.high += r.high;
        p.dual += r.dual;
        p.active += r.active;
        p.bad += r.bad;
        t = end;
      }
      parts[size_t(c)] = p;
    }
  });

  Partial tot;
  for (const Partial& p : parts) {
    tot.loss += p.loss;
    tot.ratio += p.ratio;
    tot.kl += p.kl;
    tot.low += p.low;
    tot.high += p.high;
    tot.dual += p.dual;
    tot.active += p.active;
    tot.bad += p.bad;
  }
  if (tot.bad > 0) {
    int64_t t = 0;  // find the first offending token for the message
    for (; t < a.n_tokens; ++t) {
      if (a.mask && !a.mask[t]) continue;
      const float vals[4] = {a.logp[t], a.old_logp[t], a.advantages[t], a.ref_logp ? a.ref_logp[t] : 0.0f};
      if (!std::isfinite(vals[0]) || !std::isfinite(vals[1]) || !std::isfinite(vals[2]) || !std::isfinite(vals[3])) break;
    }
    if (t == a.n_tokens) t = 0;
    throw_grpo_nonfinite(t, a.logp[t], a.old_logp[t], a.advantages[t], a.ref_logp ? a.ref_logp + t : nullptr);
  }
  return grpo_stats_from_sums(tot.loss, tot.ratio, tot.kl, tot.low, tot.high, tot.dual, tot.active);
}

}  // namespace murphy
