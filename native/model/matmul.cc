// Op family "matmul" on the CPU: C[M,N] = op(A)[M,K] op(B)[K,N] (+ beta C), fp32 accumulation.
//
// Reference (plain loops, the spec):  C[i,j] = sum_k A(i,k) B(k,j)  (+ beta C[i,j])
// bf16 weights (linear_forward_bf16):  Y[i,j] = sum_k bf16(X[i,k]) W[j,k]   (W bf16, X rounded
// to nearest even, products and sums in fp32 -- exact products, fp32 accumulation).
// Fast paths, chosen once per process from the CPU (GemmPath, gemm.h; docs/kernels.md "CPU GEMM"):
//   AVX-512 (gemm_avx512.cc): BLIS tiles, a 12 x 32 micro-kernel on 24 zmm accumulators, the
//     2D tile space shared by the threads; bf16 with vdpbf16ps where the CPU has AVX512_BF16.
//   AMX (gemm_amx.cc): the bf16 products of more than kSkinnyRows rows on AMX tiles where the
//     CPU and the OS allow them (cpu_has_amx_bf16); everything else as AVX-512 with vdpbf16ps.
//   AVX2 (gemm_avx2.cc): the same driver (gemm_driver.cc) with a 6 x 16 micro-kernel on 12 ymm
//     accumulators; bf16 weights widened to f32 while packing.
//   Baseline (below): the older GotoBLAS structure, for CPUs without AVX2:
//     for each K slice of KC: pack A into row panels of MR (k-major: MR values per k)
//       for each N chunk of NC: pack B into column panels of 16 (k-major: 16 values per k)
//         parallel over MC x NT output tiles: an MR x 16 register-blocked micro-kernel
//     written with GCC vector types.
//     bf16 there: X rounded, W widened to f32 in chunks of rows, then the f32 product.
// Skinny products (decode, M <= kSkinnyRows) stream the weights once with dot products.
#pragma GCC optimize("fp-contract=fast")
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif

#include "../cpu/simd.h"
#include "../cpu/threads.h"
#include "gemm.h"
#include "murphy/model/ops.h"

#define MURPHY_SIMD_BODY "../model/matmul_simd.inc"
#include "../cpu/simd_multiversion.inc"

namespace murphy {
namespace model {

// ------------------------------------------------------------------------------------
// Reference

static void gemm_reference(const GemmArgs& a) {
  parallel_for(a.M, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < a.N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < a.K; ++k) s += double(a.A[i * a.a_rs + k * a.a_cs]) * a.B[k * a.b_rs + j * a.b_cs];
        float* c = a.C + i * a.ldc + j;
        *c = a.beta == 0.0f ? float(s) : float(s + double(a.beta) * *c);
      }
  });
}

// ------------------------------------------------------------------------------------
// Fast path

namespace {

constexpr int NR = 16;
constexpr int64_t KC = 256;
constexpr int64_t MC_ROWS = 96;   // rows per tile (multiple of 6 and 12)
constexpr int64_t NT = 128;       // columns per tile
constexpr int64_t NC = 2048;      // columns per packed B chunk

typedef float v16 __attribute__((vector_size(64)));

// acc[r] += a[k, r] * b[k, :] for k < kc; then C (mr x nr valid) = acc (+ beta C).
template <int MR>
inline __attribute__((always_inline)) void micro_body(int64_t kc, const float* __restrict ap,
                                                      const float* __restrict bp, float* c, int64_t ldc, int mr,
                                                      int nr, int mode /*0: C = acc, 1: C += acc, 2: C = acc + beta C*/,
                                                      float beta) {
  v16 acc[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc[r] = v16{0};
  for (int64_t k = 0; k < kc; ++k) {
    v16 b;
    std::memcpy(&b, bp + k * NR, sizeof b);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc[r] += ap[k * MR + r] * b;
  }
  if (mr == MR && nr == NR) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      float* cr = c + r * ldc;
      v16 cv;
      if (mode == 0) {
        cv = acc[r];
      } else {
        std::memcpy(&cv, cr, sizeof cv);
        cv = mode == 1 ? cv + acc[r] : beta * cv + acc[r];
      }
      std::memcpy(cr, &cv, sizeof cv);
    }
    return;
  }
  float tmp[MR * NR];
  std::memcpy(tmp, acc, sizeof tmp);
  for (int r = 0; r < mr; ++r)
    for (int j = 0; j < nr; ++j) {
      float* cr = c + r * ldc + j;
      float x = tmp[r * NR + j];
      *cr = mode == 0 ? x : (mode == 1 ? *cr + x : beta * *cr + x);
    }
}

