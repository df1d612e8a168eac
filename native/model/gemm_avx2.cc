// The AVX2+FMA matrix product (BLIS structure), fp32 and bf16 weights, for CPUs without
// AVX-512. Called by matmul.cc only where the CPU has AVX2 and FMA (x86-64-v3).
//
//   C[M,N] (+)= A[M,K] B[K,N], strided views (GemmArgs), fp32 accumulation.
//
// The driver (task grid, shared packing, K slices) is gemm_driver.cc's, with 6 x 16 tiles; the
// packing routines are gemm_pack.inc's (shared with the AVX-512 path) on 8-lane ymm primitives.
// Micro-kernel: MR = 6 rows x NR = 16 columns = 12 ymm accumulators, 2 B vectors and one
// broadcast A value: 15 of the 16 ymm registers; per k 12 FMAs per 8 loads. The first K slice
// writes C (beta 0), adds to it (beta 1) or scales it (other beta); later slices add.
// Packing reads whole rows: an operand contiguous in k (X and W in the forward, dY in the input
// gradient) is transposed in 8 x 8 register blocks, one contiguous along the other axis is
// copied row segment by row segment.
// bf16 weights: X is rounded to bf16 (nearest even) once per call and kept as f32, W is widened
// to f32 while packing (or while streaming, in the skinny path); the f32 kernels run. The
// products are exact in f32 and summed in fp32, as on the AVX-512 paths.
// Skinny products (decode, M <= kSkinnyRows): no packing; blocks of 4 weight rows x up to 2
// input rows accumulate 8-lane partial dot products (8 ymm accumulators) and reduce them at the
// end, so each weight row is read from memory once and reused from L1 for every input row; from
// 4 input rows on, blocks of 3 weight rows x 4 input rows (12 accumulators).
#include <cstring>

#include "../cpu/simd.h"
#include "../cpu/threads.h"
#include "gemm.h"
#include "gemm_driver.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define MURPHY_HAVE_AVX2_GEMM 1
#endif

namespace murphy {
namespace model {
namespace gemm_avx2 {

#ifdef MURPHY_HAVE_AVX2_GEMM
namespace {

constexpr int MR = 6;
constexpr int NR = 16;
using gemm_driver::CallBuf;
using gemm_driver::grain_for;
using gemm_driver::imin;
using gemm_driver::split_weight_rows;
constexpr gemm_driver::Tile kTile{MR, NR};

}  // namespace

// ------------------------------------------------------------------------------------------
// AVX2 code: packing and micro-kernels (no library templates in here, so nothing compiled for
// AVX2 can be picked by the linker for another file's use).
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
namespace v3 {
namespace {

#define MURPHY_AI static inline __attribute__((always_inline))

// Lane mask of the first n lanes (n clamped to [0, 8]) for maskload / maskstore.
MURPHY_AI __m256i lanes(int64_t n) {
  const int32_t c = int32_t(n < 0 ? 0 : (n > 8 ? 8 : n));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// 8 f32 at p, lanes past n zero (nothing read past them).
MURPHY_AI __m256 load8(const float* p, int64_t n) { return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(n)); }
// 8 bf16 at p widened to f32, lanes past n zero (nothing read past them).
MURPHY_AI __m256 load8(const uint16_t* p, int64_t n) {
  __m128i h;
  if (n >= 8) {
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    alignas(16) uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i) t[i] = p[i];
    h = _mm_load_si128(reinterpret_cast<const __m128i*>(t));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// In-register transpose of an 8 x 8 block of 32-bit values: r[i] lane j -> r[j] lane i.
MURPHY_AI void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// The vector primitives of gemm_pack.inc (8-lane ymm), then the packing routines.
using Vec = __m256;
constexpr int VW = 8;
MURPHY_AI __m256 load_n(const float* p, int64_t n) { return load8(p, n); }
MURPHY_AI __m256 load_n(const uint16_t* p, int64_t n) { return load8(p, n); }
// The first w lanes of v at d (w = 8, or MR = 6 as one 4- and one 2-lane store).
MURPHY_AI void store_n(float* d, __m256 v, int w) {
  if (w == 8) return _mm256_storeu_ps(d, v);
  if (w == 6) {
    _mm_storeu_ps(d, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(v, 1));
    return;
  }
  _mm256_maskstore_ps(d, lanes(w), v);
}
MURPHY_AI void transpose(__m256 r[8]) { transpose8(r); }
MURPHY_AI __m256 load_tail(const float* p) {
  return _mm256_permutevar8x32_ps(_mm256_loadu_ps(p + MR - 8), _mm256_setr_epi32(8 - MR, 9 - MR, 10 - MR, 11 - MR, 12 - MR, 13 - MR, 0, 1));
}

#include "gemm_pack.inc"

// The micro-kernel: C[mr, nr] (mode 0: =, 1: +=, 2: = beta C +) sum_k a[k, r] b[k, :].
MURPHY_AI void kernel(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc, int mr,
                      int nr, int mode, float beta) {
  __m256 acc0[MR], acc1[MR];  // two 1-D arrays: GCC 12 keeps a 2-D one on the stack
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    acc0[r] = acc1[r] = _mm256_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + (r < mr ? r : 0) * ldc), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(bp + k * NR), b1 = _mm256_load_ps(bp + k * NR + 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + k * MR + r);
      acc0[r] = _mm256_fmadd_ps(a, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(a, b1, acc1[r]);
    }
  }
  const __m256 vb = _mm256_set1_ps(beta);
  if (nr == NR) {
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      if (r >= mr) break;
      float* cr = c + r * ldc;
      __m256 x0 = acc0[r], x1 = acc1[r];
      if (mode == 1) {
        x0 = _mm256_add_ps(x0, _mm256_loadu_ps(cr));
        x1 = _mm256_add_ps(x1, _mm256_loadu_ps(cr + 8));
      } else if (mode == 2) {
        x0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), x0);
        x1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), x1);
      }
      _mm256_storeu_ps(cr, x0);
      _mm256_storeu_ps(cr + 8, x1);
    }
    return;
  }
  const __m256i m0 = lanes(nr), m1 = lanes(nr - 8);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    if (r >= mr) break;
    float* cr = c + r * ldc;
    __m256 x0 = acc0[r], x1 = acc1[r];
    if (mode == 1) {
      x0 = _mm256_add_ps(x0, _mm256_maskload_ps(cr, m0));
      x1 = _mm256_add_ps(x1, _mm256_maskload_ps(cr + 8, m1));
    } else if (mode == 2) {
      x0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr, m0), x0);
      x1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr + 8, m1), x1);
    }
    _mm256_maskstore_ps(cr, m0, x0);
    _mm256_maskstore_ps(cr + 8, m1, x1);
  }
}

