// Kernel family 4 on the CPU: bf16 <-> f32 conversion and a plain copy.
//   bf16 -> f32: exact (the bf16 bits are the high half of the f32 bits)
//   f32 -> bf16: round to nearest, ties to even; NaN stays NaN
// Fast path: vectorized loops, parallel in 1M-element chunks.
#include <cstring>

#include "murphy/convert.h"
#include "simd.h"
#include "threads.h"

#define MURPHY_SIMD_BODY "convert_simd.inc"
#include "simd_multiversion.inc"

namespace murphy {
namespace {
constexpr int64_t kChunk = 1 << 20;
}

void f32_to_bf16_cpu(const float* src, uint16_t* dst, int64_t n) {
  parallel_for(n, kChunk, [&](int64_t b, int64_t e) { MURPHY_SIMD_CALL(to_bf16, src + b, dst + b, e - b); });
}

void bf16_to_f32_cpu(const uint16_t* src, float* dst, int64_t n) {
  parallel_for(n, kChunk, [&](int64_t b, int64_t e) { MURPHY_SIMD_CALL(from_bf16, src + b, dst + b, e - b); });
}

void copy_cpu(const void* src, void* dst, int64_t bytes) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  parallel_for(bytes, 4 * kChunk, [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, size_t(e - b)); });
}

}  // namespace murphy
