// Op family "matmul" on the CPU: C[M,N] = op(A)[M,K] op(B)[K,N] (+ beta C), fp32.
//
// Reference (plain loops):  C[i,j] = sum_k A(i,k) B(k,j)  (+ beta C[i,j])
// Fast path (the BLIS / GotoBLAS structure):
//   for each K slice of KC:   pack A into row panels of MR   (k-major: MR values per k)
//     for each N chunk of NC: pack B into column panels of 16 (k-major: 16 values per k)
//       parallel over MC x NT output tiles: an MR x 16 register-blocked micro-kernel
//       (MR accumulator vectors of 16 floats, one broadcast-FMA per A value).
// The micro-kernel is written with GCC vector types and compiled three times (AVX-512,
// AVX2+FMA, baseline); the one matching the CPU is chosen once at run time.
// Small M (decode: a few rows) takes a dot-product path that streams W once.
#pragma GCC optimize("fp-contract=fast")
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../cpu/simd.h"
#include "../cpu/threads.h"
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

using MicroFn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, int, int, float);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("arch=x86-64-v4"))) void micro_v4(int64_t kc, const float* ap, const float* bp, float* c,
                                                          int64_t ldc, int mr, int nr, int mode, float beta) {
  micro_body<12>(kc, ap, bp, c, ldc, mr, nr, mode, beta);
}
__attribute__((target("arch=x86-64-v3"))) void micro_v3(int64_t kc, const float* ap, const float* bp, float* c,
                                                          int64_t ldc, int mr, int nr, int mode, float beta) {
  micro_body<6>(kc, ap, bp, c, ldc, mr, nr, mode, beta);
}
#endif
void micro_base(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr, int mode,
                float beta) {
  micro_body<6>(kc, ap, bp, c, ldc, mr, nr, mode, beta);
}

struct Kernel {
  MicroFn fn;
  int mr;
};

Kernel pick_kernel() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  const char* lvl = cpu_simd_level();
  if (std::strcmp(lvl, "avx512") == 0) return {micro_v4, 12};
  if (std::strcmp(lvl, "avx2") == 0) return {micro_v3, 6};
#endif
  return {micro_base, 6};
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
  static const Kernel kern = pick_kernel();
  const int MR = kern.mr;
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
              kern.fn(kc, apack.p + (i / MR) * MR * kc, bp, a.C + i * a.ldc + n0 + j, a.ldc, mr, nr, mode, a.beta);
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

}  // namespace

void gemm_cpu(const GemmArgs& a) {
  if (a.M < 0 || a.N < 0 || a.K < 0) throw Error("matmul: negative size");
  if (a.M == 0 || a.N == 0) return;
  if (a.K == 0) {
    for (int64_t i = 0; i < a.M; ++i)
      for (int64_t j = 0; j < a.N; ++j) {
        float* c = a.C + i * a.ldc + j;
        *c = a.beta == 0.0f ? 0.0f : a.beta * *c;
      }
    return;
  }
  if (use_reference_ops()) return gemm_reference(a);
  gemm_fast(a);
}

void linear_forward(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate) {
  if (M <= 4 && !use_reference_ops()) return linear_small_m(X, W, Y, M, N, K, accumulate);
  GemmArgs a;
  a.M = M, a.N = N, a.K = K;
  a.A = X, a.a_rs = K, a.a_cs = 1;
  a.B = W, a.b_rs = 1, a.b_cs = K;  // B(k, j) = W[j, k]
  a.C = Y, a.ldc = N, a.beta = accumulate ? 1.0f : 0.0f;
  gemm_cpu(a);
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