// The x86-64 baseline's micro-kernel (6 x 16; AVX2 and AVX-512 CPUs take gemm_avx2.cc / gemm_avx512.cc).
constexpr int kBaseMR = 6;
void micro_base(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr, int mode,
                float beta) {
  micro_body<kBaseMR>(kc, ap, bp, c, ldc, mr, nr, mode, beta);
}

struct AlignedBuf {
  float* p = nullptr;
  explicit AlignedBuf(size_t n) {
    p = static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64 + 64));
    if (!p) throw Error("matmul: out of memory allocating " + std::to_string(n * 4) + " bytes of packing space", ErrorCode::NoMem);
  }
  ~AlignedBuf() { std::free(p); }
};

void gemm_fast(const GemmArgs& a) {
  const int MR = kBaseMR;
  const int64_t M = a.M, N = a.N, K = a.K;
  const int64_t n_apanels = (M + MR - 1) / MR;
  AlignedBuf apack(static_cast<size_t>(n_apanels) * MR * KC);
  AlignedBuf bpack(static_cast<size_t>((std::min(N, NC) + NR - 1) / NR) * NR * KC);
  for (int64_t k0 = 0; k0 < K; k0 += KC) {
    const int64_t kc = std::min(KC, K - k0);
    // pack A: panel p holds rows [p MR, p MR + MR), k-major, zero-padded
    parallel_for(n_apanels, 8, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        float* dst = apack.p + p * MR * kc;
        const int64_t i0 = p * MR;
        const int rows = int(std::min<int64_t>(MR, M - i0));
        if (a.a_cs == 1) {  // rows contiguous in k: read each row front to back (a column walk
                            // thrashes L1 when the row stride is a multiple of 4 KiB)
          for (int r = 0; r < MR; ++r) {
            const float* src = a.A + (i0 + r) * a.a_rs + k0;
            for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = r < rows ? src[k] : 0.0f;
          }
          continue;
        }
        for (int64_t k = 0; k < kc; ++k) {
          const float* src = a.A + i0 * a.a_rs + (k0 + k) * a.a_cs;
          int r = 0;
          for (; r < rows; ++r) dst[k * MR + r] = src[r * a.a_rs];
          for (; r < MR; ++r) dst[k * MR + r] = 0.0f;
        }
      }
    });
    const int mode = k0 == 0 ? (a.beta == 0.0f ? 0 : (a.beta == 1.0f ? 1 : 2)) : 1;
    for (int64_t n0 = 0; n0 < N; n0 += NC) {
      const int64_t nc = std::min(NC, N - n0);
      const int64_t n_bpanels = (nc + NR - 1) / NR;
      parallel_for(n_bpanels, 4, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          float* dst = bpack.p + p * NR * kc;
          const int64_t j0 = n0 + p * NR;
          const int cols = int(std::min<int64_t>(NR, N - j0));
          if (a.b_rs == 1) {  // columns contiguous in k (W in the forward): read each front to back
            for (int j = 0; j < NR; ++j) {
              const float* src = a.B + k0 + (j0 + j) * a.b_cs;
              for (int64_t k = 0; k < kc; ++k) dst[k * NR + j] = j < cols ? src[k] : 0.0f;
            }
            continue;
          }
          for (int64_t k = 0; k < kc; ++k) {
            const float* src = a.B + (k0 + k) * a.b_rs + j0 * a.b_cs;
            int j = 0;
            if (a.b_cs == 1 && cols == NR) {
              std::memcpy(dst + k * NR, src, NR * 4);
              continue;
            }
            for (; j < cols; ++j) dst[k * NR + j] = src[j * a.b_cs];
            for (; j < NR; ++j) dst[k * NR + j] = 0.0f;
          }
        }
      });
      const int64_t tm = (M + MC_ROWS - 1) / MC_ROWS, tn = (nc + NT - 1) / NT;
      parallel_for(tm * tn, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t bi = t / tn, bj = t % tn;
          const int64_t i_end = std::min(M, (bi + 1) * MC_ROWS);
          const int64_t j_end = std::min(nc, (bj + 1) * NT);
          for (int64_t j = bj * NT; j < j_end; j += NR) {
            const float* bp = bpack.p + (j / NR) * NR * kc;
            const int nr = int(std::min<int64_t>(NR, j_end - j));
            for (int64_t i = bi * MC_ROWS; i < i_end; i += MR) {
              const int mr = int(std::min<int64_t>(MR, i_end - i));
              micro_base(kc, apack.p + (i / MR) * MR * kc, bp, a.C + i * a.ldc + n0 + j, a.ldc, mr, nr, mode, a.beta);
            }
          }
        }
      });
    }
  }
}

