// Kernel family 1 on the GPU: batched log-prob gathering and its gradient.
// The readable reference is native/cpu/logprob.cc; the formulas (logprob.h):
//
//   z' = z / T
//   lse[n]  = log sum_j exp(z'[n, j])
//   logp[n] = z'[n, y_n] - lse[n]
//   H[n]    = lse[n] - sum_j softmax(z'[n])_j z'[n, j]
//   dlogits[n, j] = g[n] (1[j = y_n] - exp(z'[n, j] - lse[n])) / T
//
// Forward: one block per row, one pass over the row. Each thread keeps an online
// (max, sum, entropy-sum) triple in base 2 (x = z log2(e) / T, so exp becomes one ex2):
//   m = max x,  s = sum 2^(x - m),  t = sum 2^(x - m) (x - m)
//   lse = ln2 (m + log2 s),  H = ln2 (log2 s - t / s)
// then the triples are merged across the warp with shuffles and across warps through
// shared memory. fp32 accumulation, 64-bit indexing, 16-byte loads for the aligned
// body of each row (scalar head and tail). Entries equal to -inf contribute 0; a row
// of all -inf gives lse = logp = -inf, H = 0 and a zero gradient row. NaN (or +inf, which
// makes the CPU's lse NaN) in a row or a target outside [0, vocab) sets an error slot (the smallest such row, by atomicMin)
// that the host reads back after the kernel and turns into murphy::Error.
//
// Backward: one block per row, recomputes p_j = 2^(x_j - lse log2 e) on the fly and
// writes the gradient with 16-byte stores; the probabilities are never stored.
#include <algorithm>
#include <cmath>

#include "check.cuh"
#include "murphy/logprob.h"
#include "murphy/validate.h"

namespace murphy {
using namespace cudadetail;

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kUnroll = 4;  // 16-byte vectors in flight per thread

__device__ __forceinline__ float ex2(float x) {  // 2^x, one MUFU op; -inf -> 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Element access for the two logit types. A 16-byte vector holds N elements.
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static constexpr int N = 4;
  static constexpr uint32_t kNegInfWord = 0xff800000u;
  __device__ __forceinline__ static float get(const float* p, int64_t i) { return __ldg(p + i); }
  __device__ __forceinline__ static void unpack(const uint4& u, float (&v)[N]) {
    v[0] = __uint_as_float(u.x);
    v[1] = __uint_as_float(u.y);
    v[2] = __uint_as_float(u.z);
    v[3] = __uint_as_float(u.w);
  }
  __device__ __forceinline__ static uint4 pack(const float (&v)[N]) {
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
  }
  __device__ __forceinline__ static void put(float* p, int64_t i, float x) { p[i] = x; }
};
template <>
struct Elem<uint16_t> {
  static constexpr int N = 8;
  static constexpr uint32_t kNegInfWord = 0xff80ff80u;
  __device__ __forceinline__ static float get(const uint16_t* p, int64_t i) { return bf16_to_f32(__ldg(p + i)); }
  __device__ __forceinline__ static void unpack2(uint32_t w, float& a, float& b) {
    a = __uint_as_float(w << 16);
    b = __uint_as_float(w & 0xffff0000u);
  }
  __device__ __forceinline__ static void unpack(const uint4& u, float (&v)[N]) {
    unpack2(u.x, v[0], v[1]);
    unpack2(u.y, v[2], v[3]);
    unpack2(u.z, v[4], v[5]);
    unpack2(u.w, v[6], v[7]);
  }
  __device__ __forceinline__ static uint32_t pack2(float a, float b) {
    return uint32_t(f32_to_bf16(a)) | (uint32_t(f32_to_bf16(b)) << 16);
  }
  __device__ __forceinline__ static uint4 pack(const float (&v)[N]) {
    return make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
  }
  __device__ __forceinline__ static void put(uint16_t* p, int64_t i, float x) { p[i] = f32_to_bf16(x); }
};

// Online softmax statistics in base 2 (see the top of the file).
struct Online {
  float m = -INFINITY, s = 0.f, t = 0.f;

