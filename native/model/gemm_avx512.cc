// The AVX-512 matrix product (BLIS structure), fp32 and bf16. Called by matmul.cc only where
// the CPU has AVX-512F (the bf16 micro-kernel only where it also has AVX512_BF16).
//
//   C[M,N] (+)= A[M,K] B[K,N], strided views (GemmArgs), fp32 accumulation.
//
// The driver (task grid, shared packing, K slices) is gemm_driver.cc's, with 12 x 32 tiles; the
// packing routines are gemm_pack.inc's (shared with the AVX2 path) on 16-lane zmm primitives.
// Micro-kernel: MR = 12 rows x NR = 32 columns = 24 zmm accumulators; per k two B vectors and
// 12 broadcast A values (24 FMAs per 14 loads). The first K slice writes C (beta 0), adds to it
// (beta 1) or scales it (other beta); later slices add.
// bf16 (vdpbf16ps): operands are bf16 pairs along k (one 32-bit lane = k, k+1): the same
// driver and packing run on the pairs as 32-bit values, the micro-kernel does
// acc += a[2i] b[2i] + a[2i+1] b[2i+1] per lane. X is rounded to bf16 (nearest even) once per
// call; W is bf16 already. Without AVX512_BF16 the bf16 values are widened to f32 while
// packing and the f32 micro-kernel runs: the same products, summed in another order.
// Skinny products (decode, M <= kSkinnyRows): no packing; blocks of 4 weight rows x 4 input rows
// accumulate 16-lane partial dot products (16 zmm) and reduce them at the end in one tree
// (reduce16: 45 shuffles and adds for the 16 sums), so each weight row is read from memory once
// and reused from L1 for every input row. One input row (M = 1, a GEMV) takes 4 weight rows x 2
// k vectors per step (8 independent sums, 4 weight streams). K runs in whole vectors on plain
// loads, the tail masked (masked zmm loads cost load throughput).
#include "gemm.h"
#include "gemm_driver.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "../cpu/threads.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define MURPHY_HAVE_AVX512_GEMM 1
// GCC 12's AVX-512 casts and masked loads start from an `undefined` vector (`__Y = __Y`),
// which -Wmaybe-uninitialized reports wherever they are inlined: false positives.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace murphy {
namespace model {
namespace gemm_avx512 {

#ifdef MURPHY_HAVE_AVX512_GEMM
namespace {

constexpr int MR = 12;
constexpr int NR = 32;
using gemm_driver::CallBuf;
using gemm_driver::grain_for;
using gemm_driver::imin;
using gemm_driver::round_up;
using gemm_driver::split_weight_rows;
constexpr gemm_driver::Tile kTile{MR, NR};

}  // namespace

// ------------------------------------------------------------------------------------------
// AVX-512 code: packing and micro-kernels (no library templates in here, so nothing compiled
// for AVX-512 can be picked by the linker for another file's use).
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
namespace v4 {
namespace {

#define MURPHY_AI static inline __attribute__((always_inline))

#include "gemm_kernel_avx512.inc"

// In-register transpose of a 16 x 16 block of 32-bit values: r[i] lane j -> r[j] lane i.
MURPHY_AI void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(u[i], u[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(u[i], u[4 + i], 0xDD);
    t[8 + i] = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
  }
}

// The vector primitives of gemm_pack.inc (16-lane zmm), then the packing routines.
using Vec = __m512;
constexpr int VW = 16;
// (a plain load for whole vectors: masked zmm loads cost load throughput here, and packing a
// row-contiguous B with them took ~25% longer)
MURPHY_AI __m512 load_n(const float* p, int64_t n) { return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes(n), p); }
MURPHY_AI __m512 load_n(const uint16_t* p, int64_t n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes(n), p)), 16));
}
MURPHY_AI void store_n(float* d, __m512 v, int w) {
  if (w == 16) _mm512_storeu_ps(d, v);
  else _mm512_mask_storeu_ps(d, lanes(w), v);
}
MURPHY_AI void transpose(__m512 r[16]) { transpose16(r); }
MURPHY_AI __m512 load_tail(const float* p) {
  const __m512i v = _mm512_castps_si512(_mm512_loadu_ps(p + MR - 16));
  return _mm512_castsi512_ps(_mm512_alignr_epi32(v, v, 16 - MR));
}

