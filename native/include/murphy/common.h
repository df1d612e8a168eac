// Shared by the CPU and CUDA kernels: element types, bf16 rounding, errors.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__CUDACC__)
#define MURPHY_HD __host__ __device__ __forceinline__
#else
#define MURPHY_HD inline
#endif

namespace murphy {

// Element type of a tensor. bf16 values travel as raw uint16 bit patterns.
enum class DType : int32_t { F32 = 0, BF16 = 1 };

inline size_t dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }
inline const char* dtype_name(DType d) { return d == DType::F32 ? "f32" : "bf16"; }

// Where a tensor's memory lives; the dispatch point picks the kernel by this.
enum class Device : int32_t { Host = 0, Cuda = 1 };

// What went wrong, as the `code` of the JavaScript MurphyNativeError (lib/native/errors.ts):
// EINVAL bad argument, ENOMEM allocation failed, ECUDA a CUDA call failed, ENOLIB a library
// or backend is not built in, EBUSY the engine runs another call, EIO a file read/write failed.
enum class ErrorCode : int32_t { Inval = 0, NoMem, Cuda, NoLib, Busy, Io, NotSup };

inline const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::NoMem: return "ENOMEM";
    case ErrorCode::Cuda: return "ECUDA";
    case ErrorCode::NoLib: return "ENOLIB";
    case ErrorCode::Busy: return "EBUSY";
    case ErrorCode::Io: return "EIO";
    case ErrorCode::NotSup: return "ENOTSUP";
    default: return "EINVAL";
  }
}

// Any invalid input or failed device call. The addon turns it into a MurphyNativeError
// whose message names the problem and the fix, and whose code is `code`.
struct Error : std::runtime_error {
  explicit Error(const std::string& what, ErrorCode c = ErrorCode::Inval) : std::runtime_error(what), code(c) {}
  ErrorCode code;
};

// bf16 -> f32 is exact: the bf16 bits are the high half of the f32 bits.
MURPHY_HD float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// f32 -> bf16, round to nearest, ties to even; NaN stays a (quiet) NaN.
MURPHY_HD uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// f32 -> bf16 with stochastic rounding: add 16 random low bits, truncate.
// E[result] = f (unbiased); `rnd` supplies the random bits.
MURPHY_HD uint16_t f32_to_bf16_stochastic(float f, uint32_t rnd) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) >= 0x7f800000u) return f32_to_bf16(f);  // inf / NaN unchanged
  uint32_t r = u + (rnd & 0xffffu);
  // do not round a finite value up into infinity
  if ((r & 0x7f800000u) == 0x7f800000u) r = u;
  return uint16_t(r >> 16);
}

// A small counter-based hash (splitmix64) for reproducible random bits:
// the same (seed, index) always gives the same bits on CPU and GPU.
MURPHY_HD uint32_t hash_u32(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return uint32_t(z >> 32);
}

}  // namespace murphy
