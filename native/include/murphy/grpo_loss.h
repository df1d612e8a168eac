// Kernel family 2: the clipped GRPO surrogate with optional KL, per token.
//
// For every token t with mask m_t = 1:
//   ratio_t = exp(logp_t - old_t)
//   pg_t    = -min(ratio_t * A_t, clip(ratio_t, 1 - eps_low, 1 + eps_high) * A_t)
//   dual clip (c > 1, only where A_t < 0):  pg_t = min(pg_t, -c * A_t)
//   kl_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1           (k3 estimator)
//   l_t     = pg_t + beta * kl_t
// Aggregation over the batch (TRL's loss_type names):
//   TokenMean ("dapo", default): L = sum_t m_t l_t / sum_t m_t
//   SeqMean   ("grpo"):          L = (1/S) sum_s [ sum_{t in s} m_t l_t / sum_{t in s} m_t ]
//   ConstNorm ("dr_grpo"):       L = sum_t m_t l_t / (S * norm_length)
// Outputs dL/dlogp_t for every token (0 where masked) and statistics. A non-finite loss
// or ratio on an active token (NaN or infinite inputs) is an error naming the token;
// masked tokens are never read for the loss.
#pragma once
#include "common.h"

namespace murphy {

enum class LossAgg : int32_t { TokenMean = 0, SeqMean = 1, ConstNorm = 2 };

struct GrpoLossArgs {
  int64_t n_tokens = 0;
  const float* logp = nullptr;        // [n_tokens] current policy
  const float* old_logp = nullptr;    // [n_tokens] behaviour policy (rollout)
  const float* ref_logp = nullptr;    // [n_tokens] reference policy, optional (needed when beta != 0)
  const float* advantages = nullptr;  // [n_tokens]
  const uint8_t* mask = nullptr;      // [n_tokens], 1 = in loss; nullptr = all tokens
  const int64_t* seq_offsets = nullptr;  // [n_seqs + 1]: sequence s = tokens [off[s], off[s+1])
  int64_t n_seqs = 0;
  // The options: defaults and ranges live in lib/native/options.ts (the binding reads every
  // one as required, so no default is written here).
  float eps_low = 0.0f;
  float eps_high = 0.0f;
  float dual_clip = 0.0f;  // c > 1 enables dual clipping; 0 disables
  float beta = 0.0f;
  LossAgg agg = LossAgg::TokenMean;
  float norm_length = 0.0f;          // ConstNorm only: the constant length (e.g. max completion length)
  float* grad_logp = nullptr;        // [n_tokens] out, optional
  float* token_loss = nullptr;       // [n_tokens] out, optional: l_t (0 where masked)
};

struct GrpoLossStats {
  double loss = 0;            // L
  double clip_low_frac = 0;   // fraction of active tokens with A < 0 and ratio < 1 - eps_low
  double clip_high_frac = 0;  // fraction of active tokens with A > 0 and ratio > 1 + eps_high
  double dual_clip_frac = 0;  // fraction of active tokens where the dual clip bound was taken
  double mean_ratio = 0;      // mean of ratio over active tokens
  double mean_kl = 0;         // mean of kl_t over active tokens (0 when no ref_logp)
  int64_t n_active = 0;       // number of tokens with mask 1
};

// Shared by the CPU and CUDA paths (native/grpo_stats.cc): the statistics from the sums over
// active tokens, and the error for a non-finite loss at token t (with its inputs).
GrpoLossStats grpo_stats_from_sums(double loss, double ratio, double kl, int64_t low, int64_t high, int64_t dual,
                                   int64_t active);
[[noreturn]] void throw_grpo_nonfinite(int64_t t, float logp, float old_logp, float advantage, const float* ref_logp);

GrpoLossStats grpo_loss_cpu(const GrpoLossArgs& a);
#ifdef MURPHY_WITH_CUDA
GrpoLossStats grpo_loss_cuda(const GrpoLossArgs& a);
#endif

}  // namespace murphy