  // Add K values x (already scaled by log2(e)/T).
  template <int K, bool ENT>
  __device__ __forceinline__ void add(const float (&x)[K]) {
    float cm = x[0];
#pragma unroll
    for (int i = 1; i < K; ++i) cm = fmaxf(cm, x[i]);
    if (cm > m) {
      if (s > 0.f) {
        const float d = m - cm, f = ex2(d);
        if (ENT) t = (t + d * s) * f;
        s *= f;
      }
      m = cm;
    }
#pragma unroll
    for (int i = 0; i < K; ++i) {
      // -inf entries (and the -inf - -inf = NaN of an all -inf prefix) clamp to 2^-256 = 0.
      const float d = fmaxf(x[i] - m, -256.f);
      const float e = ex2(d);
      s += e;
      if (ENT) t = fmaf(e, d, t);
    }
  }

  template <bool ENT>
  __device__ __forceinline__ void merge(float mb, float sb, float tb) {
    const float M = fmaxf(m, mb);
    float s2 = 0.f, t2 = 0.f;
    if (s > 0.f) {
      const float d = m - M, f = ex2(d);
      s2 = s * f;
      if (ENT) t2 = (t + d * s) * f;
    }
    if (sb > 0.f) {
      const float d = mb - M, f = ex2(d);
      s2 = fmaf(sb, f, s2);
      if (ENT) t2 = fmaf(tb + d * sb, f, t2);
    }
    m = M;
    s = s2;
    t = t2;
  }
};

// One block per row n:  lse[n] = log sum_j exp(z[n,j]/T),  logp[n] = z[n,y]/T - lse[n],
// H[n] = lse[n] - sum_j p_j z[n,j]/T  (online base-2 triple per thread, merged per block).
template <typename T, int BLOCK, bool ENT>
__global__ void __launch_bounds__(BLOCK, 1024 / BLOCK)
    k_logprob_forward(const T* __restrict__ logits, const int32_t* __restrict__ targets, int64_t n_rows, int64_t V,
                      float inv_t, float* __restrict__ logp, float* __restrict__ lse /* optional */, float* __restrict__ entropy,
                      unsigned long long* __restrict__ err) {
  using E = Elem<T>;
  constexpr int N = E::N;
  constexpr int W = BLOCK / 32;
  __shared__ float sh_m[W], sh_s[W], sh_t[W];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float scale2 = inv_t * kLog2e;

  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const T* r = logits + row * V;
    float zy = 0.f;
    bool bad_target = false;
    if (tid == 0) {
      const int32_t y = targets[row];
      bad_target = y < 0 || int64_t(y) >= V;
      if (!bad_target) zy = E::get(r, y);
    }

    Online st;
    bool nan = false;
    // Scalar head up to the first 16-byte boundary, the vector body, the scalar tail.
    const int64_t mis = int64_t(reinterpret_cast<uintptr_t>(r) & 15) / int64_t(sizeof(T));
    const int64_t head = ::min(V, mis == 0 ? 0 : (16 / int64_t(sizeof(T))) - mis);
    const int64_t nvec = (V - head) / N;
    const int64_t tail0 = head + nvec * N;
    for (int64_t j = tid; j < head; j += BLOCK) {
      float x[1] = {E::get(r, j)};
      nan |= !(x[0] < INFINITY);
      x[0] *= scale2;
      st.add<1, ENT>(x);
    }
    const uint4* rv = reinterpret_cast<const uint4*>(r + head);
    for (int64_t i = tid; i < nvec; i += int64_t(BLOCK) * kUnroll) {
      uint4 u[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int64_t j = i + int64_t(k) * BLOCK;
        u[k] = j < nvec ? __ldg(rv + j) : make_uint4(E::kNegInfWord, E::kNegInfWord, E::kNegInfWord, E::kNegInfWord);
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        float x[N];
        E::unpack(u[k], x);
#pragma unroll
        for (int q = 0; q < N; ++q) {
          nan |= !(x[q] < INFINITY);
          x[q] *= scale2;
        }
        st.add<N, ENT>(x);
      }
    }
    for (int64_t j = tail0 + tid; j < V; j += BLOCK) {
      float x[1] = {E::get(r, j)};
      nan |= !(x[0] < INFINITY);
      x[0] *= scale2;
      st.add<1, ENT>(x);
    }

    // Merge the per-thread triples: warp shuffles, then warp 0 over the warps.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float mb = __shfl_xor_sync(0xffffffffu, st.m, o);
      const float sb = __shfl_xor_sync(0xffffffffu, st.s, o);
      const float tb = ENT ? __shfl_xor_sync(0xffffffffu, st.t, o) : 0.f;
      st.merge<ENT>(mb, sb, tb);
    }
    if (lane == 0) {
      sh_m[warp] = st.m;
      sh_s[warp] = st.s;
      sh_t[warp] = st.t;
    }
    const bool any_nan = __syncthreads_or(nan);  // also orders the shared writes
    if (warp == 0) {
      Online b;
      if (lane < W) {
        b.m = sh_m[lane];
        b.s = sh_s[lane];
        b.t = sh_t[lane];
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float mb = __shfl_xor_sync(0xffffffffu, b.m, o);
        const float sb = __shfl_xor_sync(0xffffffffu, b.s, o);
        const float tb = ENT ? __shfl_xor_sync(0xffffffffu, b.t, o) : 0.f;
        b.merge<ENT>(mb, sb, tb);
      }
      if (lane == 0) {
        if (any_nan) atomicMin(&err[0], (unsigned long long)row);
        if (bad_target) atomicMin(&err[1], (unsigned long long)row);
        float l, lp, h;
        if (b.s > 0.f) {
          const float ls = log2f(b.s);
          l = (b.m + ls) * kLn2;
          lp = bad_target ? NAN : zy * inv_t - l;
          h = ENT ? kLn2 * (ls - b.t / b.s) : 0.f;
        } else {  // every entry is -inf
          l = -INFINITY;
          lp = -INFINITY;
          h = 0.f;
        }
        logp[row] = lp;
        if (lse) lse[row] = l;
        if (ENT) entropy[row] = h;
      }
    }
    __syncthreads();  // shared arrays are reused by the next row
  }
}

