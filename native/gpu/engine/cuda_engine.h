// The device engine over CudaBackend (cuda_engine.cu, CUDA build only). In a CPU-only build
// both functions throw ENOLIB naming the cause and the fix.
#pragma once
#include <memory>

#include "policy_engine.h"

namespace murphy {
namespace gpu {

// Throws a one-line error when the CUDA engine cannot run here: a CPU-only binary, no device,
// or cuBLASLt not loaded.
void check_cuda_engine_available();
std::unique_ptr<model::PolicyEngine> make_cuda_engine(const model::DeviceEngineSpec& s, const model::ModelConfig& c,
                                                      const float* w_host);

// The bf16 GEMM rate cuBLASLt reaches here (TFLOP/s): Y[m,n] = X[m,k] W^T in fp32 out, timed
// with CUDA events over `iters` calls after two warm-up calls; the benchmark's MFU denominator.
double lt_gemm_tflops(int64_t m, int64_t n, int64_t k, int iters);

}  // namespace gpu
}  // namespace murphy