// y[m, j] (+)= sum_k x[m, k] w[j, k]: W streamed once, rows of X reused from cache.
void linear_small_m(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool acc) {
  parallel_for(N, 64, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t m = 0; m < M; ++m) {
        float s = MURPHY_SIMD_CALL(dot, X + m * K, W + j * K, K);
        Y[m * N + j] = acc ? Y[m * N + j] + s : s;
      }
  });
}

thread_local GemmPath t_forced = GemmPath::Auto;

// The most capable path this CPU runs: forced paths resolve against it.
GemmPath detect_capable() {
  if (simd_level_index() < 1) return GemmPath::Baseline;
  if (simd_level_index() < 2) return GemmPath::Avx2;
  if (cpu_has_amx_bf16()) return GemmPath::AmxBf16;
  return cpu_has_avx512_bf16() ? GemmPath::Avx512Bf16 : GemmPath::Avx512;
}

// What Auto takes: the most capable path, but for CPUs built with AMX whose tiles this process
// may not use (Linux before 5.16, MURPHY_AMX=0): their vdpbf16ps does half the fp32 FMA's
// multiply-adds per cycle, so the widening avx512 path ran the packed bf16 products 0.93-1.04x
// fp32 where vdpbf16ps ran them 0.61-0.73x (the decode ones 0.83-1.15x as fast as vdpbf16ps;
// docs/kernels.md, "bf16 on AMX").
GemmPath detect_best() {
  const GemmPath c = detect_capable();
  return c == GemmPath::Avx512Bf16 && cpu_has_amx_bf16_hardware() ? GemmPath::Avx512 : c;
}

// Capability order of the concrete paths: 0 = most capable.
int rank(GemmPath p) {
  switch (p) {
    case GemmPath::AmxBf16: return 0;
    case GemmPath::Avx512Bf16: return 1;
    case GemmPath::Avx512: return 2;
    case GemmPath::Avx2: return 3;
    default: return 4;  // Baseline
  }
}

// A forced or configured path as this CPU runs it: Generic is the best of AVX2 and the
// baseline; a path the CPU lacks falls back to the best it has.
GemmPath resolve(GemmPath f, GemmPath best) {
  if (f == GemmPath::Auto) return best;
  if (f == GemmPath::Reference) return f;
  if (f == GemmPath::Generic) f = simd_level_index() >= 1 ? GemmPath::Avx2 : GemmPath::Baseline;
  return rank(f) < rank(best) ? best : f;
}

