#include "simd.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

bool cpu_has_amx_bf16_hardware() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = [] {
    if (!cpu_has_avx512_bf16()) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (d & (1u << 22)) && (d & (1u << 24));  // CPUID.(7,0):EDX AMX-BF16, AMX-TILE
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_amx_bf16() {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  static const bool has = [] {
    if (!cpu_has_amx_bf16_hardware()) return false;
    const char* off = std::getenv("MURPHY_AMX");
    if (off && std::strcmp(off, "0") == 0) return false;
    unsigned lo = 0, hi = 0;  // (OSXSAVE is implied: AVX-512 was found usable)
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0x60000u) != 0x60000u) return false;  // XCR0 bits 17, 18: XTILECFG, XTILEDATA
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // (asm/prctl.h, Linux 5.16+)
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace murphy
