// Kernel family 4 on the GPU: bf16 <-> f32 conversion and a plain copy.
// The CPU reference is native/cpu/convert.cc; formulas are in convert.h / common.h.
//
//   f32_to_bf16: dst[i] = round_nearest_even(src[i])   (NaN stays a quiet NaN)
//   bf16_to_f32: dst[i] = bits(src[i]) << 16           (exact)
//   copy:        dst[0..bytes) = src[0..bytes)         (the bandwidth probe: a kernel, not cudaMemcpy)
//
// All three are bandwidth-bound grid-stride loops over 16-byte vectors, with a scalar
// head/tail where the pointers are not 16-byte aligned.
#include <algorithm>

#include "check.cuh"
#include "murphy/convert.h"

namespace murphy {
using namespace cudadetail;

namespace {

constexpr int kBlock = 256;

int grid_for(int64_t work_items) {
  int64_t g = ceil_div(std::max<int64_t>(work_items, 1), kBlock);
  int64_t cap = int64_t(sm_count()) * 16;
  return int(std::min(g, cap));
}

// dst[i] = RNE(src[i]) for i in [0, n); vector path when src is 16B- and dst 8B-aligned.
__global__ void __launch_bounds__(kBlock) k_f32_to_bf16(const float* __restrict__ src, uint16_t* __restrict__ dst,
                                                      int64_t n, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / 4;
    const float4* s4 = reinterpret_cast<const float4*>(src);
    uint2* d4 = reinterpret_cast<uint2*>(dst);
    for (int64_t i = tid; i < nv; i += stride) {
      float4 f = __ldcs(s4 + i);
      uint2 o;
      o.x = uint32_t(f32_to_bf16(f.x)) | (uint32_t(f32_to_bf16(f.y)) << 16);
      o.y = uint32_t(f32_to_bf16(f.z)) | (uint32_t(f32_to_bf16(f.w)) << 16);
      __stcs(d4 + i, o);
    }
    done = nv * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) dst[i] = f32_to_bf16(src[i]);
}

// dst[i] = f32(src[i]); vector path when src is 8B- and dst 16B-aligned.
__global__ void __launch_bounds__(kBlock) k_bf16_to_f32(const uint16_t* __restrict__ src, float* __restrict__ dst,
                                                      int64_t n, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / 4;
    const uint2* s4 = reinterpret_cast<const uint2*>(src);
    float4* d4 = reinterpret_cast<float4*>(dst);
    for (int64_t i = tid; i < nv; i += stride) {
      uint2 u = __ldcs(s4 + i);
      float4 f;
      f.x = __uint_as_float(u.x << 16);
      f.y = __uint_as_float(u.x & 0xffff0000u);
      f.z = __uint_as_float(u.y << 16);
      f.w = __uint_as_float(u.y & 0xffff0000u);
      __stcs(d4 + i, f);
    }
    done = nv * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) dst[i] = bf16_to_f32(src[i]);
}

// Copy nv 16-byte vectors, 4 in flight per thread.
__global__ void __launch_bounds__(kBlock) k_copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t nv) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < nv; i += 4 * stride) {
    uint4 a = __ldcs(src + i), b = __ldcs(src + i + stride), c = __ldcs(src + i + 2 * stride),
          d = __ldcs(src + i + 3 * stride);
    __stcs(dst + i, a);
    __stcs(dst + i + stride, b);
    __stcs(dst + i + 2 * stride, c);
    __stcs(dst + i + 3 * stride, d);
  }
  for (; i < nv; i += stride) __stcs(dst + i, __ldcs(src + i));
}

__global__ void __launch_bounds__(kBlock) k_copy1(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

void check_ptrs(const void* src, const void* dst, int64_t n, const char* fn) {
  if (n < 0) throw Error(std::string(fn) + ": negative length " + std::to_string(n));
  if (n > 0 && (!src || !dst)) throw Error(std::string(fn) + ": null device pointer");
}

}  // namespace

void f32_to_bf16_cuda(const float* src, uint16_t* dst, int64_t n) {
  check_ptrs(src, dst, n, "f32_to_bf16_cuda");
  if (n == 0) return;
  bool vec = aligned(src, 16) && aligned(dst, 8);
  k_f32_to_bf16<<<grid_for(vec ? n / 4 : n), kBlock>>>(src, dst, n, vec);
  CUDA_CHECK_LAUNCH();
  sync_check("f32_to_bf16_cuda");
}

void bf16_to_f32_cuda(const uint16_t* src, float* dst, int64_t n) {
  check_ptrs(src, dst, n, "bf16_to_f32_cuda");
  if (n == 0) return;
  bool vec = aligned(src, 8) && aligned(dst, 16);
  k_bf16_to_f32<<<grid_for(vec ? n / 4 : n), kBlock>>>(src, dst, n, vec);
  CUDA_CHECK_LAUNCH();
  sync_check("bf16_to_f32_cuda");
}

void copy_cuda(const void* src, void* dst, int64_t bytes) {
  check_ptrs(src, dst, bytes, "copy_cuda");
  if (bytes == 0) return;
  const uint8_t* s = static_cast<const uint8_t*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  const uintptr_t sa = reinterpret_cast<uintptr_t>(s), da = reinterpret_cast<uintptr_t>(d);
  if (((sa ^ da) & 15) == 0) {
    // Same misalignment: bytes up to the 16-byte boundary, then vectors, then the tail.
    int64_t head = std::min<int64_t>(bytes, int64_t((16 - (sa & 15)) & 15));
    int64_t nv = (bytes - head) / 16;
    int64_t tail = bytes - head - nv * 16;
    if (head > 0) {
      k_copy1<<<1, kBlock>>>(s, d, head);
      CUDA_CHECK_LAUNCH();
    }
    if (nv > 0) {
      k_copy16<<<grid_for(nv), kBlock>>>(reinterpret_cast<const uint4*>(s + head), reinterpret_cast<uint4*>(d + head),
                                         nv);
      CUDA_CHECK_LAUNCH();
    }
    if (tail > 0) {
      k_copy1<<<1, kBlock>>>(s + head + nv * 16, d + head + nv * 16, tail);
      CUDA_CHECK_LAUNCH();
    }
  } else {
    k_copy1<<<grid_for(bytes), kBlock>>>(s, d, bytes);
    CUDA_CHECK_LAUNCH();
  }
  sync_check("copy_cuda");
}

}  // namespace murphy
