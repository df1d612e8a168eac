// Kernel family 1: batched log-prob gathering (forward) and its gradient.
//
//   z' = z / T                         (logits over temperature)
//   lse[n]   = log sum_j exp(z'[n, j])
//   logp[n]  = z'[n, y_n] - lse[n]
//   H[n]     = lse[n] - sum_j softmax(z'[n])_j * z'[n, j]     (optional entropy)
//   dlogits[n, j] = g[n] * (1[j = y_n] - softmax(z'[n])_j) / T
//
// The probabilities are never stored: forward keeps only lse per row, and the
// backward recomputes softmax from the logits and lse on the fly (as llm.c's
// fused classifier does). Entries equal to -inf contribute zero probability.
// A fully masked row (all -inf) gets lse = logp = -inf, entropy 0 and a zero
// gradient row. NaN anywhere in a row is reported as an error, as is a target
// id outside [0, vocab).
#pragma once
#include "common.h"

namespace murphy {

struct LogprobForwardArgs {
  const void* logits = nullptr;  // [n_rows, vocab], dtype below, row-major, contiguous
  DType dtype = DType::F32;
  int64_t n_rows = 0;
  int64_t vocab = 0;
  const int32_t* targets = nullptr;  // [n_rows]
  float temperature = 1.0f;          // > 0
  float* logp = nullptr;             // [n_rows] out
  float* lse = nullptr;              // [n_rows] out: logsumexp(z / T), needed by backward
  float* entropy = nullptr;          // [n_rows] out, optional (nullptr: not computed)
};

struct LogprobBackwardArgs {
  const void* logits = nullptr;  // [n_rows, vocab]
  DType dtype = DType::F32;
  int64_t n_rows = 0;
  int64_t vocab = 0;
  const int32_t* targets = nullptr;  // [n_rows]
  float temperature = 1.0f;
  const float* lse = nullptr;        // [n_rows] from the forward pass
  const float* grad_logp = nullptr;  // [n_rows]: dL/dlogp
  void* grad_logits = nullptr;       // [n_rows, vocab] out, same dtype as logits; on the CPU it
                                     // may be `logits` itself (in place), no other overlap
};

void logprob_forward_cpu(const LogprobForwardArgs& a);
void logprob_backward_cpu(const LogprobBackwardArgs& a);
#ifdef MURPHY_WITH_CUDA
void logprob_forward_cuda(const LogprobForwardArgs& a);
void logprob_backward_cuda(const LogprobBackwardArgs& a);
#endif

}  // namespace murphy
