// Running the harness-form kernels (kernels/model_kernels.h) on the CPU next to their spec,
// the CPU ops of native/model/, on the same inputs. Used by the tests through the addon
// (kernelHarness); nothing here runs in training.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/harness.h"

namespace murphy {
namespace gpu {

struct HarnessCase {
  std::string op;  // rmsnorm_forward, rmsnorm_backward, residual_rmsnorm_forward, rmsnorm_residual_forward, rope_forward, rope_backward, swiglu_forward,
                   // swiglu_backward, embedding_forward, embedding_backward
  bool bf16 = false;  // storage type of activations and weights (inputs are rounded to bf16 first)
  Order order = Order::Forward;
  int block = 256;
  int64_t rows = 0, n = 0;                        // rmsnorm: rows x n; swiglu: n
  int64_t tokens = 0, heads = 0, head_dim = 0;    // rope
  int64_t max_pos = 0;
  double theta = 10000.0;
  int64_t vocab = 0, dim = 0;                     // embedding (tokens too)
  float eps = 1e-6f;
  bool accumulate = false;                        // lt_linear_*: add into the given output
  bool run_plan = true;                           // lt_linear_*: false = only the CPU op (the plain-loop plan
                                                  // execution is slow at GPU test sizes)
  std::map<std::string, std::vector<float>> in;   // named f32 inputs
  std::vector<int32_t> ints;                      // positions (rope) or token ids (embedding)
  std::map<std::string, std::vector<int32_t>> int_in;  // named int32 inputs (decode kernels)
  std::map<std::string, double> params;                // named numbers (decode kernels)
};

struct HarnessOut {
  std::map<std::string, std::vector<float>> kernel;     // the harness-run kernel's outputs (as f32)
  std::map<std::string, std::vector<float>> reference;  // the CPU op's outputs
};

HarnessOut run_harness_case(const HarnessCase& c);

#ifdef MURPHY_WITH_CUDA
// The same case on the GPU (cuda_ops.cu): the kernel's outputs only. lt_linear_* cases run
// cuBLASLt with bf16 inputs and fp32 output (cuBLASLt must be installed first).
std::map<std::string, std::vector<float>> run_cuda_case(const HarnessCase& c);
#endif

}  // namespace gpu
}  // namespace murphy
