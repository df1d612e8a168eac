// Op family "rope" on the CPU: rotary position embedding, Hugging Face's rotate_half layout.
//   inv_freq_i = 1 / theta^(2i / d)  (fp32, as transformers computes it),  a = pos * inv_freq_i
//   y_i = x_i cos a - x_{i+h} sin a;  y_{i+h} = x_{i+h} cos a + x_i sin a,   h = d / 2
// The backward pass is the transpose: the same rotation by -a (inverse = true).
#include <cmath>

#include "../cpu/threads.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace model {

void rope_table_init(float* cos_t, float* sin_t, int64_t max_pos, int64_t head_dim, double theta) {
  const int64_t h = head_dim / 2;
  for (int64_t i = 0; i < h; ++i) {
    const float expo = float(2 * i) / float(head_dim);
    const float inv = 1.0f / float(std::pow(theta, double(expo)));
    for (int64_t p = 0; p < max_pos; ++p) {
      const float ang = float(p) * inv;  // fp32 product, as torch
      cos_t[p * h + i] = float(std::cos(double(ang)));
      sin_t[p * h + i] = float(std::sin(double(ang)));
    }
  }
}

void rope_cpu(float* x, const int32_t* pos, int64_t T, int64_t n_heads, const RopeTable& tab, bool inverse) {
  const int64_t d = tab.head_dim, h = d / 2;
  parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = tab.cos + int64_t(pos[t]) * h;
      const float* s = tab.sin + int64_t(pos[t]) * h;
      for (int64_t hd = 0; hd < n_heads; ++hd) {
        float* v = x + (t * n_heads + hd) * d;
        if (!inverse) {
#pragma omp simd
          for (int64_t i = 0; i < h; ++i) {
            const float a = v[i], b = v[i + h];
            v[i] = a * c[i] - b * s[i];
            v[i + h] = b * c[i] + a * s[i];
          }
        } else {
#pragma omp simd
          for (int64_t i = 0; i < h; ++i) {
            const float a = v[i], b = v[i + h];
            v[i] = a * c[i] + b * s[i];
            v[i + h] = b * c[i] - a * s[i];
          }
        }
      }
    }
  });
}


}  // namespace model
}  // namespace murphy
