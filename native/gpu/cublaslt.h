// cuBLASLt, loaded at run time with dlopen (DESIGN.md §5): one binary serves CPU-only and
// GPU machines, and the CUDA code compiles where only nvcc and the CUDA runtime exist (no
// cuBLAS headers). The few entry points the GPU engine uses are declared here by hand,
// from NVIDIA's cublasLt.h / library_types.h (public docs: docs.nvidia.com/cuda/cublas).
//
// Where to look is decided in TypeScript (lib/gpu/cublaslt.ts: MURPHY_CUBLASLT, then
// CUDA_HOME/CUDA_PATH lib64, then the nvidia-cublas Python wheel, then the dynamic
// loader), which passes the ordered candidates here. This file only opens them.
// It is compiled into every build (it needs no CUDA), so `doctor` reports the library
// on CPU-only binaries too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dl_library.h"

namespace murphy {
namespace gpu {

// ---- types and constants of cublasLt.h / library_types.h (values from the public headers)
using cublasStatus_t = int;
constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = void*;
using cublasLtMatrixLayout_t = void*;
using cublasLtMatmulPreference_t = void*;
using cudaStream_t = struct CUstream_st*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
// cudaDataType_t
constexpr int CUDA_R_32F = 0;
constexpr int CUDA_R_16BF = 14;
// cublasComputeType_t
constexpr int CUBLAS_COMPUTE_32F = 68;
// cublasOperation_t
constexpr int CUBLAS_OP_N = 0;
constexpr int CUBLAS_OP_T = 1;
// cublasLtMatmulDescAttributes_t
constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;
constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;
// cublasLtMatrixLayoutAttribute_t
constexpr int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;
constexpr int CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;
// cublasLtMatmulPreferenceAttributes_t
constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
// uint32_t each; the heuristic assumes 256 when they are not set
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8;

// ---- the entry points (signatures as in cublasLt.h)
struct CublasLtApi {
  size_t (*GetVersion)();
  const char* (*GetStatusName)(cublasStatus_t);
  const char* (*GetStatusString)(cublasStatus_t);
  cublasStatus_t (*Create)(cublasLtHandle_t*);
  cublasStatus_t (*Destroy)(cublasLtHandle_t);
  cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t*, int compute_type, int scale_type);
  cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t, int attr, const void* buf, size_t size);
  cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t*, int type, uint64_t rows, uint64_t cols, int64_t ld);
  cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*MatrixLayoutSetAttribute)(cublasLtMatrixLayout_t, int attr, const void* buf, size_t size);
  cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t*);
  cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, int attr, const void* buf, size_t size);
  cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                           cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                           cublasLtMatmulPreference_t, int requested,
                                           cublasLtMatmulHeuristicResult_t* results, int* returned);
  cublasStatus_t (*Matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void* alpha, const void* A,
                           cublasLtMatrixLayout_t, const void* B, cublasLtMatrixLayout_t, const void* beta,
                           const void* C, cublasLtMatrixLayout_t, void* D, cublasLtMatrixLayout_t,
                           const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream);
};

// The names resolved into CublasLtApi, in its field order.
extern const char* const kCublasLtSymbols[];
extern const size_t kCublasLtSymbolCount;

// One place to look, what happened to it, and what a search found (dl_library.h).
// CublasLtFound::version: cublasLtGetVersion(), major * 10000 + minor * 100 + patch.
using CublasLtCandidate = DlCandidate;
using CublasLtAttempt = DlAttempt;
using CublasLtFound = DlFound<size_t>;

// Version number -> "13.1.0".
std::string cublaslt_version_text(size_t v);

// Tries the candidates in order. A candidate is accepted when dlopen succeeds, every
// entry point of kCublasLtSymbols resolves, and the reported major version is 12 or 13.
// install = false: the library is closed again (doctor's probe). install = true: the
// first accepted library becomes the process's cuBLASLt (see cublaslt()) and stays
// open; once installed, later calls return it without opening anything else.
CublasLtFound cublaslt_load(const std::vector<CublasLtCandidate>& candidates, bool install);

// The installed library's entry points, or nullptr before a successful install.
const CublasLtApi* cublaslt();

// Turns a cuBLASLt status into an Error naming the call (uses cublasLtGetStatusName/String).
// Every cuBLASLt call goes through LT_CHECK.
[[noreturn]] void cublaslt_fail(cublasStatus_t st, const char* expr, const char* file, int line);

}  // namespace gpu
}  // namespace murphy

#define LT_CHECK(expr)                                                           \
  do {                                                                           \
    ::murphy::gpu::cublasStatus_t murphy_lt_st_ = (expr);                        \
    if (murphy_lt_st_ != ::murphy::gpu::CUBLAS_STATUS_SUCCESS)                   \
      ::murphy::gpu::cublaslt_fail(murphy_lt_st_, #expr, __FILE__, __LINE__);    \
  } while (0)
