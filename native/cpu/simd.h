// Run-time SIMD dispatch for the CPU kernels.
//
// The package is compiled for the portable x86-64 baseline. Hot loops are written
// as plain vectorizable C++ and marked MURPHY_SIMD_CLONES: GCC then emits one copy
// per target (AVX-512, AVX2+FMA, baseline) and picks the right one when the library
// loads (an ifunc resolver reading cpuid). One binary runs on any x86-64 Linux.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define MURPHY_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MURPHY_SIMD_CLONES
#endif

namespace murphy {

// "avx512", "avx2", or "baseline" (what the clones above will run), plus the name
// of any other notable feature, for `murphy-native doctor`.
const char* cpu_simd_level();
bool cpu_has_avx512_bf16();

// exp(x) for vector loops: Cephes' range reduction and degree-6 polynomial,
// written with arithmetic and bit operations only so that it vectorizes.
// Relative error < 1e-7 over [-87, 88.7] (measured against double exp); returns 0 for
// x < -87 (and for -inf), +inf beyond 88.72 (where float exp overflows), NaN for NaN.
inline __attribute__((always_inline)) float vexp(float x) {
  const bool under = x < -87.0f;
  float xc = x > 88.3762626647949f ? 88.3762626647949f : x;
  xc = xc < -87.0f ? -87.0f : xc;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float k = (xc * 1.44269504088896341f + magic) - magic;
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  int32_t bits = (int32_t(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  y = y * scale;
  y = (x != x) ? x : y;
  y = x > 88.7228f ? __builtin_inff() : y;
  return under ? 0.0f : y;
}

inline __attribute__((always_inline)) float bf16_bits_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace murphy