// What Auto means in this process: the CPU's best, or MURPHY_GEMM_PATH (read once).
GemmPath default_path() {
  static const GemmPath p = [] {
    const GemmPath best = detect_best();
    const char* env = std::getenv("MURPHY_GEMM_PATH");
    if (!env || !*env) return best;
    return resolve(parse_gemm_path(env, "MURPHY_GEMM_PATH"), detect_capable());
  }();
  return p;
}

// The path this product takes: the forced one where the CPU has it, else the best below it.
GemmPath active_path() {
  if (use_reference_ops()) return GemmPath::Reference;
  const GemmPath f = t_forced;
  return f == GemmPath::Auto ? default_path() : resolve(f, detect_capable());
}

// Y (+)= bf16(X) Wb^T on the baseline path: X rounded to bf16, W widened in chunks of rows.
void linear_forward_bf16_generic(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K,
                                 bool acc) {
  std::vector<float> xr(size_t(M * K));
  MURPHY_SIMD_CALL(round_to_bf16, X, xr.data(), M * K);
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(N, (int64_t(4) << 20) / std::max<int64_t>(K, 1)));
  std::vector<float> w(size_t(rows * K));
  std::vector<float> y(size_t(M * rows));
  for (int64_t j0 = 0; j0 < N; j0 += rows) {
    const int64_t n = std::min(rows, N - j0);
    MURPHY_SIMD_CALL(widen_bf16, Wb + j0 * K, w.data(), n * K);
    if (M <= kSkinnyRows) {
      linear_small_m(xr.data(), w.data(), y.data(), M, n, K, false);
    } else {
      GemmArgs a;
      a.M = M, a.N = n, a.K = K;
      a.A = xr.data(), a.a_rs = K, a.a_cs = 1;
      a.B = w.data(), a.b_rs = 1, a.b_cs = K;
      a.C = y.data(), a.ldc = n, a.beta = 0.0f;
      gemm_fast(a);
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float* o = Y + i * N + j0 + j;
        *o = acc ? *o + y[size_t(i * n + j)] : y[size_t(i * n + j)];
      }
  }
}

void check_sizes(int64_t M, int64_t N, int64_t K, const char* what) {
  if (M < 0 || N < 0 || K < 0)
    throw Error(std::string(what) + ": negative size (M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " +
                std::to_string(K) + ")");
}

}  // namespace

void set_gemm_path(GemmPath p) { t_forced = p; }
GemmPath gemm_forced_path() { return t_forced; }
GemmPath gemm_path() { return active_path(); }
GemmPath gemm_best_path() { return detect_best(); }
const char* gemm_path_name(GemmPath p) {
  switch (p) {
    case GemmPath::AmxBf16: return "amx-bf16";
    case GemmPath::Avx512Bf16: return "avx512-bf16";
    case GemmPath::Avx512: return "avx512";
    case GemmPath::Avx2: return "avx2";
    case GemmPath::Baseline: return "baseline";
    case GemmPath::Generic: return simd_level_index() >= 1 ? "avx2" : "baseline";
    case GemmPath::Reference: return "reference";
    default: return "auto";
  }
}
GemmPath parse_gemm_path(const std::string& s, const char* what) {
  if (s == "auto") return GemmPath::Auto;
  if (s == "amx-bf16") return GemmPath::AmxBf16;
  if (s == "avx512-bf16") return GemmPath::Avx512Bf16;
  if (s == "avx512") return GemmPath::Avx512;
  if (s == "avx2") return GemmPath::Avx2;
  if (s == "baseline") return GemmPath::Baseline;
  if (s == "generic") return GemmPath::Generic;
  if (s == "reference") return GemmPath::Reference;
  throw Error(std::string(what) + " must be 'auto', 'amx-bf16', 'avx512-bf16', 'avx512', 'avx2', 'baseline', 'generic' or 'reference'; got '" + s + "'");
}
bool gemm_path_available(GemmPath p) {
  if (p == GemmPath::Auto || p == GemmPath::Generic || p == GemmPath::Reference) return true;
  return rank(p) >= rank(detect_capable());
}

