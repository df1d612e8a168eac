// Kernel family 4 on the CPU: bf16 <-> f32 conversion and a plain copy.
//   bf16 -> f32: exact (the bf16 bits are the high half of the f32 bits)
//   f32 -> bf16: round to nearest, ties to even; NaN stays NaN
// Fast path: vectorized loops, parallel in 1M-element chunks.
#include <cstring>

#include "murphy/convert.h"
#include "simd.h"
#include "threads.h"

namespace murphy {
namespace cpu_detail {

MURPHY_SIMD_CLONES void to_bf16(const float* src, uint16_t* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    dst[i] = uint16_t(nan ? ((u >> 16) | 0x40u) : rounded);
  }
}

MURPHY_SIMD_CLONES void from_bf16(const uint16_t* src, float* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_f32(src[i]);
}

}  // namespace cpu_detail

namespace {
constexpr int64_t kChunk = 1 << 20;
}

void f32_to_bf16_cpu(const float* src, uint16_t* dst, int64_t n) {
  parallel_for(n, kChunk, [&](int64_t b, int64_t e) { cpu_detail::to_bf16(src + b, dst + b, e - b); });
}

void bf16_to_f32_cpu(const uint16_t* src, float* dst, int64_t n) {
  parallel_for(n, kChunk, [&](int64_t b, int64_t e) { cpu_detail::from_bf16(src + b, dst + b, e - b); });
}

void copy_cpu(const void* src, void* dst, int64_t bytes) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  parallel_for(bytes, 4 * kChunk, [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, size_t(e - b)); });
}

}  // namespace murphy
