// Internals of the CPU matrix product (native/model/matmul.cc): the paths a product can take
// and their implementations: AVX-512 (gemm_avx512.cc) and AVX2 (gemm_avx2.cc), both on the BLIS
// driver of gemm_driver.h. See docs/kernels.md, "CPU GEMM".
#pragma once
#include <cstdint>
#include <string>

#include "murphy/model/ops.h"

namespace murphy {
namespace model {

// Which implementation runs a product. Auto picks the fastest the CPU supports (or the one
// MURPHY_GEMM_PATH names; on a CPU built with AMX whose tiles the process may not use, Avx512
// rather than Avx512Bf16: matmul.cc's detect_best): AmxBf16 (Avx512Bf16, and AMX tiles for bf16 products of more than
// kSkinnyRows rows: gemm_amx.cc), Avx512Bf16 (AVX-512 + AVX512_BF16: vdpbf16ps for bf16 products),
// Avx512 (AVX-512F: bf16 values widened to f32), Avx2 (AVX2+FMA: 6 x 16 micro-kernel, bf16
// widened), Baseline (the x86-64 baseline: GCC-vector micro-kernel). Generic = Avx2 where the
// CPU has it, else Baseline. A forced path the CPU lacks falls back to the best one it has
// below it. Reference runs the plain loops (as use_reference_ops()).
enum class GemmPath : int32_t { Auto = 0, Avx512Bf16 = 1, Avx512 = 2, Generic = 3, Reference = 4, Avx2 = 5, Baseline = 6, AmxBf16 = 7 };
// For tests and benchmarks: forces a path for the products called from this thread (Auto =
// normal dispatch). gemm_path() is the path a product called now from this thread takes.
void set_gemm_path(GemmPath p);
GemmPath gemm_forced_path();
GemmPath gemm_path();
// The path Auto resolves to on this CPU, and its name ("amx-bf16", "avx512-bf16", "avx512", "avx2", "baseline").
GemmPath gemm_best_path();
const char* gemm_path_name(GemmPath p);
// The path a name means ("auto", "amx-bf16", "avx512-bf16", "avx512", "avx2", "baseline", "generic",
// "reference"); throws one line naming `what` and the choices for any other name.
GemmPath parse_gemm_path(const std::string& name, const char* what);
// Whether this CPU runs path p itself (not a fallback): the concrete paths at or below the best.
bool gemm_path_available(GemmPath p);

namespace gemm_avx512 {
// C (+)= A B on fp32 strided views (GemmArgs), packed BLIS-style. Requires AVX-512F.
void gemm_f32(const GemmArgs& a);
// Y[M,N] (+)= bf16(X)[M,K] Wb[N,K]^T with fp32 accumulation; `dpbf16` = use vdpbf16ps
// (AVX512_BF16), else the bf16 values are widened to f32 for the f32 micro-kernel.
void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate,
                         bool dpbf16);
// Y[M,N] (+)= X[M,K] W[N,K]^T for few rows (decode): W streamed once.
void linear_small_m_f32(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate);
// The bf16 operands of the AMX path (gemm_amx.cc), packed as for vdpbf16ps: rows [r0, r1) of X
// [*, K] rounded to bf16 (nearest even) as pairs along k (32-bit values: k even in the low half)
// at Xp + r ldx, zero from pair (K + 1) / 2 up to ldx; and the panel of rows [j0, j0 + nc)
// (nc <= 32) of a matrix of pairs P (row j: Kp pairs at P + j ld) transposed: dst[p 32 + j] =
// P[j0 + j, p] for p < Kp, zero past nc (W's rows for even K: P = Wb, ld = Kp = K / 2).
void pair_rows_bf16(const float* X, int64_t K, int64_t r0, int64_t r1, uint32_t* Xp, int64_t ldx);
void pack_pair_panel(const uint32_t* P, int64_t ld, int64_t Kp, int64_t j0, int64_t nc, uint32_t* dst);
}  // namespace gemm_avx512

namespace gemm_amx {
// Y[M,N] (+)= bf16(X)[M,K] Wb[N,K]^T on AMX tiles (tdpbf16ps), fp32 accumulation. Requires
// cpu_has_amx_bf16(); odd K goes to gemm_avx512's vdpbf16ps path.
void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate);
}  // namespace gemm_amx

namespace gemm_avx2 {
// The same entry points on AVX2+FMA (gemm_avx2.cc): 6 x 16 tiles; bf16 widened to f32.
void gemm_f32(const GemmArgs& a);
void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate);
void linear_small_m_f32(const float* X, const float* W, float* Y, int64_t M, int64_t N, int64_t K, bool accumulate);
}  // namespace gemm_avx2

// Row counts up to which linear_forward takes the skinny (weights streamed once) path. Above it
// (the packed path, on every path: AVX-512, AVX2, baseline, reference) each output's sum runs
// over K in an order that does not depend on M or on the row's place: the rows of a product
// split into calls of more than kSkinnyRows rows each get the same bits as in one call (the
// training loss merges its logits chunks on this, model.cc; test/model/gemm.test.ts checks it).
// The skinny path sums in another order.
constexpr int64_t kSkinnyRows = 32;

}  // namespace model
}  // namespace murphy