#include "gemm_pack.inc"

// One MR-row strip of a task across its column block.
void strip_f32(int64_t kc, const float* ap, const float* bp, int64_t ncols, float* c, int64_t ldc, int mr, int mode,
               float beta) {
  for (int64_t j = 0; j < ncols; j += NR)
    kernel<false>(kc, ap, bp + j * kc, c + j, ldc, mr, int(imin(NR, ncols - j)), mode, beta);
}

// ---- skinny products: Y[m, j] (+)= sum_k X[m, k] W[j, k] for rows j in [j0, j1).
// Load<T> gives 16 f32 lanes of a weight row at k (masked past K).
MURPHY_AI __m512 load_w(const float* w, int64_t k, __mmask16 m) { return _mm512_maskz_loadu_ps(m, w + k); }
MURPHY_AI __m512 load_w(const uint16_t* w, int64_t k, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, w + k)), 16));
}
MURPHY_AI __m512 load_w(const float* w, int64_t k) { return _mm512_loadu_ps(w + k); }
MURPHY_AI __m512 load_w(const uint16_t* w, int64_t k) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k))), 16));
}

// Y[m0 .. m0 + MB, j .. j + JB) (+)= X W^T over all of K, 16 k values per step (the last masked).
// (One loop with the mask computed per step: a helper taking the sums by reference made GCC keep
// some blocks' sums in memory.)
template <int MB, int JB, typename WT>
MURPHY_AI void skinny_block(const float* X, int64_t ldx, const WT* W, float* Y, int64_t N, int64_t K, int64_t m0,
                            int64_t j, bool acc) {
  __m512 s[MB][JB];
#pragma GCC unroll 4
  for (int m = 0; m < MB; ++m)
#pragma GCC unroll 8
    for (int q = 0; q < JB; ++q) s[m][q] = _mm512_setzero_ps();
  // the block ahead (gemm_driver.h): 16 values of each row per step; the first block of input
  // rows only (the others find the rows in L1)
  constexpr int kStepBytes = JB * 16 * int(sizeof(WT));
  const char* pf = m0 == 0 ? gemm_driver::skinny_prefetch_base<kStepBytes>(W, K * int64_t(sizeof(WT)), N, j, JB) : nullptr;
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {  // plain loads (a masked load per step costs load throughput)
    gemm_driver::skinny_prefetch_step<kStepBytes>(pf, k / 16);
    __m512 w[JB];
#pragma GCC unroll 8
    for (int q = 0; q < JB; ++q) w[q] = load_w(W + (j + q) * K, k);
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      const __m512 x = _mm512_loadu_ps(X + (m0 + m) * ldx + k);
#pragma GCC unroll 8
      for (int q = 0; q < JB; ++q) s[m][q] = _mm512_fmadd_ps(x, w[q], s[m][q]);
    }
  }
  if (k < K) {  // the K % 16 tail, masked
    const __mmask16 mk = lanes(K - k);
    __m512 w[JB];
#pragma GCC unroll 8
    for (int q = 0; q < JB; ++q) w[q] = load_w(W + (j + q) * K, k, mk);
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      const __m512 x = _mm512_maskz_loadu_ps(mk, X + (m0 + m) * ldx + k);
#pragma GCC unroll 8
      for (int q = 0; q < JB; ++q) s[m][q] = _mm512_fmadd_ps(x, w[q], s[m][q]);
    }
  }
  store_block<MB, JB>(s, Y + m0 * N + j, N, acc);
}

// Blocks of 4 input rows (16 zmm sums with JB = 4, reduced by one tree), then the 1-3 left.
template <int JB, typename WT>
MURPHY_AI void skinny_rows(const float* X, int64_t ldx, const WT* W, float* Y, int64_t M, int64_t N, int64_t K,
                           int64_t j, bool acc) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) skinny_block<4, JB>(X, ldx, W, Y, N, K, m, j, acc);
  switch (M - m) {
    case 3: skinny_block<3, JB>(X, ldx, W, Y, N, K, m, j, acc); break;
    case 2: skinny_block<2, JB>(X, ldx, W, Y, N, K, m, j, acc); break;
    case 1: skinny_block<1, JB>(X, ldx, W, Y, N, K, m, j, acc); break;
    default: break;
  }
}