// One block per row n:  dlogits[n,j] = g[n] (1[j = y_n] - exp(z[n,j]/T - lse[n])) / T,
// all zero when g[n] = 0 or lse[n] is infinite (a fully masked row).
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 1024 / BLOCK)
    k_logprob_backward(const T* __restrict__ logits, const int32_t* __restrict__ targets, int64_t n_rows, int64_t V,
                       float inv_t, const float* __restrict__ lse, const float* __restrict__ grad_logp,
                       T* __restrict__ grad_logits, bool vec, unsigned long long* __restrict__ err) {
  using E = Elem<T>;
  constexpr int N = E::N;
  const int tid = threadIdx.x;
  const float scale2 = inv_t * kLog2e;

  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const T* r = logits + row * V;
    T* gr = grad_logits + row * V;
    const int32_t y = targets[row];
    if (tid == 0 && (y < 0 || int64_t(y) >= V)) atomicMin(&err[1], (unsigned long long)row);
    const float l = lse[row];
    // As on the CPU: a fully masked row (lse = -inf) or g = 0 gives an all-zero row.
    const float g = grad_logp[row];
    const bool zero_row = g == 0.f || isinf(l);
    const float coef = zero_row ? 0.f : g * inv_t;
    const float l2 = zero_row ? 0.f : l * kLog2e;
    // grad_j = coef (1[j = y] - 2^(z_j scale2 - lse log2 e))
    auto grad_at = [&](float z, int64_t j) -> float {
      const float p = ex2(fmaf(z, scale2, -l2));
      return zero_row ? 0.f : coef * ((j == y ? 1.f : 0.f) - p);
    };

    int64_t head = 0, nvec = 0;
    if (vec) {
      const int64_t mis = int64_t(reinterpret_cast<uintptr_t>(r) & 15) / int64_t(sizeof(T));
      head = ::min(V, mis == 0 ? 0 : (16 / int64_t(sizeof(T))) - mis);
      nvec = (V - head) / N;
    }
    const int64_t tail0 = head + nvec * N;
    for (int64_t j = tid; j < head; j += BLOCK) E::put(gr, j, grad_at(E::get(r, j), j));
    const uint4* rv = reinterpret_cast<const uint4*>(r + head);
    uint4* gv = reinterpret_cast<uint4*>(gr + head);
    for (int64_t i = tid; i < nvec; i += int64_t(BLOCK) * kUnroll) {
      uint4 u[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int64_t j = i + int64_t(k) * BLOCK;
        if (j < nvec) u[k] = __ldg(rv + j);
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int64_t j = i + int64_t(k) * BLOCK;
        if (j < nvec) {
          float x[N];
          E::unpack(u[k], x);
          const int64_t base = head + j * N;
#pragma unroll
          for (int q = 0; q < N; ++q) x[q] = grad_at(x[q], base + q);
          gv[j] = E::pack(x);
        }
      }
    }
    for (int64_t j = tail0 + tid; j < V; j += BLOCK) E::put(gr, j, grad_at(E::get(r, j), j));
  }
}