// One MR-row strip of a task across its column block.
void strip_f32(int64_t kc, const float* ap, const float* bp, int64_t ncols, float* c, int64_t ldc, int mr, int mode,
               float beta) {
  for (int64_t j = 0; j < ncols; j += NR)
    kernel(kc, ap, bp + j * kc, c + j, ldc, mr, int(imin(NR, ncols - j)), mode, beta);
}

// ---- skinny products: Y[m, j] (+)= sum_k X[m, k] W[j, k] for rows j in [j0, j1).

// [sum(a), sum(b), sum(c), sum(d)] of four 8-lane vectors.
MURPHY_AI __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
  const __m256 cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}
MURPHY_AI float hsum(__m256 v) { return _mm_cvtss_f32(hsum4(v, v, v, v)); }

// The block-ahead prefetch of large weights (gemm_driver.h) for bf16 rows only: on a Zen 3 (AVX2,
// no AVX-512) bf16 rows gained with it (Qwen3's LM head from memory, 4 x 1,024 x 151,936: 123
// GFLOP/s against 75) and fp32 rows lost (1 x 1,024 x 3,072 in L3: 31-39 against 42-47).
// docs/kernels.md, "On AVX2-only machines fp32 rows get no prefetch", has the whole A/B.
template <typename WT>
constexpr bool kPrefetchRows = sizeof(WT) == 2;

MURPHY_AI __m256 loadu8(const float* p) { return _mm256_loadu_ps(p); }
MURPHY_AI __m256 loadu8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
MURPHY_AI float value(float v) { return v; }
MURPHY_AI float value(uint16_t v) { return bf16_bits_to_f32(v); }

