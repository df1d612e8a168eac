#include "simd.h"

#include <cstdlib>
#include <cstring>

namespace murphy {

const char* cpu_simd_level() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const char* const names[] = {"baseline", "avx2", "avx512"};
  return names[simd_level_index()];
#else
  return "portable";
#endif
}

// The CPU's level, lowered by MURPHY_SIMD=avx2|baseline (tests run every copy on one machine);
// a level above the CPU's, or another value, is ignored.
int simd_level_index() {
  static const int level = [] {
    int cpu = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) cpu = 2;
    else if (__builtin_cpu_supports("x86-64-v3")) cpu = 1;
#endif
    const char* want = std::getenv("MURPHY_SIMD");
    if (want && std::strcmp(want, "baseline") == 0) return 0;
    if (want && std::strcmp(want, "avx2") == 0 && cpu >= 1) return 1;
    return cpu;
  }();
  return level;
}

// False as well where MURPHY_SIMD lowers the level: avx512 means AVX-512 without its BF16
// extension (so that tests run those paths too on a CPU that has it), avx2 and baseline below.
bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = [] {
    __builtin_cpu_init();
    const char* want = std::getenv("MURPHY_SIMD");
    if (simd_level_index() < 2 || (want && std::strcmp(want, "avx512") == 0)) return false;
    return bool(__builtin_cpu_supports("avx512bf16"));
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace murphy
