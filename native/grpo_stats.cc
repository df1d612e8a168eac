// The GRPO loss statistics from the kernels' sums, and its non-finite-loss error: shared by
// the CPU and CUDA kernels (see grpo_loss.h).
#include <string>

#include "murphy/grpo_loss.h"

namespace murphy {

GrpoLossStats grpo_stats_from_sums(double loss, double ratio, double kl, int64_t low, int64_t high, int64_t dual,
                                   int64_t active) {
  GrpoLossStats st;
  st.n_active = active;
  st.loss = loss;
  // Means as quotients, not products with 1 / active: 49 * (1 / 49) is 0.9999999999999999, so
  // 49 ratios of exactly 1 would not average to 1.
  const double n = double(active);
  const auto mean = [&](double sum) { return active ? sum / n : 0.0; };
  st.clip_low_frac = mean(double(low));
  st.clip_high_frac = mean(double(high));
  st.dual_clip_frac = mean(double(dual));
  st.mean_ratio = mean(ratio);
  st.mean_kl = mean(kl);
  return st;
}

void throw_grpo_nonfinite(int64_t t, float logp, float old_logp, float advantage, const float* ref_logp) {
  throw Error("grpoLoss: non-finite loss at token " + std::to_string(t) + " (logp=" + std::to_string(logp) +
              ", oldLogp=" + std::to_string(old_logp) + ", advantage=" + std::to_string(advantage) +
              (ref_logp ? ", refLogp=" + std::to_string(*ref_logp) : std::string()) +
              "); check the inputs for NaN or infinity");
}

}  // namespace murphy