// The single-row product (gemm_gemv.inc) on zmm: the K % 16 tail masked, then one 4-way reduction.
MURPHY_AI __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
MURPHY_AI __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
template <typename WT>
MURPHY_AI void gemv_finish(__m512* s, const float* x, const WT* const* w, int64_t K, int64_t k, int64_t j, float* y,
                           bool acc) {
  if (k < K) {
    const __mmask16 mk = lanes(K - k);
    const __m512 x0 = _mm512_maskz_loadu_ps(mk, x + k);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) s[q] = _mm512_fmadd_ps(x0, load_w(w[q], k, mk), s[q]);
  }
  store_sums<4>(s, y + j, acc);
}
// The block-ahead prefetch of large weights (gemm_driver.h): fp32 and bf16 rows (measured on Zen 4).
template <typename WT>
constexpr bool kPrefetchRows = true;
#include "gemm_gemv.inc"

template <typename WT>
void skinny(const float* X, int64_t ldx, const WT* W, float* Y, int64_t M, int64_t N, int64_t K, int64_t j0, int64_t j1,
            bool acc) {
  int64_t j = j0;
  if (M == 1)
    for (; j + 4 <= j1; j += 4) gemv_block(X, W, Y, N, K, j, acc);
  for (; j + 4 <= j1; j += 4) skinny_rows<4>(X, ldx, W, Y, M, N, K, j, acc);
  for (; j < j1; ++j) skinny_rows<1>(X, ldx, W, Y, M, N, K, j, acc);
}

void skinny_f32(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, int64_t j0, int64_t j1,
                bool acc) {
  skinny(X, K, W, Y, M, N, K, j0, j1, acc);
}
// X already rounded to bf16 (and widened back); W widened on the fly.
void skinny_widen(const float* X, const uint16_t* W, float* Y, int64_t M, int64_t N, int64_t K, int64_t j0, int64_t j1,
                  bool acc) {
  skinny(X, K, W, Y, M, N, K, j0, j1, acc);
}

// f32 -> bf16 rounded to nearest even, kept as f32 (low 16 bits zero); NaN stays NaN.
MURPHY_AI __m512i round_bf16_bits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  r = _mm512_and_si512(r, _mm512_set1_epi32(int32_t(0xffff0000u)));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
}

// rows of X [*, K] -> bf16-rounded f32 [*, K] (dst may equal src)
void round_rows_bf16(const float* X, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(n - i);
    _mm512_mask_storeu_epi32(dst + i, m, round_bf16_bits(_mm512_maskz_loadu_ps(m, X + i)));
  }
}

// 16 bf16 pairs (as 32-bit values: pair i = bf16(x[2i]) | bf16(x[2i + 1]) << 16, rounded to
// nearest even) of the 32 floats at x, of which the first n are read (the rest are 0).
MURPHY_AI __m512i pairs16(const float* x, int64_t n) {
  __m512 a, b;
  if (n >= 32) {  // plain loads for whole vectors
    a = _mm512_loadu_ps(x);
    b = _mm512_loadu_ps(x + 16);
  } else {
    a = _mm512_maskz_loadu_ps(lanes(n), x);
    b = _mm512_maskz_loadu_ps(lanes(n - 16), x + 16);
  }
  // 32 bf16 (top halves) in k order: even k in the low 16 bits of each pair
  return _mm512_permutex2var_epi16(
      round_bf16_bits(a),
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17,
                       15, 13, 11, 9, 7, 5, 3, 1),
      round_bf16_bits(b));
}

// row of X [K] -> bf16 pairs [Kp] (as 32-bit values), zero past K.
void pair_row_bf16(const float* x, uint32_t* dst, int64_t K, int64_t Kp) {
  for (int64_t kp = 0; kp < Kp; kp += 16) _mm512_mask_storeu_epi32(dst + kp, lanes(Kp - kp), pairs16(x + 2 * kp, K - 2 * kp));
}

