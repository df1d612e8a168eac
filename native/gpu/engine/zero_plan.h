// ZeRO-1's plan as the device engine takes it (docs/distributed.md, "ZeRO-1 on the device
// engine"): the shard bounds of every rank (lib/dist/shards.ts's planShards: contiguous ranges
// of the flat parameter vector, in rank order) and the bucket bounds (lib/dist/buckets.ts's
// planBuckets: contiguous ranges of whole parameters, in order), plus the bucket arithmetic of
// the collectives. Pure host code, no math beyond index arithmetic.
//
// A bucket [b0, b1) meets rank r's shard [s_r, s_r+1) in counts[r] = max(0, min(b1, s_r+1) -
// max(b0, s_r)) elements starting at start[r] = clamp(s_r, b0, b1); the parts are contiguous in
// rank order. NCCL's reduce-scatter and all-gather take equal parts: when every count is
// m = max_r counts[r] they run in place on the engine's buffers (part r starts at b0 + r x m);
// other buckets take an all-reduce and one broadcast per owning rank (zero_shard.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "murphy/common.h"

namespace murphy {
namespace gpu {

struct ZeroPlan {
  int rank = 0, world = 1;
  std::vector<int64_t> shards;   // world + 1 bounds: rank r owns [shards[r], shards[r + 1])
  std::vector<int64_t> buckets;  // bucket k is [buckets[k], buckets[k + 1])
  int64_t begin() const { return shards[size_t(rank)]; }
  int64_t end() const { return shards[size_t(rank) + 1]; }
  int64_t n_buckets() const { return int64_t(buckets.size()) - 1; }
};

// The hyper-parameters of one ZeRO-1 step (doubles, as the host path's JavaScript numbers:
// the clip coefficient is formed from the same values) and the bound on each collective.
struct ZeroStepOptions {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  double max_grad_norm = 0;  // 0: no clipping
  double timeout_ms = 0;
};

struct BucketParts {
  int64_t begin = 0, end = 0, m = 0;
  bool equal = true;
  std::vector<int64_t> counts, start;  // per rank
};

inline BucketParts bucket_parts(const ZeroPlan& p, int64_t k) {
  BucketParts b;
  b.begin = p.buckets[size_t(k)], b.end = p.buckets[size_t(k) + 1];
  for (int r = 0; r < p.world; ++r) {
    const int64_t s0 = p.shards[size_t(r)], s1 = p.shards[size_t(r) + 1];
    const int64_t c = std::max<int64_t>(0, std::min(b.end, s1) - std::max(b.begin, s0));
    b.counts.push_back(c);
    b.start.push_back(std::min(b.end, std::max(b.begin, s0)));
    b.m = std::max(b.m, c);
  }
  for (int64_t c : b.counts) b.equal = b.equal && c == b.m;
  return b;
}

// One line naming what is wrong with a plan for a model of `total` parameters.
inline void check_zero_plan(const ZeroPlan& p, int64_t total) {
  const std::string w = "zeroInit: ";
  if (p.world < 1 || p.rank < 0 || p.rank >= p.world)
    throw Error(w + "rank " + std::to_string(p.rank) + " of world size " + std::to_string(p.world) + " is not a rank");
  if (int64_t(p.shards.size()) != p.world + 1)
    throw Error(w + "the shard plan has " + std::to_string(p.shards.size()) + " bounds; a world of " +
                std::to_string(p.world) + " needs " + std::to_string(p.world + 1));
  auto check = [&](const std::vector<int64_t>& b, const char* what, bool strict) {
    if (b.size() < 2 || b.front() != 0 || b.back() != total)
      throw Error(w + "the " + what + " must run from 0 to the model's " + std::to_string(total) + " parameters");
    for (size_t i = 1; i < b.size(); ++i)
      if (strict ? b[i] <= b[i - 1] : b[i] < b[i - 1])
        throw Error(w + "the " + what + " bounds must " + (strict ? "increase" : "not decrease") + " (at index " +
                    std::to_string(i) + ")");
  };
  check(p.shards, "shard plan", false);
  check(p.buckets, "bucket plan", true);
}

}  // namespace gpu
}  // namespace murphy
