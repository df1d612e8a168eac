// The one dispatch point: each kernel family runs on the CPU or the GPU depending on
// where its tensors live. The addon resolves every argument to a pointer plus a
// Device, checks that all of a call's tensors agree, and calls these.
#pragma once
#include "adamw.h"
#include "convert.h"
#include "grpo_loss.h"
#include "logprob.h"

namespace murphy {

void logprob_forward(const LogprobForwardArgs& a, Device d);
void logprob_backward(const LogprobBackwardArgs& a, Device d);
GrpoLossStats grpo_loss(const GrpoLossArgs& a, Device d);
AdamWResult adamw(const AdamWArgs& a, Device d);
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n, Device d);
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n, Device d);
void copy(const void* src, void* dst, int64_t bytes, Device d);

bool built_with_cuda();

}  // namespace murphy
