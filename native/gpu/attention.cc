// The attention plan (tile sizes, the varlen tile table) and the host harness runs of the
// attention kernels (kernels/attention.h). Plain C++: compiled in the CPU and CUDA builds.
#include "attention.h"

#include <climits>
#include <string>

#include "kernels/attention.h"

namespace murphy {
namespace gpu {

size_t AttnPlan::forward_shared_floats() const { return AttnForward<float>::shared_floats_for(tile, shape.head_dim); }
size_t AttnPlan::dq_shared_floats() const { return AttnBackwardDq<float>::shared_floats_for(tile, shape.head_dim); }
size_t AttnPlan::dkdv_shared_floats() const {
  return AttnBackwardDkDv<float>::shared_floats_for(tile, chunk, shape.head_dim);
}

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error("attention: " + what); }

}  // namespace

// Tile sizes: B (query tile = key tile rows) is the largest power of two <= 64 for which the
// forward block (Q, acc, K, V: 4BD + B^2 + 3B floats) and the dQ block (5BD + B^2 + 2B) fit
// in 48 KiB of shared memory, the default limit (no opt-in, any sm_80+ device, two or more
// blocks per SM); C (the dK/dV kernel's query chunk) the largest power of two <= B for which
// the dK/dV block (K, V, dK, dV: 4BD, + Q, dO: 2CD, + P, dS: 2CB, + 2C) fits. This gives
// head_dim 64: B 32, C 16; 128: B 16, C 8; 256: B 8, C 4.
AttnPlan attention_plan(const AttnShape& s, const int32_t* seq_offsets, int64_t n_seqs) {
  if (s.tokens < 0 || s.tokens > int64_t(INT_MAX)) bad("tokens " + std::to_string(s.tokens) + " outside 0..2^31-1");
  if (s.n_kv <= 0 || s.n_heads <= 0 || s.n_heads % s.n_kv != 0)
    bad("n_heads " + std::to_string(s.n_heads) + " must be a positive multiple of n_kv " + std::to_string(s.n_kv));
  if (s.head_dim <= 0 || s.head_dim > kAttnMaxHeadDim)
    bad("head_dim " + std::to_string(s.head_dim) + " outside 1.." + std::to_string(kAttnMaxHeadDim));
  if (!(s.scale > 0.0f) || !std::isfinite(s.scale)) bad("scale must be a positive finite number");
  if (n_seqs < 0 || (n_seqs > 0 && seq_offsets == nullptr)) bad("need n_seqs + 1 sequence offsets");
  AttnPlan p;
  p.shape = s;
  if (n_seqs == 0) p.seq_offsets = {0};
  else p.seq_offsets.assign(seq_offsets, seq_offsets + (n_seqs + 1));
  if (p.seq_offsets.front() != 0 || p.seq_offsets.back() != s.tokens)
    bad("seq_offsets must start at 0 and end at tokens (" + std::to_string(s.tokens) + "); got " +
        std::to_string(p.seq_offsets.front()) + " .. " + std::to_string(p.seq_offsets.back()));
  for (int64_t i = 0; i < n_seqs; ++i)
    if (p.seq_offsets[size_t(i + 1)] < p.seq_offsets[size_t(i)])
      bad("seq_offsets must not decrease (offset " + std::to_string(i + 1) + " is " +
          std::to_string(p.seq_offsets[size_t(i + 1)]) + " < " + std::to_string(p.seq_offsets[size_t(i)]) + ")");
  const int64_t D = s.head_dim;
  int B = 64;
  while (B > 1 && (AttnForward<float>::shared_floats_for(B, D) > kAttnSharedFloats ||
                   AttnBackwardDq<float>::shared_floats_for(B, D) > kAttnSharedFloats))
    B /= 2;
  int C = B;
  while (C > 1 && AttnBackwardDkDv<float>::shared_floats_for(B, C, D) > kAttnSharedFloats) C /= 2;
  p.tile = B;
  p.chunk = C;
  for (int64_t i = 0; i < n_seqs; ++i) {
    const int32_t s0 = p.seq_offsets[size_t(i)], s1 = p.seq_offsets[size_t(i + 1)];
    for (int64_t r = s0; r < s1; r += B) p.tiles.insert(p.tiles.end(), {int32_t(r), int32_t(std::min<int64_t>(r + B, s1)), s0, s1});
  }
  return p;
}

template <typename T>
void attention_forward_host(const AttnPlan& p, const T* q, const T* k, const T* v, T* o, float* lse, Order order,
                            int block) {
  const AttnShape& s = p.shape;
  const AttnForward<T> kf{q, k, v, o, lse, p.tiles.data(), p.n_tiles(), s.n_heads, s.n_kv, s.head_dim, s.scale,
                          p.tile, int32_t(p.fault)};
  run_on_host(kf, kf.grid(), block, order);
}

template <typename T>
void attention_backward_host(const AttnPlan& p, const T* q, const T* k, const T* v, const T* o, const float* lse,
                             const T* dout, T* dq, T* dk, T* dv, float* ws, Order order, int block) {
  const AttnShape& s = p.shape;
  const AttnBackwardDelta<T> kd{o, dout, ws, s.tokens * s.n_heads, s.head_dim, block};
  run_on_host(kd, kd.grid(), block, order);
  const AttnBackwardDq<T> kq{q, k, v, dout, lse, ws, dq, p.tiles.data(), p.n_tiles(), s.n_heads, s.n_kv, s.head_dim,
                             s.scale, p.tile, int32_t(p.fault)};
  run_on_host(kq, kq.grid(), block, order);
  const AttnBackwardDkDv<T> kk{q, k, v, dout, lse, ws, dk, dv, p.tiles.data(), p.n_tiles(), s.n_heads, s.n_kv,
                               s.head_dim, s.scale, p.tile, p.chunk, int32_t(p.fault)};
  run_on_host(kk, kk.grid(), block, order);
}

#define MURPHY_ATTN_HOST(T)                                                                                         \
  template void attention_forward_host<T>(const AttnPlan&, const T*, const T*, const T*, T*, float*, Order, int);  \
  template void attention_backward_host<T>(const AttnPlan&, const T*, const T*, const T*, const T*, const float*,   \
                                           const T*, T*, T*, T*, float*, Order, int);
MURPHY_ATTN_HOST(float)
MURPHY_ATTN_HOST(uint16_t)
#undef MURPHY_ATTN_HOST

}  // namespace gpu
}  // namespace murphy
