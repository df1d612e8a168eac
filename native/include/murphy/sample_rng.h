// The sampler's random numbers, shared by the CPU sampler (native/model/generate.cc) and the
// device sampler (native/gpu/kernels/sampling.h): the same seed gives the same draw on both.
//   stream(seed, j) = hash(seed, j) << 32 | hash(seed ^ 0x5bd1e995, j)     (sample j of a prompt)
//   u(stream, step) = (hi << 21 ^ lo >> 11 + 0.5) / 2^53,  hi = hash(stream, 2 step),
//                     lo = hash(stream, 2 step + 1)                          (53 bits, in (0, 1))
#pragma once
#include "murphy/common.h"

namespace murphy {

MURPHY_HD uint64_t sample_stream(uint64_t seed, uint64_t j) {
  return (uint64_t(hash_u32(seed, j)) << 32) | hash_u32(seed ^ 0x5bd1e995u, j);
}

MURPHY_HD double sample_uniform(uint64_t stream, int64_t step) {
  const uint64_t hi = hash_u32(stream, uint64_t(step) * 2), lo = hash_u32(stream, uint64_t(step) * 2 + 1);
  return (double((hi << 21) ^ (lo >> 11)) + 0.5) / 9007199254740992.0;
}

}  // namespace murphy
