// CPU-only builds: the CUDA engine is absent (cuda_engine.cu defines these in the CUDA build).
#ifndef MURPHY_WITH_CUDA
#include "cuda_engine.h"

namespace murphy {
namespace gpu {

void check_cuda_engine_available() {
  throw Error(
      "device 'cuda': the loaded native binary is CPU-only; build the CUDA one with `npm run build:cuda` (needs nvcc), "
      "or use device 'cpu'",
      ErrorCode::NoLib);
}

std::unique_ptr<model::PolicyEngine> make_cuda_engine(const model::DeviceEngineSpec&, const model::ModelConfig&,
                                                      const float*) {
  check_cuda_engine_available();
  return nullptr;
}

double lt_gemm_tflops(int64_t, int64_t, int64_t, int) {
  check_cuda_engine_available();
  return 0.0;
}

}  // namespace gpu
}  // namespace murphy
#endif