// Y[m0 .. m0 + MB, j .. j + JB) (+)= X W^T over all of K: whole 8-value steps in vectors (plain
// loads: a masked load per step cost a third of the speed), the K % 8 tail in scalars.
// JB is 1, 3 or a multiple of 4.
template <int MB, int JB, typename WT>
MURPHY_AI void skinny_block(const float* X, const WT* W, float* Y, int64_t N, int64_t K, int64_t m0, int64_t j, bool acc) {
  __m256 s[MB * JB];
#pragma GCC unroll 16
  for (int q = 0; q < MB * JB; ++q) s[q] = _mm256_setzero_ps();
  const int64_t K8 = K & ~int64_t(7);
  // the block ahead (gemm_driver.h): 8 values of each row per step; the first input rows only
  // (the others find them in L1)
  constexpr int kStepBytes = JB * 8 * int(sizeof(WT));
  const char* pf = kPrefetchRows<WT> && m0 == 0 ? gemm_driver::skinny_prefetch_base<kStepBytes>(W, K * int64_t(sizeof(WT)), N, j, JB) : nullptr;
  for (int64_t k = 0; k < K8; k += 8) {
    gemm_driver::skinny_prefetch_step<kStepBytes>(pf, k / 8);
    __m256 w[JB];
#pragma GCC unroll 8
    for (int q = 0; q < JB; ++q) {
      w[q] = loadu8(W + (j + q) * K + k);
      // in a register: folded into each row's FMA, every weight vector was loaded MB times
      // (10 loads per 8 FMAs for 2 rows: load-bound)
      if constexpr (MB > 1) asm("" : "+x"(w[q]));
    }
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      __m256 x = loadu8(X + (m0 + m) * K + k);
      if constexpr (JB > 1) asm("" : "+x"(x));  // the same, for the input row's vector
#pragma GCC unroll 8
      for (int q = 0; q < JB; ++q) s[m * JB + q] = _mm256_fmadd_ps(x, w[q], s[m * JB + q]);
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < MB; ++m) {
    float* y = Y + (m0 + m) * N + j;
    if constexpr (JB % 4 == 0) {
#pragma GCC unroll 2
      for (int g = 0; g < JB; g += 4) {
        const __m256* v = s + m * JB + g;
        __m128 r = hsum4(v[0], v[1], v[2], v[3]);
        if (acc) r = _mm_add_ps(r, _mm_loadu_ps(y + g));
        _mm_storeu_ps(y + g, r);
      }
    } else if constexpr (JB == 3) {
      const __m256* v = s + m * JB;
      alignas(16) float r[4];
      _mm_store_ps(r, hsum4(v[0], v[1], v[2], v[2]));
      for (int q = 0; q < 3; ++q) y[q] = acc ? y[q] + r[q] : r[q];
    } else {
      y[0] = acc ? y[0] + hsum(s[m]) : hsum(s[m]);
    }
    if (K8 < K)
      for (int q = 0; q < JB; ++q) {
        float t = 0.0f;
        for (int64_t k = K8; k < K; ++k) t += X[(m0 + m) * K + k] * value(W[(j + q) * K + k]);
        y[q] += t;
      }
  }
}

// Rows of X against weight rows j .. j + JB: blocks of 4 input rows when JB = 3 (12 sums, 3
// weights, 1 input: the 16 ymm registers) or 1, of 2 otherwise, then the one left.
template <int JB, typename WT>
MURPHY_AI void skinny_rows(const float* X, const WT* W, float* Y, int64_t M, int64_t N, int64_t K, int64_t j, bool acc) {
  int64_t m = 0;
  if constexpr (JB == 3 || JB == 1)
    for (; m + 4 <= M; m += 4) skinny_block<4, JB>(X, W, Y, N, K, m, j, acc);
  for (; m + 2 <= M; m += 2) skinny_block<2, JB>(X, W, Y, N, K, m, j, acc);
  if (m < M) skinny_block<1, JB>(X, W, Y, N, K, m, j, acc);
}

// The single-row product (gemm_gemv.inc) on ymm: one 4-way reduction, then the K % 8 tail in
// scalars.
MURPHY_AI __m256 load_w(const float* w, int64_t k) { return loadu8(w + k); }
MURPHY_AI __m256 load_w(const uint16_t* w, int64_t k) { return loadu8(w + k); }
MURPHY_AI __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
MURPHY_AI __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
template <typename WT>
MURPHY_AI void gemv_finish(const __m256* s, const float* x, const WT* const* w, int64_t K, int64_t k, int64_t j, float* y,
                           bool acc) {
  __m128 r = hsum4(s[0], s[1], s[2], s[3]);
  if (acc) r = _mm_add_ps(r, _mm_loadu_ps(y + j));
  alignas(16) float out[4];
  _mm_store_ps(out, r);
  for (int q = 0; q < 4; ++q) {
    for (int64_t kk = k; kk < K; ++kk) out[q] += x[kk] * value(w[q][kk]);
    y[j + q] = out[q];
  }
}
#include "gemm_gemv.inc"

