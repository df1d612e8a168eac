// The one dispatch point: CPU or CUDA by where the data lives (see dispatch.h).
#include "murphy/dispatch.h"

namespace murphy {
#ifndef MURPHY_WITH_CUDA
namespace {
[[noreturn]] void no_cuda() {
  throw Error(
      "this murphy-native binary was built without CUDA, so device arrays cannot be used; "
      "build the CUDA addon with `npm run build:cuda` (needs nvcc) or install a CUDA-enabled prebuild",
      ErrorCode::NoLib);
}
}  // namespace
#endif

#ifdef MURPHY_WITH_CUDA
#define MURPHY_ON_DEVICE(cpu_call, cuda_call) \
  if (d == Device::Cuda) return cuda_call;    \
  return cpu_call;
bool built_with_cuda() { return true; }
#else
#define MURPHY_ON_DEVICE(cpu_call, cuda_call) \
  if (d == Device::Cuda) no_cuda();           \
  return cpu_call;
bool built_with_cuda() { return false; }
#endif

void logprob_forward(const LogprobForwardArgs& a, Device d) {
  MURPHY_ON_DEVICE(logprob_forward_cpu(a), logprob_forward_cuda(a))
}
void logprob_backward(const LogprobBackwardArgs& a, Device d) {
  MURPHY_ON_DEVICE(logprob_backward_cpu(a), logprob_backward_cuda(a))
}
GrpoLossStats grpo_loss(const GrpoLossArgs& a, Device d) { MURPHY_ON_DEVICE(grpo_loss_cpu(a), grpo_loss_cuda(a)) }
AdamWResult adamw(const AdamWArgs& a, Device d) { MURPHY_ON_DEVICE(adamw_cpu(a), adamw_cuda(a)) }
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n, Device d) {
  MURPHY_ON_DEVICE(f32_to_bf16_cpu(src, dst, n), f32_to_bf16_cuda(src, dst, n))
}
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n, Device d) {
  MURPHY_ON_DEVICE(bf16_to_f32_cpu(src, dst, n), bf16_to_f32_cuda(src, dst, n))
}
void copy(const void* src, void* dst, int64_t bytes, Device d) {
  MURPHY_ON_DEVICE(copy_cpu(src, dst, bytes), copy_cuda(src, dst, bytes))
}

}  // namespace murphy
