// Kernel family 4: support. bf16 <-> f32 conversion (round to nearest even) and a
// plain copy, which the benchmarks use as the bandwidth probe.
#pragma once
#include "common.h"

namespace murphy {

void f32_to_bf16_cpu(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_cpu(const uint16_t* src, float* dst, int64_t n);
void copy_cpu(const void* src, void* dst, int64_t bytes);
#ifdef MURPHY_WITH_CUDA
void f32_to_bf16_cuda(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_cuda(const uint16_t* src, float* dst, int64_t n);
void copy_cuda(const void* src, void* dst, int64_t bytes);
#endif

}  // namespace murphy