int row_grid(int64_t n_rows) { return int(std::min<int64_t>(n_rows, int64_t(1) << 30)); }

void check_common(const char* fn, const void* logits, int64_t n_rows, int64_t vocab, const int32_t* targets,
                  float temperature) {
  (void)fn;  // messages as on the CPU (native/cpu/logprob.cc)
  if (n_rows < 0) throw Error("logprob: nRows must be >= 0, got " + std::to_string(n_rows));
  if (vocab < 1) throw Error("logprob: vocab must be >= 1, got " + std::to_string(vocab));
  (void)temperature;  // its range (> 0) is checked once, in lib/native/options.ts
  if (n_rows > 0 && (!logits || !targets)) throw Error("logprob: logits and targets are required");
}

// Read back the error slots; throw for a bad target first, then for NaN.
void report(const char* fn, const unsigned long long* err_dev, const int32_t* targets, int64_t vocab) {
  unsigned long long e[2];
  CUDA_CHECK(cudaMemcpy(e, err_dev, sizeof(e), cudaMemcpyDeviceToHost));
  const unsigned long long none = ~0ull;
  if (e[1] != none) {
    int32_t y = 0;
    CUDA_CHECK(cudaMemcpy(&y, targets + e[1], sizeof(y), cudaMemcpyDeviceToHost));
    throw Error("logprob: target id " + std::to_string(y) + " at row " + std::to_string(e[1]) +
                " is outside the vocabulary [0, " + std::to_string(vocab) + "); check the token ids");
  }
  if (e[0] != none)
    throw Error("logprob: NaN in the logits of row " + std::to_string(e[0]) +
                "; the model produced NaN (check the learning rate and the inputs)");
  (void)fn;
}

template <typename T, int BLOCK>
void launch_forward(const LogprobForwardArgs& a, float inv_t, unsigned long long* err) {
  const T* lg = static_cast<const T*>(a.logits);
  if (a.entropy)
    k_logprob_forward<T, BLOCK, true>
        <<<row_grid(a.n_rows), BLOCK>>>(lg, a.targets, a.n_rows, a.vocab, inv_t, a.logp, a.lse, a.entropy, err);
  else
    k_logprob_forward<T, BLOCK, false>
        <<<row_grid(a.n_rows), BLOCK>>>(lg, a.targets, a.n_rows, a.vocab, inv_t, a.logp, a.lse, nullptr, err);
  CUDA_CHECK_LAUNCH();
}