template <typename WT>
void skinny(const float* X, const WT* W, float* Y, int64_t M, int64_t N, int64_t K, int64_t j0, int64_t j1, bool acc) {
  int64_t j = j0;
  if (M == 1)
    for (; j + 4 <= j1; j += 4) gemv_block(X, W, Y, N, K, j, acc);
  if (M >= 4)
    for (; j + 3 <= j1; j += 3) skinny_rows<3>(X, W, Y, M, N, K, j, acc);
  for (; j + 4 <= j1; j += 4) skinny_rows<4>(X, W, Y, M, N, K, j, acc);
  for (; j < j1; ++j) skinny_rows<1>(X, W, Y, M, N, K, j, acc);
}
void skinny_f32(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, int64_t j0, int64_t j1,
                bool acc) {
  skinny(X, W, Y, M, N, K, j0, j1, acc);
}
void skinny_widen(const float* X, const uint16_t* W, float* Y, int64_t M, int64_t N, int64_t K, int64_t j0, int64_t j1,
                  bool acc) {
  skinny(X, W, Y, M, N, K, j0, j1, acc);
}

// dst[i] = bf16(src[i]) as f32, round to nearest even; NaN stays NaN (quieted).
void round_bf16(const float* src, float* dst, int64_t n) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff),
                hi = _mm256_set1_epi32(int32_t(0xffff0000u)), quiet = _mm256_set1_epi32(0x00400000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), hi);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    _mm256_storeu_ps(dst + i,
                     _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_or_si256(u, quiet)), nan));
  }
  for (; i < n; ++i) dst[i] = bf16_bits_to_f32(f32_to_bf16(src[i]));
}

#undef MURPHY_AI
}  // namespace
}  // namespace v3
#pragma GCC pop_options

using gemm_driver::drive;
using gemm_driver::PackB;

// split_weight_rows' unit: from 4 input rows on the weight rows go in blocks of 3 (4 x 3), and
// units of 12 rows leave no chunk with 1-2 rows for narrower blocks (only N's last unit can).
static int64_t skinny_unit(int64_t M) { return M >= 4 ? 12 : 4; }

void gemm_f32(const GemmArgs& a) {
  const PackB pb = [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
    v3::pack_b(a.B, a.b_rs, a.b_cs, k0, kc, j0, nc, dst);
  };
  drive(kTile, a.M, a.N, a.K, a.A, a.a_rs, a.a_cs, v3::pack_a_block, pb, v3::strip_f32, a.C, a.ldc, a.beta);
}

void linear_small_m_f32(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate) {
  split_weight_rows(M, N, K, [&](int64_t j0, int64_t j1) { v3::skinny_f32(X, W, Y, M, N, K, j0, j1, accumulate); }, skinny_unit(M));
}

void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate) {
  // X rounded to bf16 (kept as f32), W widened while packing or streaming: the f32 kernels.
  gemm_driver::KeptBuf xr(0, size_t(M * K));
  parallel_for(M, grain_for(M, 100.0 * double(M) * double(K), 16), [&](int64_t r0, int64_t r1) {
    v3::round_bf16(X + r0 * K, xr.p + r0 * K, (r1 - r0) * K);
  });
  if (M <= kSkinnyRows) {
    split_weight_rows(M, N, K, [&](int64_t j0, int64_t j1) { v3::skinny_widen(xr.p, Wb, Y, M, N, K, j0, j1, accumulate); },
                      skinny_unit(M));
    return;
  }
  const PackB pb = [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
    v3::pack_b_widen(Wb, K, k0, kc, j0, nc, dst);
  };
  drive(kTile, M, N, K, xr.p, K, 1, v3::pack_a_block, pb, v3::strip_f32, Y, N, accumulate ? 1.0f : 0.0f);
}

#else  // no x86 GCC build: never called (matmul.cc checks the CPU first)
void gemm_f32(const GemmArgs&) { throw Error("matmul: AVX2 path not compiled in"); }
void linear_small_m_f32(const float*, const float*, float*, int64_t, int64_t, int64_t, bool) {
  throw Error("matmul: AVX2 path not compiled in");
}
void linear_forward_bf16(const float*, const uint16_t*, float*, int64_t, int64_t, int64_t, bool) {
  throw Error("matmul: AVX2 path not compiled in");
}
#endif

}  // namespace gemm_avx2
}  // namespace model
}  // namespace murphy
