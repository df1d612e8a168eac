// Kernel family 3 on the GPU: fused multi-tensor AdamW with global-norm clipping.
// The readable reference is native/cpu/adamw.cc; formulas (adamw.h), per element:
//
//   norm = sqrt(sum over all tensors of g^2),  coef = min(1, max_norm / (norm + 1e-6))
//   g  = coef * grad
//   p  = p * (1 - lr wd)                          (tensors with decay only)
//   m  = m + (1 - b1) (g - m)                     (torch's lerp form, as on the CPU)
//   v  = b2 v + (1 - b2) g^2
//   p  = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   (scalars formed in double from the double hyper-parameters, rounded to fp32 once,
//   exactly as the CPU and torch do)
//   p_bf16 = RNE(p), or stochastic: f32_to_bf16_stochastic(p, hash_u32(seed ^ (tensor *
//            0x9E3779B97F4A7C15), element index in the tensor))  -- the CPU's exact bits
//
// The work is cut into chunks of 8192 elements (never crossing a tensor) described by a
// small table uploaded per call; one block per chunk. With max_grad_norm > 0: pass 1
// sums g^2 per chunk (fp32 per thread, fp64 per block), a one-block kernel adds the
// chunk sums in a fixed order and decides coef / skip on the device, then the update
// pass reads coef from device memory (a non-finite norm skips every update). Without
// clipping the update pass accumulates g^2 itself. 16-byte loads and stores where all
// of a tensor's arrays are aligned.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "check.cuh"
#include "murphy/adamw.h"
#include "murphy/validate.h"

