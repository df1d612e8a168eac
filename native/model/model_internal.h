// Internals shared by model.cc (training, scoring) and generate.cc (KV-cache sampling).
#pragma once
#include <vector>

#include "murphy/model/model.h"

namespace murphy {
namespace model {

// The engine's activations, scratch and KV caches: from 8 MiB on 2 MiB aligned and marked for
// huge pages, as the parameters are (big_buffer.h). Three 4,096-token steps of the Qwen3-0.6B-
// shaped model (2 layers) page-faulted 0.57 M fewer times so, nearly all in the first step
// (52.4 and 49.1 s -> 41.3 and 44.6 s; 2026-12-02, on a VM where a 4 KiB fault costs 12 us).
using Vec = BigFloats;
void resize(Vec& v, int64_t n, const char* what);
void grow(Vec& v, int64_t n, const char* what);

struct LayerActs {
  Vec xin, n1, r1, qraw, kraw, rq, rk, q, k, v, att, lse, a, ra, h, n2, r2, gate, up, act, m, rm;
};

struct Acts {
  int64_t T = 0;
  std::vector<LayerActs> layers;
  Vec x, xf, rf;
  int64_t bytes() const {
    int64_t n = int64_t(x.size() + xf.size() + rf.size());
    for (const LayerActs& l : layers)
      for (const Vec* v : {&l.xin, &l.n1, &l.r1, &l.qraw, &l.kraw, &l.rq, &l.rk, &l.q, &l.k, &l.v, &l.att, &l.lse,
                           &l.a, &l.ra, &l.h, &l.n2, &l.r2, &l.gate, &l.up, &l.act, &l.m, &l.rm})
        n += int64_t(v->size());
    return n * 4;
  }
};

// accumulate()'s and backward()'s buffers, kept by the engine between calls (Engine::scratch_):
// a training step asks for about the same sizes every time, and fresh buffers cost a page fault
// per 4 KiB at first touch (the demo: ~2 M faults over 114 steps, ~11 us each on a VM where that
// was a fifth of its time). Each is zero-filled on use (checked_resize), as the locals it replaced
// were, and grows to the largest step seen.
struct TrainScratch {
  Acts acts;
  Vec x, logits, dx_chunk, logp, lse, lp_chunk, glogp, dxf, g_chunk;  // (dlogits: in place of logits)
  std::vector<int32_t> tgt;
  Vec dx, dh, tmp_h, dact, dg, du, datt, dq, dk, dv, dqr, dkr;  // backward
};

// score()'s and logits()'s buffers, kept between calls for the same reason (Engine::score_scratch_):
// a caller may score every micro-batch (old log-probs, as the training loop did until it let the
// loss take its own) before accumulating it, and the
// lm-head chunk alone is up to 64 MiB of fresh pages a call. Every element each call reads is
// written first in that call (the activations by the forward, the chunk rows before the product),
// so they are resized, not zero-filled.
struct ScoreScratch {
  Acts acts;  // one layer's slot (keep = false)
  Vec x, logits, lp, lse;
  std::vector<int32_t> tgt;
};

// Attention for one layer: packed causal (training, scoring, prefill) or against a KV cache.
struct AttnHook {
  virtual ~AttnHook() = default;
  // q [T, H, D], k/v [T, G, D] after RoPE -> out [T, H, D], lse [T, H]
  virtual void run(int64_t layer, const float* q, const float* k, const float* v, float* out, float* lse) = 0;
};

struct PackedAttn : AttnHook {
  const ModelConfig& c;
  const PackedBatch& b;
  std::vector<Vec>* keep_k = nullptr;  // prefill: copies of k, v per layer
  std::vector<Vec>* keep_v = nullptr;
  PackedAttn(const ModelConfig& c_, const PackedBatch& b_) : c(c_), b(b_) {}
  void run(int64_t layer, const float* q, const float* k, const float* v, float* out, float* lse) override;
};

struct Fwd {
  const ModelConfig& c;
  const Layout& L;
  const float* w;
  const RopeTable& rope;
  const uint16_t* wb = nullptr;  // bf16 copy of w (same layout): the projections use it when set
  const float* P(int idx) const { return w + L.params[size_t(idx)].offset; }
  // Y[M, N] = X[M, K] W^T for parameter idx ([N, K]): bf16 weights when wb is set.
  void linear(int idx, const float* X, float* Y, int64_t M, int64_t N, int64_t K) const {
    if (wb) linear_forward_bf16(X, wb + L.params[size_t(idx)].offset, Y, M, N, K, false);
    else linear_forward(X, P(idx), Y, M, N, K, false);
  }
};

// Runs the network on T tokens; leaves the final normed hidden states in A.xf.
// keep = false reuses one layer's activation slot for every layer (no backward possible).
// Shared with the device engine (native/gpu/engine/), which computes the same numbers:
// the batch checks (one clear error per problem), the flags of each sequence's first token
// (row t-1 of the final hidden states predicts token t when t is not first), and the lm-head
// chunk: `want` rows, at most 64 MiB of fp32 logits.
void check_packed_batch(const ModelConfig& c, const PackedBatch& b);
std::vector<int64_t> first_flags(const PackedBatch& b);
int64_t chunk_rows(int64_t want, int64_t vocab);

void run_forward(const Fwd& f, const int32_t* tokens, const int32_t* pos, int64_t T, AttnHook& attn, Acts& A,
                 bool keep);

// The sampler's softmax terms (sample_terms.cc), in fp64: p_i = exp((z_i - m) / T), exp by
// sample_terms_simd.inc's exp_f64 (within 2 ulp of the correctly rounded exp).
// p[i] for i < n:
void softmax_terms(const float* z, int64_t n, double m, double T, double* p);
// bsum[b]: the sum of the terms of block b ([b block, (b + 1) block) clipped to n), in a fixed
// order (vector lanes, then the lanes in order, then the tail), ceil(n / block) blocks.
void softmax_block_sums(const float* z, int64_t n, double m, double T, int64_t block, double* bsum);
// Top-p's candidate cuts: -cut[j] on x = (z - m) / T, j < the count returned (increasing cut),
// at most kTopPCutsMax (a caller's buffer of masses holds kTopPCutsMax + 1).
constexpr int kTopPCutsMax = 8;
int softmax_top_p_cuts(const double** cuts);
// mass[j] = the sum of the terms with x >= -cut[j], and mass[count] the sum of all n terms,
// each in a fixed order (sample_terms_simd.inc).
void softmax_cut_masses(const float* z, int64_t n, double m, double T, double* mass);
// The largest z, the lowest index holding it, and whether any z is NaN (m = -inf and index 0
// when no z exceeds -inf).
void argmax_nan(const float* z, int64_t n, float* max, int64_t* at, bool* nan);

}  // namespace model
}  // namespace murphy
