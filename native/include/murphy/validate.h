// Argument checks shared by the CPU and CUDA kernels (native/validate.cc): one place for the
// rules and their error messages, whichever device runs the kernel.
#pragma once
#include "adamw.h"
#include "grpo_loss.h"
#include "logprob.h"

namespace murphy {

// Throws Error naming the bad hyper-parameter or tensor.
void validate_adamw(const AdamWArgs& a);

// Throws Error naming the bad parameter. `offsets` is a host copy of a.seq_offsets (the CPU
// passes a.seq_offsets itself; the CUDA path copies them from the device first).
void validate_grpo(const GrpoLossArgs& a, const int64_t* offsets);

// The log-prob backward's output may be its input itself (in place, on the CPU: every element
// is read before it is written) or apart from it; a partial overlap is refused.
void validate_logprob_backward_alias(const LogprobBackwardArgs& a);

}  // namespace murphy