namespace murphy {
using namespace cudadetail;

namespace {

constexpr int kBlock = 256;
constexpr int64_t kChunk = 8192;

struct Desc {
  float* p;
  const void* g;
  float* m;
  float* v;
  uint16_t* pb;
  uint64_t sr_seed;  // seed ^ (tensor * 0x9E3779B97F4A7C15)
  float decay_mul;
  int32_t grad_bf16;
  int32_t vec;
};

struct ChunkRef {
  int32_t tensor;
  int32_t pad;
  int64_t begin, end;
};

struct Scalars {
  float b2, one_minus_b1, one_minus_b2, step_size, bc2_sqrt, eps;
  bool stochastic;
};

struct Outcome {
  double norm;
  double coef;
  float coef_f;
  int32_t skip;
};

__device__ __forceinline__ void load4(const Desc& d, int64_t i, float (&g)[4]) {
  if (d.grad_bf16) {
    const uint2 u = __ldcs(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(d.g) + i));
    g[0] = __uint_as_float(u.x << 16);
    g[1] = __uint_as_float(u.x & 0xffff0000u);
    g[2] = __uint_as_float(u.y << 16);
    g[3] = __uint_as_float(u.y & 0xffff0000u);
  } else {
    const float4 f = __ldcs(reinterpret_cast<const float4*>(static_cast<const float*>(d.g) + i));
    g[0] = f.x;
    g[1] = f.y;
    g[2] = f.z;
    g[3] = f.w;
  }
}

__device__ __forceinline__ float load1(const Desc& d, int64_t i) {
  return d.grad_bf16 ? bf16_to_f32(static_cast<const uint16_t*>(d.g)[i]) : static_cast<const float*>(d.g)[i];
}

// Pass 1 (clipping only): sum of g^2 per chunk.
__global__ void __launch_bounds__(kBlock) k_sumsq(const Desc* __restrict__ descs, const ChunkRef* __restrict__ chunks,
                                                  double* __restrict__ part) {
  __shared__ double sh[32];
  const ChunkRef c = chunks[blockIdx.x];
  const Desc d = descs[c.tensor];
  float s = 0.f;
  int64_t i0 = c.begin;
  if (d.vec) {
    const int64_t nv = (c.end - c.begin) / 4;
    for (int64_t k = threadIdx.x; k < nv; k += kBlock) {
      float g[4];
      load4(d, c.begin + 4 * k, g);
      s = fmaf(g[0], g[0], s);
      s = fmaf(g[1], g[1], s);
      s = fmaf(g[2], g[2], s);
      s = fmaf(g[3], g[3], s);
    }
    i0 = c.begin + 4 * nv;
  }
  for (int64_t i = i0 + threadIdx.x; i < c.end; i += kBlock) {
    const float g = load1(d, i);
    s = fmaf(g, g, s);
  }
  const double b = block_sum<double, kBlock>(double(s), sh);
  if (threadIdx.x == 0) part[blockIdx.x] = b;
}

// Sum the chunk partials in a fixed order; decide coef and skip.
__global__ void __launch_bounds__(kBlock) k_norm_final(const double* __restrict__ part, int64_t n, float max_norm,
                                                       bool clip, Outcome* __restrict__ out) {
  __shared__ double sh[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kBlock) s += part[i];
  s = block_sum<double, kBlock>(s, sh);
  if (threadIdx.x == 0) {
    const double norm = sqrt(s);
    out->norm = norm;
    if (!clip) {
      out->coef = 1.0;
      out->coef_f = 1.0f;
      out->skip = 0;
    } else if (!isfinite(norm)) {
      out->coef = 0.0;
      out->coef_f = 0.0f;
      out->skip = 1;
    } else {
      const double coef = fmin(1.0, double(max_norm) / (norm + 1e-6));
      out->coef = coef;
      out->coef_f = float(coef);
      out->skip = 0;
    }
  }
}

// One element of the update; returns the bf16 copy (RNE or stochastic).
__device__ __forceinline__ uint16_t adam_elem(float graw, float coef, float decay_mul, const Scalars& k, float& p,
                                              float& m, float& v, uint64_t seed, int64_t idx) {
  const float g = coef * graw;
  float pi = p * decay_mul;
  const float mi = m + k.one_minus_b1 * (g - m);
  const float vi = k.b2 * v + k.one_minus_b2 * g * g;
  const float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
  pi = pi - k.step_size * (mi / denom);
  p = pi;
  m = mi;
  v = vi;
  return k.stochastic ? f32_to_bf16_stochastic(pi, hash_u32(seed, uint64_t(idx))) : f32_to_bf16(pi);
}

template <bool CLIP>
__global__ void __launch_bounds__(kBlock) k_adamw(const Desc* __restrict__ descs, const ChunkRef* __restrict__ chunks,
                                                  Scalars k, const Outcome* __restrict__ outcome,
                                                  double* __restrict__ part) {
  __shared__ double sh[32];
  float coef = 1.0f;
  if (CLIP) {
    if (outcome->skip) return;  // uniform across the grid
    coef = outcome->coef_f;
  }
  const ChunkRef c = chunks[blockIdx.x];
  const Desc d = descs[c.tensor];
  float ss = 0.f;
  int64_t i0 = c.begin;
  if (d.vec) {
    const int64_t nv = (c.end - c.begin) / 4;
    for (int64_t q = threadIdx.x; q < nv; q += kBlock) {
      const int64_t i = c.begin + 4 * q;
      float g[4];
      load4(d, i, g);
      float4 p = *reinterpret_cast<const float4*>(d.p + i);
      float4 m = *reinterpret_cast<const float4*>(d.m + i);
      float4 v = *reinterpret_cast<const float4*>(d.v + i);
      if (!CLIP) {
        ss = fmaf(g[0], g[0], ss);
        ss = fmaf(g[1], g[1], ss);
        ss = fmaf(g[2], g[2], ss);
        ss = fmaf(g[3], g[3], ss);
      }
      const uint16_t b0 = adam_elem(g[0], coef, d.decay_mul, k, p.x, m.x, v.x, d.sr_seed, i);
      const uint16_t b1 = adam_elem(g[1], coef, d.decay_mul, k, p.y, m.y, v.y, d.sr_seed, i + 1);
      const uint16_t b2 = adam_elem(g[2], coef, d.decay_mul, k, p.z, m.z, v.z, d.sr_seed, i + 2);
      const uint16_t b3 = adam_elem(g[3], coef, d.decay_mul, k, p.w, m.w, v.w, d.sr_seed, i + 3);
      *reinterpret_cast<float4*>(d.p + i) = p;
      *reinterpret_cast<float4*>(d.m + i) = m;
      *reinterpret_cast<float4*>(d.v + i) = v;
      if (d.pb)
        *reinterpret_cast<uint2*>(d.pb + i) =
            make_uint2(uint32_t(b0) | (uint32_t(b1) << 16), uint32_t(b2) | (uint32_t(b3) << 16));
    }
    i0 = c.begin + 4 * nv;
  }
  for (int64_t i = i0 + threadIdx.x; i < c.end; i += kBlock) {
    const float graw = load1(d, i);
    if (!CLIP) ss = fmaf(graw, graw, ss);
    float p = d.p[i], m = d.m[i], v = d.v[i];
    const uint16_t b = adam_elem(graw, coef, d.decay_mul, k, p, m, v, d.sr_seed, i);
    d.p[i] = p;
    d.m[i] = m;
    d.v[i] = v;
    if (d.pb) d.pb[i] = b;
  }
  if (!CLIP) {
    const double b = block_sum<double, kBlock>(double(ss), sh);
    if (threadIdx.x == 0) part[blockIdx.x] = b;
  }
}


}  // namespace

