// See lt_gemm.h. One cuBLASLt handle and one workspace per device, created on first use;
// per (device, shape, transposes, output type, the operands' alignments): the descriptors and
// the heuristic's first algorithm, created once and kept for the process (no destruction at
// exit).
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "../cuda/check.cuh"
#include "cublaslt.h"
#include "lt_gemm.h"
#include "murphy/device.h"

namespace murphy {
namespace gpu {

namespace {

struct DeviceLt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

struct Shape {
  int device;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  int out;
  int in = 0;  // 0: bf16 A and B; 1: fp32 A and B (the device engine's f32 precision mode)
  uint32_t align_a = 256, align_b = 256, align_c = 256;  // lt_alignment of the pointers (C is D)
  bool operator<(const Shape& o) const {
    return std::tie(device, ta, tb, m, n, k, lda, ldb, ldc, out, in, align_a, align_b, align_c) <
           std::tie(o.device, o.ta, o.tb, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.out, o.in, o.align_a, o.align_b, o.align_c);
  }
};

struct Prepared {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

std::mutex g_mu;
std::map<int, DeviceLt> g_devices;
std::map<Shape, Prepared> g_prepared;

const CublasLtApi& api() {
  const CublasLtApi* a = cublaslt();
  if (!a) throw Error("cuBLASLt is not loaded: the GPU engine loads it at start (see `murphy-native doctor`)");
  return *a;
}

DeviceLt& device_lt(int dev) {  // g_mu held
  DeviceLt& d = g_devices[dev];
  if (!d.handle) {
    LT_CHECK(api().Create(&d.handle));
    d.workspace = cuda_alloc(kLtWorkspaceBytes);
  }
  return d;
}

const Prepared& prepare(const Shape& s, const DeviceLt& d) {  // g_mu held
  auto it = g_prepared.find(s);
  if (it != g_prepared.end()) return it->second;
  const CublasLtApi& L = api();
  Prepared p;
  LT_CHECK(L.MatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t ta = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_CHECK(L.MatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LT_CHECK(L.MatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // Stored shapes: op(A) is m x k, so A is stored k x m when transposed; likewise B.
  const int in_type = s.in == 1 ? CUDA_R_32F : CUDA_R_16BF;
  LT_CHECK(L.MatrixLayoutCreate(&p.a, in_type, uint64_t(s.ta ? s.k : s.m), uint64_t(s.ta ? s.m : s.k), s.lda));
  LT_CHECK(L.MatrixLayoutCreate(&p.b, in_type, uint64_t(s.tb ? s.n : s.k), uint64_t(s.tb ? s.k : s.n), s.ldb));
  LT_CHECK(L.MatrixLayoutCreate(&p.c, s.out == int(LtOut::F32) ? CUDA_R_32F : CUDA_R_16BF, uint64_t(s.m), uint64_t(s.n), s.ldc));
  cublasLtMatmulPreference_t pref = nullptr;
  LT_CHECK(L.MatmulPreferenceCreate(&pref));
  const uint64_t ws = kLtWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  try {
    LT_CHECK(L.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // algorithms the operands' alignment allows (unset, the heuristic assumes 256 bytes)
    for (const auto& [attr, bytes] : {std::pair<int, uint32_t>{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, s.align_a},
                                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, s.align_b},
                                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, s.align_c},
                                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, s.align_c}})
      LT_CHECK(L.MatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)));
    LT_CHECK(L.MatmulAlgoGetHeuristic(d.handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &returned));
  } catch (...) {
    (void)L.MatmulPreferenceDestroy(pref);
    throw;
  }
  LT_CHECK(L.MatmulPreferenceDestroy(pref));
  if (returned < 1 || result.state != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLASLt has no algorithm for a " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                std::to_string(s.k) + (s.in == 1 ? " fp32" : " bf16") + std::string(" GEMM (transa ") + std::to_string(ta) + ", transb " + std::to_string(tb) + ")");
  p.algo = result.algo;
  return g_prepared.emplace(s, p).first->second;
}

}  // namespace

namespace {

void run_lt(LinearProduct which, const void* first, const void* second, void* out, LtOut out_type, int in, int64_t M,
            int64_t N, int64_t K, bool accumulate, cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  if (which == LinearProduct::BackwardWeight && out_type != LtOut::F32)
    throw Error("linear_lt: the weight gradient accumulates in fp32 (out_type must be F32)");
  const LtGemmPlan p = linear_plan(which, M, N, K, accumulate);
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const void* A = p.a_is == 0 ? first : second;
  const void* B = p.b_is == 0 ? first : second;
  const Shape s{dev, p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, int(out_type), in,
                lt_alignment(uintptr_t(A)), lt_alignment(uintptr_t(B)), lt_alignment(uintptr_t(out))};
  std::lock_guard<std::mutex> lk(g_mu);
  DeviceLt& d = device_lt(dev);
  const Prepared& pr = prepare(s, d);
  const float alpha = 1.0f, beta = p.beta;
  LT_CHECK(api().Matmul(d.handle, pr.desc, &alpha, A, pr.a, B, pr.b, &beta, out, pr.c, out, pr.c, &pr.algo, d.workspace,
                        kLtWorkspaceBytes, stream));
}

}  // namespace

void linear_lt(LinearProduct which, const uint16_t* first, const uint16_t* second, void* out, LtOut out_type,
               int64_t M, int64_t N, int64_t K, bool accumulate, cudaStream_t stream) {
  run_lt(which, first, second, out, out_type, 0, M, N, K, accumulate, stream);
}

void linear_lt_f32(LinearProduct which, const float* first, const float* second, float* out, int64_t M, int64_t N,
                   int64_t K, bool accumulate, cudaStream_t stream) {
  run_lt(which, first, second, out, LtOut::F32, 1, M, N, K, accumulate, stream);
}

}  // namespace gpu
}  // namespace murphy