// The bf16 forward's A packing straight from the fp32 rows of X (a PackA, gemm_driver.h, over
// pair units; x_cs carries K, the floats of a row): rows [i0, i0 + rows) at pairs [k0, k0 + kc)
// -> strip s at dst + s MR kc, dst[k MR + r] = pair k0 + k of row i0 + s MR + r (zero past K
// and past the rows). Each row's 32 floats are rounded and paired in a register, then 16 rows
// are transposed (as transpose_pack), so X is read once per row block and not first copied
// into a pairs buffer (one pass over X and one parallel region less per product).
void pack_a_pairs(const float* X, int64_t ldx, int64_t x_cs, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                  float* dst) {
  const int64_t K = x_cs;
  for (int64_t r0 = 0; r0 < rows; r0 += MR) {
    const int mr = int(imin(MR, rows - r0));
    float* d = dst + r0 * kc;
    for (int64_t kk = 0; kk < kc; kk += 16) {
      const int64_t k = 2 * (k0 + kk);
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        r[i] = i < mr ? _mm512_castsi512_ps(pairs16(X + (i0 + r0 + i) * ldx + k, K - k)) : _mm512_setzero_ps();
      transpose16(r);
      const int64_t n = imin(16, kc - kk);
      for (int64_t i = 0; i < n; ++i) store_n(d + (kk + i) * MR, r[i], kk + i + 1 < kc ? 16 : MR);  // (as transpose_pack)
    }
  }
}

#undef MURPHY_AI
}  // namespace
}  // namespace v4
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4,avx512bf16")
namespace v4bf {
namespace {
#define MURPHY_AI static inline __attribute__((always_inline))
#include "gemm_kernel_avx512.inc"
#undef MURPHY_AI
void strip_bf16(int64_t kc, const float* ap, const float* bp, int64_t ncols, float* c, int64_t ldc, int mr, int mode,
                float beta) {
  for (int64_t j = 0; j < ncols; j += NR)
    kernel<true>(kc, ap, bp + j * kc, c + j, ldc, mr, int(imin(NR, ncols - j)), mode, beta);
}

// Y[m, j] (+)= sum over pairs of Xp[m, kp] . Wp[j, kp] (vdpbf16ps), rows j in [j0, j1).
// Xp [M, ldx pairs] zero-padded past K; W [N, K] bf16 (masked past K).
// Y[m0 .. m0 + MB, j .. j + JB) (+)= Xp . W over all of K, 32 bf16 values (16 pairs) per step.
template <int MB, int JB>
inline __attribute__((always_inline)) void block(const uint32_t* Xp, int64_t ldx, const uint16_t* W, float* Y,
                                                 int64_t N, int64_t K, int64_t m0, int64_t j, bool acc) {
  __m512 s[MB][JB];
#pragma GCC unroll 4
  for (int m = 0; m < MB; ++m)
#pragma GCC unroll 8
    for (int q = 0; q < JB; ++q) s[m][q] = _mm512_setzero_ps();
  // the block ahead (gemm_driver.h): one 64-byte line of each row per step; the first block of
  // input rows only (the others find the rows in L1)
  const char* pf = m0 == 0 ? gemm_driver::skinny_prefetch_base<JB * 64>(W, K * 2, N, j, JB) : nullptr;
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {  // plain loads
    gemm_driver::skinny_prefetch_step<JB * 64>(pf, k / 32);
    __m512bh w[JB];
#pragma GCC unroll 8
    for (int q = 0; q < JB; ++q) w[q] = (__m512bh)_mm512_loadu_si512(W + (j + q) * K + k);
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      const __m512bh x = (__m512bh)_mm512_loadu_si512(Xp + (m0 + m) * ldx + k / 2);
#pragma GCC unroll 8
      for (int q = 0; q < JB; ++q) s[m][q] = _mm512_dpbf16_ps(s[m][q], x, w[q]);
    }
  }
  if (k < K) {  // the K % 32 tail, masked (Xp is zero past K)
    const __mmask32 mk = __mmask32((1u << (K - k)) - 1u);
    __m512bh w[JB];
#pragma GCC unroll 8
    for (int q = 0; q < JB; ++q) w[q] = (__m512bh)_mm512_maskz_loadu_epi16(mk, W + (j + q) * K + k);
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      const __m512bh x = (__m512bh)_mm512_loadu_si512(Xp + (m0 + m) * ldx + k / 2);
#pragma GCC unroll 8
      for (int q = 0; q < JB; ++q) s[m][q] = _mm512_dpbf16_ps(s[m][q], x, w[q]);
    }
  }
  store_block<MB, JB>(s, Y + m0 * N + j, N, acc);
}

