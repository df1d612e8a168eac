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

}  // namespace gpu
}  // namespace murphy
