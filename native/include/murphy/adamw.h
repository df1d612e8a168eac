// Kernel family 3: fused AdamW over many tensors in one call.
//
// Matches torch.optim.AdamW (decoupled weight decay) preceded by
// torch.nn.utils.clip_grad_norm_:
//   norm  = sqrt(sum over all tensors of g^2)                 (one global reduction)
//   coef  = min(1, max_norm / (norm + 1e-6))  if max_norm > 0 else 1
//   g'    = coef * g
//   p     = p * (1 - lr * wd)                                 (tensors with decay only)
//   m     = b1 m + (1 - b1) g'
//   v     = b2 v + (1 - b2) g'^2
//   p     = p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// (m is updated in torch's lerp form m + (1 - b1)(g - m), which equals b1 m + (1 - b1) g.)
//   p_bf16 = round(p)    (nearest-even, or stochastic with a seed)
// fp32 master weights and moments; gradients fp32 or bf16.
#pragma once
#include "common.h"

namespace murphy {

struct AdamWTensor {
  float* param = nullptr;        // [numel] fp32 master weights, updated in place
  const void* grad = nullptr;    // [numel] fp32 or bf16
  DType grad_dtype = DType::F32;
  float* m = nullptr;            // [numel] first moment
  float* v = nullptr;            // [numel] second moment
  uint16_t* param_bf16 = nullptr;  // [numel] optional bf16 copy written in the same pass
  int64_t numel = 0;
  bool decay = true;             // apply weight decay to this tensor
};

struct AdamWArgs {
  const AdamWTensor* tensors = nullptr;
  int64_t n_tensors = 0;
  // Hyper-parameters in double, as PyTorch keeps them in Python floats: the derived
  // scalars (1 - beta, lr / (1 - beta1^t), 1 - lr wd) are formed in double, then rounded
  // to fp32 once, exactly as torch does before its fp32 tensor ops.
  // Defaults and ranges live in lib/native/options.ts; the binding sets every field.
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  int64_t step = 1;              // t, 1-based, the step being taken
  float max_grad_norm = 0.0f;    // 0: no clipping
  bool stochastic_rounding = false;
  uint64_t seed = 0;             // for stochastic rounding: hash(seed, tensor, index)
};

struct AdamWResult {
  double grad_norm = 0;  // global L2 norm before clipping
  double clip_coef = 1;  // the factor the gradients were scaled by
  bool skipped = false;  // true when the norm was not finite: nothing was updated
};

// With max_grad_norm > 0 a non-finite norm skips the step (parameters unchanged,
// skipped = true). Without clipping the norm is accumulated in the same pass as the
// update, so a non-finite gradient is reported but has already been applied.
AdamWResult adamw_cpu(const AdamWArgs& a);
#ifdef MURPHY_WITH_CUDA
AdamWResult adamw_cuda(const AdamWArgs& a);
#endif

}  // namespace murphy