template <typename T, int BLOCK>
void launch_backward(const LogprobBackwardArgs& a, float inv_t, bool vec, unsigned long long* err) {
  k_logprob_backward<T, BLOCK><<<row_grid(a.n_rows), BLOCK>>>(static_cast<const T*>(a.logits), a.targets, a.n_rows,
                                                              a.vocab, inv_t, a.lse, a.grad_logp,
                                                              static_cast<T*>(a.grad_logits), vec, err);
  CUDA_CHECK_LAUNCH();
}

// Large rows get 512 threads, short rows 128.
constexpr int64_t kBigRow = 4096;

}  // namespace

void logprob_forward_cuda(const LogprobForwardArgs& a) {
  const char* fn = "logprob_forward_cuda";
  check_common(fn, a.logits, a.n_rows, a.vocab, a.targets, a.temperature);
  if (a.n_rows > 0 && !a.logp) throw Error("logprob: the logp output is required");
  if (a.n_rows == 0) return;
  Scratch err(2 * sizeof(unsigned long long));
  CUDA_CHECK(cudaMemset(err.get(), 0xff, 2 * sizeof(unsigned long long)));
  const float inv_t = 1.0f / a.temperature;
  unsigned long long* e = err.as<unsigned long long>();
  const bool big = a.vocab >= kBigRow;
  if (a.dtype == DType::F32)
    big ? launch_forward<float, 512>(a, inv_t, e) : launch_forward<float, 128>(a, inv_t, e);
  else
    big ? launch_forward<uint16_t, 512>(a, inv_t, e) : launch_forward<uint16_t, 128>(a, inv_t, e);
  sync_check(fn);
  report(fn, e, a.targets, a.vocab);
}

void logprob_backward_cuda(const LogprobBackwardArgs& a) {
  const char* fn = "logprob_backward_cuda";
  check_common(fn, a.logits, a.n_rows, a.vocab, a.targets, a.temperature);
  if (a.n_rows > 0 && (!a.lse || !a.grad_logp || !a.grad_logits))
    throw Error("logprob backward: lse, gradLogp and the gradLogits output are required");
  validate_logprob_backward_alias(a);
  // The kernel reads the logits through the read-only cache (__ldg), which requires that the
  // kernel not write them: in place is the CPU's alone (the CPU engine's use of it).
  if (a.n_rows > 0 && a.grad_logits == a.logits)
    throw Error("logprob backward: in place (gradLogits = logits) is CPU-only; pass a separate gradLogits on the GPU");
  if (a.n_rows == 0) return;
  Scratch err(2 * sizeof(unsigned long long));
  CUDA_CHECK(cudaMemset(err.get(), 0xff, 2 * sizeof(unsigned long long)));
  const float inv_t = 1.0f / a.temperature;
  unsigned long long* e = err.as<unsigned long long>();
  // 16-byte vectors for both arrays only when they share their offset within 16 bytes.
  const bool vec = ((reinterpret_cast<uintptr_t>(a.logits) ^ reinterpret_cast<uintptr_t>(a.grad_logits)) & 15) == 0;
  const bool big = a.vocab >= kBigRow;
  if (a.dtype == DType::F32)
    big ? launch_backward<float, 512>(a, inv_t, vec, e) : launch_backward<float, 128>(a, inv_t, vec, e);
  else
    big ? launch_backward<uint16_t, 512>(a, inv_t, vec, e) : launch_backward<uint16_t, 128>(a, inv_t, vec, e);
  sync_check(fn);
  report(fn, e, a.targets, a.vocab);
}

}  // namespace murphy
