// The sampler's fp64 softmax terms, vectorized (sample_terms_simd.inc: the formula, its error,
// the scalar spec), for generate.cc's sample_row:
//   p_i = exp((z_i - m) / T)   (fp64; m the row's largest logit)
// A row's terms were glibc exp calls, one per token: at Qwen3's 151,936 tokens ~1.5 ms a row and
// a decode step (docs/model.md, "Sampling").
#include "../cpu/simd.h"
#include "model_internal.h"

#define MURPHY_SIMD_BODY "../model/sample_terms_simd.inc"
#include "../cpu/simd_multiversion.inc"

namespace murphy {
namespace model {

void softmax_terms(const float* z, int64_t n, double m, double T, double* p) {
  MURPHY_SIMD_CALL(softmax_terms, z, n, m, T, p);
}

void softmax_block_sums(const float* z, int64_t n, double m, double T, int64_t block, double* bsum) {
  MURPHY_SIMD_CALL(softmax_block_sums, z, n, m, T, block, bsum);
}

static_assert(cpu_base::kTopPCuts <= kTopPCutsMax, "model_internal.h's bound on top-p's cuts");

int softmax_top_p_cuts(const double** cuts) {
  *cuts = cpu_base::kTopPCut;
  return cpu_base::kTopPCuts;
}

void softmax_cut_masses(const float* z, int64_t n, double m, double T, double* mass) {
  MURPHY_SIMD_CALL(softmax_cut_masses, z, n, m, T, mass);
}

void argmax_nan(const float* z, int64_t n, float* max, int64_t* at, bool* nan) {
  MURPHY_SIMD_CALL(argmax_nan, z, n, max, at, nan);
}

}  // namespace model
}  // namespace murphy
