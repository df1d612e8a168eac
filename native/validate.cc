// Argument checks shared by the CPU and CUDA kernels (see murphy/validate.h): the shape of
// the inputs only. The ranges of the options (lr, betas, clip epsilons, ...) are defined and
// checked once, in TypeScript (lib/native/options.ts), before the addon is called.
#include "murphy/validate.h"

#include <cmath>
#include <string>

namespace murphy {

void validate_adamw(const AdamWArgs& a) {
  auto bad = [](const std::string& what) { throw Error("adamw: " + what); };
  if (a.n_tensors < 0 || (a.n_tensors > 0 && !a.tensors)) bad("tensors are required");
  for (int64_t t = 0; t < a.n_tensors; ++t) {
    const AdamWTensor& x = a.tensors[t];
    if (x.numel < 0) bad("tensor " + std::to_string(t) + " has a negative size");
    if (x.numel > 0 && (!x.param || !x.grad || !x.m || !x.v))
      bad("tensor " + std::to_string(t) + " needs param, grad, m and v");
  }
}


void validate_logprob_backward_alias(const LogprobBackwardArgs& a) {
  if (a.grad_logits == a.logits || a.n_rows == 0) return;
  const size_t bytes = size_t(a.n_rows) * size_t(a.vocab) * dtype_size(a.dtype);
  const char* in = static_cast<const char*>(a.logits);
  const char* out = static_cast<const char*>(a.grad_logits);
  if (in < out + bytes && out < in + bytes)
    throw Error("logprob backward: gradLogits overlaps the logits without being them; pass the logits "
                "themselves (in place) or a separate buffer");
}

void validate_grpo(const GrpoLossArgs& a, const int64_t* offsets) {
  if (a.n_tokens < 0) throw Error("grpoLoss: the number of tokens must be >= 0");
  if (a.n_tokens > 0 && (!a.logp || !a.old_logp || !a.advantages))
    throw Error("grpoLoss: logp, oldLogp and advantages are required");
  // (no tokens: an empty refLogp has no data pointer, and nothing reads it)
  if (a.n_tokens > 0 && a.beta != 0.0f && !a.ref_logp)
    throw Error("grpoLoss: beta = " + std::to_string(a.beta) + " needs refLogp (reference log-probs); pass them or set beta to 0");
  if (a.n_seqs < 1 || !offsets)
    throw Error("grpoLoss: seqOffsets must hold at least [0, nTokens] (one sequence)");
  if (offsets[0] != 0 || offsets[a.n_seqs] != a.n_tokens)
    throw Error("grpoLoss: seqOffsets must start at 0 and end at nTokens = " + std::to_string(a.n_tokens) +
                " (got " + std::to_string(offsets[0]) + " .. " + std::to_string(offsets[a.n_seqs]) + ")");
  for (int64_t s = 0; s < a.n_seqs; ++s)
    if (offsets[s + 1] < offsets[s])
      throw Error("grpoLoss: seqOffsets must be non-decreasing; offset " + std::to_string(s + 1) + " < offset " +
                  std::to_string(s));
}

}  // namespace murphy