template <int JB>
inline __attribute__((always_inline)) void rows(const uint32_t* Xp, int64_t ldx, const uint16_t* W, float* Y, int64_t M,
                                                int64_t N, int64_t K, int64_t j, bool acc) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) block<4, JB>(Xp, ldx, W, Y, N, K, m, j, acc);
  switch (M - m) {
    case 3: block<3, JB>(Xp, ldx, W, Y, N, K, m, j, acc); break;
    case 2: block<2, JB>(Xp, ldx, W, Y, N, K, m, j, acc); break;
    case 1: block<1, JB>(Xp, ldx, W, Y, N, K, m, j, acc); break;
    default: break;
  }
}

void skinny_dp(const uint32_t* Xp, int64_t ldx, const uint16_t* W, float* Y, int64_t M, int64_t N, int64_t K,
               int64_t j0, int64_t j1, bool acc) {
  int64_t j = j0;
  if (M == 1)
    for (; j + 8 <= j1; j += 8) block<1, 8>(Xp, ldx, W, Y, N, K, 0, j, acc);
  for (; j + 4 <= j1; j += 4) rows<4>(Xp, ldx, W, Y, M, N, K, j, acc);
  for (; j < j1; ++j) rows<1>(Xp, ldx, W, Y, M, N, K, j, acc);
}
}  // namespace
}  // namespace v4bf
#pragma GCC pop_options

using gemm_driver::drive;
using gemm_driver::PackB;

void gemm_f32(const GemmArgs& a) {
  const PackB pb = [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
    v4::pack_b(a.B, a.b_rs, a.b_cs, k0, kc, j0, nc, dst);
  };
  drive(kTile, a.M, a.N, a.K, a.A, a.a_rs, a.a_cs, v4::pack_a_block, pb, v4::strip_f32, a.C, a.ldc, a.beta);
}

void linear_small_m_f32(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate) {
  split_weight_rows(M, N, K, [&](int64_t j0, int64_t j1) { v4::skinny_f32(X, W, Y, M, N, K, j0, j1, accumulate); });
}

