// Op family "embedding" on the CPU:  y[t] = E[ids[t]];  backward dE[ids[t]] += dy[t].
// The backward pass is parallel over slices of the hidden dimension, so two tokens with the
// same id never race and the sum order is the token order (deterministic).
#include <cstring>

#include "../cpu/threads.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace model {

void embedding_forward_cpu(const float* E, const int32_t* ids, float* y, int64_t T, int64_t dim) {
  parallel_for(T, 64, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) std::memcpy(y + t * dim, E + int64_t(ids[t]) * dim, size_t(dim) * 4);
  });
}

void embedding_backward_cpu(const float* dy, const int32_t* ids, float* dE, int64_t T, int64_t dim) {
  parallel_for(dim, 64, [&](int64_t a, int64_t b) {
    for (int64_t t = 0; t < T; ++t) {
      float* dst = dE + int64_t(ids[t]) * dim;
      const float* src = dy + t * dim;
#pragma omp simd
      for (int64_t i = a; i < b; ++i) dst[i] += src[i];
    }
  });
}


}  // namespace model
}  // namespace murphy
