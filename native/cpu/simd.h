// Run-time SIMD dispatch for the CPU kernels.
//
// The package is compiled for the portable x86-64 baseline; one binary runs on any x86-64
// Linux. One mechanism gives the hot loops AVX-512 or AVX2 code where the CPU has it: each
// file's vectorized loops live in a `<file>_simd.inc`, which simd_multiversion.inc compiles
// three times under `#pragma GCC target` (AVX-512, AVX2+FMA, baseline), and the file calls
// them through MURPHY_SIMD_CALL, which picks the copy for this CPU. The loops are plain C++
// the auto-vectorizer handles (`#pragma omp simd`) or explicit vectors (GCC vector
// extensions, simd_ops.inc, W lanes per target). (GCC's target_clones, used before for the
// plain loops, cannot clone explicit generic vectors: it lowers them for the baseline first.)
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace murphy {

// "avx512", "avx2", or "baseline" (the copy MURPHY_SIMD_CALL runs), plus the name
// of any other notable feature, for `murphy-native doctor`.
const char* cpu_simd_level();

// 2 = AVX-512 (x86-64-v4), 1 = AVX2+FMA (x86-64-v3), 0 = baseline; read once.
int simd_level_index();

// Calls the copy of `fn` compiled for this CPU (see simd_multiversion.inc).
#define MURPHY_SIMD_CALL(fn, ...)                                      \
  (::murphy::simd_level_index() == 2   ? ::murphy::cpu_v4::fn(__VA_ARGS__) \
   : ::murphy::simd_level_index() == 1 ? ::murphy::cpu_v3::fn(__VA_ARGS__) \
                                       : ::murphy::cpu_base::fn(__VA_ARGS__))
bool cpu_has_avx512_bf16();
// The CPU has AMX with bf16 tiles (CPUID: AMX-TILE and AMX-BF16), whatever the OS allows.
// False where cpu_has_avx512_bf16() is.
bool cpu_has_amx_bf16_hardware();
// AMX bf16 tiles that this process may use: the CPU has them, the OS saves their state (XCR0)
// and grants it to this process (Linux 5.16+: arch_prctl ARCH_REQ_XCOMP_PERM, asked once here),
// and MURPHY_AMX is not 0 (which makes the process behave as on a kernel that refuses them).
bool cpu_has_amx_bf16();

// exp(x) for vector loops: Cephes' range reduction and degree-6 polynomial,
// written with arithmetic and bit operations only so that it vectorizes.
// Relative error < 1e-7 over [-87, 88.7] (measured against double exp); returns 0 for
// x < -87 (and for -inf), +inf beyond 88.72 (where float exp overflows), NaN for NaN.
inline __attribute__((always_inline)) float vexp(float x) {
  const bool under = x < -87.0f;
  float xc = x > 88.3762626647949f ? 88.3762626647949f : x;
  xc = xc < -87.0f ? -87.0f : xc;
  xc = x != x ? 0.0f : xc;  // (NaN returns NaN below; 0 keeps the exponent arithmetic defined)
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