void gemm_cpu(const GemmArgs& a) {
  check_sizes(a.M, a.N, a.K, "matmul");
  if (a.M == 0 || a.N == 0) return;
  if (a.K == 0) {
    for (int64_t i = 0; i < a.M; ++i)
      for (int64_t j = 0; j < a.N; ++j) {
        float* c = a.C + i * a.ldc + j;
        *c = a.beta == 0.0f ? 0.0f : a.beta * *c;
      }
    return;
  }
  switch (active_path()) {
    case GemmPath::Reference: return gemm_reference(a);
    case GemmPath::Baseline: return gemm_fast(a);
    case GemmPath::Avx2: return gemm_avx2::gemm_f32(a);
    default: return gemm_avx512::gemm_f32(a);
  }
}

void linear_forward(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate) {
  const GemmPath p = active_path();
  if (M <= kSkinnyRows && M > 0 && N > 0 && K > 0 && p != GemmPath::Reference) {
    check_sizes(M, N, K, "matmul");
    if (p == GemmPath::Baseline) return linear_small_m(X, W, Y, M, N, K, accumulate);
    if (p == GemmPath::Avx2) return gemm_avx2::linear_small_m_f32(X, W, Y, M, N, K, accumulate);
    return gemm_avx512::linear_small_m_f32(X, W, Y, M, N, K, accumulate);
  }
  GemmArgs a;
  a.M = M, a.N = N, a.K = K;
  a.A = X, a.a_rs = K, a.a_cs = 1;
  a.B = W, a.b_rs = 1, a.b_cs = K;  // B(k, j) = W[j, k]
  a.C = Y, a.ldc = N, a.beta = accumulate ? 1.0f : 0.0f;
  gemm_cpu(a);
}

void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K,
                         bool accumulate) {
  check_sizes(M, N, K, "matmul (bf16)");
  if (M == 0 || N == 0) return;
  const GemmPath p = active_path();
  if (K == 0 || p == GemmPath::Reference) {
    parallel_for(M, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += double(bf16_bits_to_f32(f32_to_bf16(X[i * K + k]))) * bf16_bits_to_f32(Wb[j * K + k]);
          float* y = Y + i * N + j;
          *y = accumulate ? float(s + double(*y)) : float(s);
        }
    });
    return;
  }
  if (p == GemmPath::Baseline) return linear_forward_bf16_generic(X, Wb, Y, M, N, K, accumulate);
  if (p == GemmPath::Avx2) return gemm_avx2::linear_forward_bf16(X, Wb, Y, M, N, K, accumulate);
  if (p == GemmPath::AmxBf16) return gemm_amx::linear_forward_bf16(X, Wb, Y, M, N, K, accumulate);
  gemm_avx512::linear_forward_bf16(X, Wb, Y, M, N, K, accumulate, p == GemmPath::Avx512Bf16);
}

void linear_backward_input(const float* dY, const float* W, float* dX, int64_t M, int64_t N, int64_t K,
                           bool accumulate) {
  GemmArgs a;  // dX[M, K] = dY[M, N] W[N, K]
  a.M = M, a.N = K, a.K = N;
  a.A = dY, a.a_rs = N, a.a_cs = 1;
  a.B = W, a.b_rs = K, a.b_cs = 1;
  a.C = dX, a.ldc = K, a.beta = accumulate ? 1.0f : 0.0f;
  gemm_cpu(a);
}

void linear_backward_weight(const float* dY, const float* X, float* dW, int64_t M, int64_t N, int64_t K) {
  GemmArgs a;  // dW[N, K] += dY^T[N, M] X[M, K]
  a.M = N, a.N = K, a.K = M;
  a.A = dY, a.a_rs = 1, a.a_cs = N;
  a.B = X, a.b_rs = K, a.b_cs = 1;
  a.C = dW, a.ldc = K, a.beta = 1.0f;
  gemm_cpu(a);
}

}  // namespace model
}  // namespace murphy
