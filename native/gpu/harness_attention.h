// The inputs of an attention harness case (harness_attention.cc), shared by the CPU harness
// run and the GPU run of the same case (cuda_ops.cu), so that both see the same numbers.
#pragma once
#include <vector>

#include "attention.h"
#include "harness_ops.h"

namespace murphy {
namespace gpu {

struct AttnCaseInputs {
  AttnPlan plan;
  // Rounded to the case's storage type once and widened back: what both sides compute from.
  std::vector<float> q, k, v, dout;
  // The CPU op's forward on those inputs: o rounded to the storage type (the backward's
  // input), o_ref unrounded (the forward's reference), lse f32.
  std::vector<float> o, o_ref, lse;
};

// Checks the case (sizes, offsets, fault) and prepares its inputs; dout only for attention_backward.
AttnCaseInputs attention_case_inputs(const HarnessCase& c);

}  // namespace gpu
}  // namespace murphy
