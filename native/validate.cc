// Argument checks shared by the CPU and CUDA kernels (see murphy/validate.h).
#include "murphy/validate.h"

#include <cmath>
#include <string>

namespace murphy {

void validate_adamw(const AdamWArgs& a) {
  auto bad = [](const std::string& what) { throw Error("adamw: " + what); };
  if (a.n_tensors < 0 || (a.n_tensors > 0 && !a.tensors)) bad("tensors are required");
  if (!(a.lr >= 0.0) || !std::isfinite(a.lr)) bad("lr must be a finite number >= 0, got " + std::to_string(a.lr));
  if (!(a.beta1 >= 0.0f && a.beta1 < 1.0f)) bad("beta1 must be in [0, 1), got " + std::to_string(a.beta1));
  if (!(a.beta2 >= 0.0f && a.beta2 < 1.0f)) bad("beta2 must be in [0, 1), got " + std::to_string(a.beta2));
  if (!(a.eps > 0.0f)) bad("eps must be > 0, got " + std::to_string(a.eps));
  if (!(a.weight_decay >= 0.0f) || !std::isfinite(a.weight_decay)) bad("weightDecay must be a finite number >= 0");
  if (a.step < 1) bad("step must be >= 1 (the 1-based index of the step being taken), got " + std::to_string(a.step));
  if (!std::isfinite(a.max_grad_norm)) bad("maxGradNorm must be finite (<= 0 disables clipping)");
  for (int64_t t = 0; t < a.n_tensors; ++t) {
    const AdamWTensor& x = a.tensors[t];
    if (x.numel < 0) bad("tensor " + std::to_string(t) + " has a negative size");
    if (x.numel > 0 && (!x.param || !x.grad || !x.m || !x.v))
      bad("tensor " + std::to_string(t) + " needs param, grad, m and v");
  }
}


void validate_grpo(const GrpoLossArgs& a, const int64_t* offsets) {
  if (a.n_tokens < 0) throw Error("grpoLoss: the number of tokens must be >= 0");
  if (a.n_tokens > 0 && (!a.logp || !a.old_logp || !a.advantages))
    throw Error("grpoLoss: logp, oldLogp and advantages are required");
  if (a.beta != 0.0f && !a.ref_logp)
    throw Error("grpoLoss: beta = " + std::to_string(a.beta) + " needs refLogp (reference log-probs); pass them or set beta to 0");
  if (!(a.eps_low >= 0.0f) || !(a.eps_low < 1.0f))
    throw Error("grpoLoss: epsLow must be in [0, 1), got " + std::to_string(a.eps_low));
  if (!(a.eps_high >= 0.0f) || !std::isfinite(a.eps_high))
    throw Error("grpoLoss: epsHigh must be a finite number >= 0, got " + std::to_string(a.eps_high));
  if (a.dual_clip != 0.0f && !(a.dual_clip > 1.0f))
    throw Error("grpoLoss: dualClip must be > 1 (or 0 to disable), got " + std::to_string(a.dual_clip));
  if (!std::isfinite(a.beta)) throw Error("grpoLoss: beta must be finite");
  if (a.n_seqs < 1 || !offsets)
    throw Error("grpoLoss: seqOffsets must hold at least [0, nTokens] (one sequence)");
  if (offsets[0] != 0 || offsets[a.n_seqs] != a.n_tokens)
    throw Error("grpoLoss: seqOffsets must start at 0 and end at nTokens = " + std::to_string(a.n_tokens) +
                " (got " + std::to_string(offsets[0]) + " .. " + std::to_string(offsets[a.n_seqs]) + ")");
  for (int64_t s = 0; s < a.n_seqs; ++s)
    if (offsets[s + 1] < offsets[s])
      throw Error("grpoLoss: seqOffsets must be non-decreasing; offset " + std::to_string(s + 1) + " < offset " +
                  std::to_string(s));
  if (a.agg == LossAgg::ConstNorm && !(a.norm_length > 0.0f))
    throw Error("grpoLoss: lossType 'dr_grpo' needs normLength > 0 (the max completion length)");
}

}  // namespace murphy