void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate,
                         bool dpbf16) {
  const float beta = accumulate ? 1.0f : 0.0f;
  if (!dpbf16) {
    // X rounded to bf16 (kept as f32), W widened while packing: the f32 kernels.
    gemm_driver::KeptBuf xr(0, size_t(M * K));
    parallel_for(M, grain_for(M, 100.0 * double(M) * double(K), 16), [&](int64_t r0, int64_t r1) { v4::round_rows_bf16(X + r0 * K, xr.p + r0 * K, (r1 - r0) * K); });
    if (M <= kSkinnyRows) {
      split_weight_rows(M, N, K, [&](int64_t j0, int64_t j1) { v4::skinny_widen(xr.p, Wb, Y, M, N, K, j0, j1, accumulate); });
      return;
    }
    const PackB pb = [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
      v4::pack_b_widen(Wb, K, k0, kc, j0, nc, dst);
    };
    drive(kTile, M, N, K, xr.p, K, 1, v4::pack_a_block, pb, v4::strip_f32, Y, N, beta);
    return;
  }
  const int64_t Kp = (K + 1) / 2;
  if (M <= kSkinnyRows) {
    // vdpbf16ps: X as bf16 pairs [M, ldx] (zero past K), padded to whole zmm for the skinny path.
    // Each thread pairs X into its own kept buffer at its first chunk of the call (M K floats,
    // ~2/N of its share of the product): a buffer written by the caller every call would be read
    // by the other threads from the caller's cache (a cross-core transfer of every line per call,
    // where X itself, unchanged, is already in their caches).
    const int64_t ldx = round_up(Kp, 16);
    const size_t xfloats = size_t(M * ldx);
    if (xfloats > gemm_driver::kKeepFloats) {  // (K > 1M: one buffer of the call, paired by the caller)
      gemm_driver::KeptBuf xp(0, xfloats);
      uint32_t* Xp = reinterpret_cast<uint32_t*>(xp.p);
      for (int64_t r = 0; r < M; ++r) v4::pair_row_bf16(X + r * K, Xp + r * ldx, K, ldx);
      split_weight_rows(M, N, K, [&](int64_t j0, int64_t j1) { v4bf::skinny_dp(Xp, ldx, Wb, Y, M, N, K, j0, j1, accumulate); });
      return;
    }
    static std::atomic<uint64_t> s_calls{0};
    const uint64_t call = s_calls.fetch_add(1, std::memory_order_relaxed) + 1;
    split_weight_rows(M, N, K, [&](int64_t j0, int64_t j1) {
      thread_local uint64_t t_call = 0;  // the call whose X this thread's buffer holds
      uint32_t* Xp = reinterpret_cast<uint32_t*>(gemm_driver::KeptBuf(1, xfloats).p);
      if (t_call != call) {
        for (int64_t r = 0; r < M; ++r) v4::pair_row_bf16(X + r * K, Xp + r * ldx, K, ldx);
        t_call = call;
      }
      v4bf::skinny_dp(Xp, ldx, Wb, Y, M, N, K, j0, j1, accumulate);
    });
    return;
  }
  // W as pairs: W[j, 2kp], W[j, 2kp + 1] are one 32-bit value when K is even; an odd K (no
  // model has one) gets a padded copy. X is rounded and paired while its blocks are packed.
  const float* Wp = reinterpret_cast<const float*>(Wb);
  std::unique_ptr<CallBuf> pad;
  if (K % 2 != 0) {
    pad = std::make_unique<CallBuf>(size_t(N * Kp));
    uint32_t* d = reinterpret_cast<uint32_t*>(pad->p);
    parallel_for(N, 64, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t kp = 0; kp < Kp; ++kp) {
          const uint32_t lo = Wb[j * K + 2 * kp], hi = 2 * kp + 1 < K ? Wb[j * K + 2 * kp + 1] : 0;
          d[j * Kp + kp] = lo | (hi << 16);
        }
    });
    Wp = pad->p;
  }
  const PackB pb = [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
    v4::pack_b(Wp, 1, Kp, k0, kc, j0, nc, dst);
  };
  drive(kTile, M, N, Kp, X, K, K, v4::pack_a_pairs, pb, v4bf::strip_bf16, Y, N, beta);
}

void pair_rows_bf16(const float* X, int64_t K, int64_t r0, int64_t r1, uint32_t* Xp, int64_t ldx) {
  for (int64_t r = r0; r < r1; ++r) v4::pair_row_bf16(X + r * K, Xp + r * ldx, K, ldx);
}

void pack_pair_panel(const uint32_t* P, int64_t ld, int64_t Kp, int64_t j0, int64_t nc, uint32_t* dst) {
  v4::pack_b(reinterpret_cast<const float*>(P), 1, ld, 0, Kp, j0, nc, reinterpret_cast<float*>(dst));
}

#else  // no AVX-512 build: never called (matmul.cc checks the CPU first)
void gemm_f32(const GemmArgs&) { throw Error("matmul: AVX-512 path not compiled in"); }
void pair_rows_bf16(const float*, int64_t, int64_t, int64_t, uint32_t*, int64_t) {
  throw Error("matmul: AVX-512 path not compiled in");
}
void pack_pair_panel(const uint32_t*, int64_t, int64_t, int64_t, int64_t, uint32_t*) {
  throw Error("matmul: AVX-512 path not compiled in");
}
void linear_small_m_f32(const float*, const float*, float*, int64_t, int64_t, int64_t, bool) {
  throw Error("matmul: AVX-512 path not compiled in");
}
void linear_forward_bf16(const float*, const uint16_t*, float*, int64_t, int64_t, int64_t, bool, bool) {
  throw Error("matmul: AVX-512 path not compiled in");
}
#endif

}  // namespace gemm_avx512
}  // namespace model
}  // namespace murphy