AdamWResult adamw_cuda(const AdamWArgs& a) {
  validate_adamw(a);
  AdamWResult res;
  const bool clip = a.max_grad_norm > 0.0f;

  // Host-side tables: one descriptor per tensor, one entry per chunk.
  std::vector<Desc> descs(size_t(a.n_tensors));
  std::vector<ChunkRef> chunks;
  for (int64_t t = 0; t < a.n_tensors; ++t) {
    const AdamWTensor& x = a.tensors[t];
    Desc& d = descs[size_t(t)];
    d.p = x.param;
    d.g = x.grad;
    d.m = x.m;
    d.v = x.v;
    d.pb = x.param_bf16;
    d.sr_seed = a.seed ^ (uint64_t(t) * 0x9E3779B97F4A7C15ull);
    d.decay_mul = x.decay ? float(1.0 - a.lr * a.weight_decay) : 1.0f;
    d.grad_bf16 = x.grad_dtype == DType::BF16;
    d.vec = aligned(x.param, 16) && aligned(x.m, 16) && aligned(x.v, 16) &&
            aligned(x.grad, d.grad_bf16 ? 8 : 16) && (!x.param_bf16 || aligned(x.param_bf16, 8));
    for (int64_t b = 0; b < x.numel; b += kChunk)
      chunks.push_back(ChunkRef{int32_t(t), 0, b, std::min(x.numel, b + kChunk)});
  }
  const int64_t nc = int64_t(chunks.size());
  if (nc == 0) return res;  // nothing to update: norm 0, coef 1
  if (a.n_tensors > INT32_MAX) throw Error("adamw: too many tensors");

  const size_t o_out = 0;
  const size_t o_desc = 256;
  const size_t o_chunk = (o_desc + descs.size() * sizeof(Desc) + 255) & ~size_t(255);
  const size_t o_part = (o_chunk + chunks.size() * sizeof(ChunkRef) + 255) & ~size_t(255);
  Scratch scratch(o_part + size_t(nc) * sizeof(double));
  Outcome* out = scratch.as<Outcome>(o_out);
  Desc* d_desc = scratch.as<Desc>(o_desc);
  ChunkRef* d_chunk = scratch.as<ChunkRef>(o_chunk);
  double* d_part = scratch.as<double>(o_part);
  CUDA_CHECK(cudaMemcpy(d_desc, descs.data(), descs.size() * sizeof(Desc), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_chunk, chunks.data(), chunks.size() * sizeof(ChunkRef), cudaMemcpyHostToDevice));

  // The scalars exactly as the CPU computes them.
  const double bc1 = 1.0 - std::pow(a.beta1, double(a.step));
  const double bc2 = 1.0 - std::pow(a.beta2, double(a.step));
  Scalars k;
  k.b2 = float(a.beta2);
  k.one_minus_b1 = float(1.0 - a.beta1);
  k.one_minus_b2 = float(1.0 - a.beta2);
  k.step_size = float(a.lr / bc1);
  k.bc2_sqrt = float(std::sqrt(bc2));
  k.eps = float(a.eps);
  k.stochastic = a.stochastic_rounding;

  if (clip) {
    k_sumsq<<<unsigned(nc), kBlock>>>(d_desc, d_chunk, d_part);
    CUDA_CHECK_LAUNCH();
    k_norm_final<<<1, kBlock>>>(d_part, nc, a.max_grad_norm, true, out);
    CUDA_CHECK_LAUNCH();
    k_adamw<true><<<unsigned(nc), kBlock>>>(d_desc, d_chunk, k, out, nullptr);
    CUDA_CHECK_LAUNCH();
  } else {
    k_adamw<false><<<unsigned(nc), kBlock>>>(d_desc, d_chunk, k, nullptr, d_part);
    CUDA_CHECK_LAUNCH();
    k_norm_final<<<1, kBlock>>>(d_part, nc, 0.0f, false, out);
    CUDA_CHECK_LAUNCH();
  }
  sync_check("adamw_cuda");
  Outcome h;
  CUDA_CHECK(cudaMemcpy(&h, out, sizeof(h), cudaMemcpyDeviceToHost));
  res.grad_norm = h.norm;
  res.clip_coef = clip ? h.coef : 1.0;
  res.skipped = h.skip != 0;
  return res;
}

}  // namespace murphy
