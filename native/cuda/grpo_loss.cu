// Kernel family 2 on the GPU: the clipped GRPO surrogate with optional KL, per token.
// The readable reference is native/cpu/grpo_loss.cc; formulas (grpo_loss.h):
//
//   r   = exp(logp - old)
//   u   = -r A,  c = -clip(r, 1 - eps_low, 1 + eps_high) A,  pg = max(u, c)
//   dpg = -r A where u is taken or r is inside the clip range, else 0
//   dual clip (c_d > 1, A < 0, -c_d A < pg): pg = -c_d A, dpg = 0
//   kl  = exp(ref - logp) - (ref - logp) - 1,   dkl = 1 - exp(ref - logp)
//   l   = pg + beta kl,   L = sum_t w_t m_t l_t,   dL/dlogp_t = m_t w_t (dpg + beta dkl)
//   w: TokenMean 1/max(1, N_active); SeqMean 1/(S max(1, n_s)); ConstNorm 1/(S norm_length)
//
// Passes: (1) with a mask, active-token counts (global, or per sequence for SeqMean),
// integer atomics so the result is exact; (2) one tile of 2048 tokens per block: every
// token's loss, gradient and statistics, fp32 per thread (flushed to fp64 at sequence
// boundaries, as the CPU does per run), fp64 per block into a partial array; (3) one
// block sums the partials in a fixed order (deterministic) and writes the result.
// A non-finite l or ratio on an active token is an error, reported with the token index.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "check.cuh"
#include "murphy/grpo_loss.h"
#include "murphy/validate.h"

namespace murphy {
using namespace cudadetail;

namespace {

constexpr int kBlock = 256;
constexpr int kItems = 8;  // tokens per thread per tile
constexpr int kTile = kBlock * kItems;

struct Partial {
  double loss, ratio, kl;
  unsigned long long low, high, dual, active, bad;
};

struct Result {
  double loss, ratio, kl;
  unsigned long long low, high, dual, active, bad;
  unsigned long long first_bad_input;  // smallest active token with a non-finite input (~0: none)
  unsigned long long first_bad_loss;   // smallest active token with a non-finite l (~0: none)
};

struct Params {
  float lo, hi, dual_c, beta;
  bool dual, has_ref, seq_mean;
  float w_uniform;                          // TokenMean without mask / ConstNorm
  const unsigned long long* total_active;   // TokenMean with mask: from pass 1, else nullptr
  const unsigned long long* seq_count;      // SeqMean with mask: per-sequence counts, else nullptr
  double S;                                 // number of sequences
};

// Index of the sequence holding token t: the last s with off[s] <= t (off[0] = 0 <= t).
__device__ __forceinline__ int64_t find_seq(const int64_t* __restrict__ off, int64_t S, int64_t t) {
  int64_t lo = 0, hi = S - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) >> 1;
    if (__ldg(off + mid) <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Pass 1: active-token counts. Without SeqMean only the total is needed.
__global__ void __launch_bounds__(kBlock) k_count(const uint8_t* __restrict__ mask, int64_t n,
                                                  const int64_t* __restrict__ off, int64_t S, bool per_seq,
                                                  unsigned long long* __restrict__ total,
                                                  unsigned long long* __restrict__ seq_count) {
  __shared__ unsigned long long sh[32];
  const int64_t t0 = int64_t(blockIdx.x) * kTile + threadIdx.x;
  unsigned long long c = 0;
  int64_t s = -1, s_end = 0;
  unsigned long long run = 0;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t t = t0 + int64_t(k) * kBlock;
    if (t >= n) break;
    const unsigned on = mask[t] != 0;
    c += on;
    if (per_seq) {
      if (t >= s_end) {
        if (s >= 0 && run) atomicAdd(seq_count + s, run);
        s = find_seq(off, S, t);
        s_end = __ldg(off + s + 1);
        run = 0;
      }
      run += on;
    }
  }
  if (per_seq && s >= 0 && run) atomicAdd(seq_count + s, run);
  c = block_sum<unsigned long long, kBlock>(c, sh);
  if (threadIdx.x == 0 && c) atomicAdd(total, c);
}

// Pass 2, one tile of kTile tokens per block: per token r = exp(logp - old),
// pg = max(-r A, -clip(r) A) (dual clip: min(pg, -c A) for A < 0), kl = k3(ref, logp),
// l = pg + beta kl, grad = m w (dpg + beta dkl); per-block sums into parts[blockIdx.x].
__global__ void __launch_bounds__(kBlock) k_grpo_tokens(
    int64_t n, const float* __restrict__ logp, const float* __restrict__ old_logp, const float* __restrict__ ref_logp,
    const float* __restrict__ adv, const uint8_t* __restrict__ mask, const int64_t* __restrict__ off, int64_t S,
    Params q, float* __restrict__ grad, float* __restrict__ tok, Partial* __restrict__ parts,
    unsigned long long* __restrict__ first_bad) {
  __shared__ double shd[32];
  __shared__ unsigned long long shu[32];
  const int64_t t0 = int64_t(blockIdx.x) * kTile + threadIdx.x;

  float w = q.w_uniform;
  if (!q.seq_mean && q.total_active) {
    const unsigned long long na = *q.total_active;
    w = float(1.0 / double(na > 0 ? na : 1ull));
  }
  double loss_acc = 0.0;
  float run_loss = 0.f, ratio = 0.f, kls = 0.f;
  unsigned low = 0, high = 0, dual = 0, active = 0, bad = 0;
  int64_t s = -1, s_end = 0;

#pragma unroll 2
  for (int k = 0; k < kItems; ++k) {
    const int64_t t = t0 + int64_t(k) * kBlock;
    if (t >= n) break;
    if (q.seq_mean && t >= s_end) {  // new sequence: flush the run with its weight
      loss_acc += double(w) * double(run_loss);
      run_loss = 0.f;
      s = find_seq(off, S, t);
      s_end = __ldg(off + s + 1);
      const unsigned long long ns =
          q.seq_count ? q.seq_count[s] : (unsigned long long)(s_end - __ldg(off + s));
      w = float(1.0 / (q.S * double(ns > 0 ? ns : 1ull)));
    }
    const bool on = !mask || mask[t] != 0;
    const float A = adv[t], lp = logp[t], od = old_logp[t];
    const float r = expf(lp - od);
    float rc = r < q.lo ? q.lo : r;
    rc = rc > q.hi ? q.hi : rc;
    const float u = -r * A, cl = -rc * A;
    const bool take_u = u >= cl;
    float pg = take_u ? u : cl;
    float dpg = (take_u || (r > q.lo && r < q.hi)) ? -r * A : 0.f;
    const float bound = -q.dual_c * A;
    const bool is_dual = q.dual && A < 0.f && bound < pg;
    pg = is_dual ? bound : pg;
    dpg = is_dual ? 0.f : dpg;
    float kl = 0.f, dkl = 0.f, rf = 0.f;
    if (q.has_ref) {
      rf = ref_logp[t];
      const float d = rf - lp;
      const float ed = expf(d);
      kl = ed - d - 1.f;
      dkl = 1.f - ed;
    }
    const float l = pg + q.beta * kl;
    // NaN / inf in the loss or the ratio (an infinite ratio times a zero advantage would
    // otherwise hide behind the clipped branch), as on the CPU
    const bool finite = (l - l) == 0.f && (r - r) == 0.f;
    if (grad) grad[t] = on ? w * (dpg + q.beta * dkl) : 0.f;
    if (tok) tok[t] = on ? l : 0.f;
    if (on) {
      run_loss += l;
      ratio += r;
      kls += kl;
      low += (A < 0.f && r < q.lo);
      high += (A > 0.f && r > q.hi);
      dual += is_dual;
      active += 1;
      if (!finite) {
        bad += 1;
        atomicMin(&first_bad[1], (unsigned long long)t);
        if (!isfinite(lp) || !isfinite(od) || !isfinite(A) || !isfinite(rf))
          atomicMin(&first_bad[0], (unsigned long long)t);
      }
    }
  }
  loss_acc += double(w) * double(run_loss);

  const double bl = block_sum<double, kBlock>(loss_acc, shd);
  const double br = block_sum<double, kBlock>(double(ratio), shd);
  const double bk = block_sum<double, kBlock>(double(kls), shd);
  const unsigned long long b_low = block_sum<unsigned long long, kBlock>(low, shu);
  const unsigned long long b_high = block_sum<unsigned long long, kBlock>(high, shu);
  const unsigned long long b_dual = block_sum<unsigned long long, kBlock>(dual, shu);
  const unsigned long long b_act = block_sum<unsigned long long, kBlock>(active, shu);
  const unsigned long long b_bad = block_sum<unsigned long long, kBlock>(bad, shu);
  if (threadIdx.x == 0) parts[blockIdx.x] = Partial{bl, br, bk, b_low, b_high, b_dual, b_act, b_bad};
}

// Pass 3: sum the partials in a fixed order.
__global__ void __launch_bounds__(kBlock) k_grpo_final(const Partial* __restrict__ parts, int64_t nparts,
                                                       Result* __restrict__ out) {
  __shared__ double shd[32];
  __shared__ unsigned long long shu[32];
  Partial a{0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = threadIdx.x; i < nparts; i += kBlock) {
    const Partial& p = parts[i];
    a.loss += p.loss;
    a.ratio += p.ratio;
    a.kl += p.kl;
    a.low += p.low;
    a.high += p.high;
    a.dual += p.dual;
    a.active += p.active;
    a.bad += p.bad;
  }
  const double l = block_sum<double, kBlock>(a.loss, shd);
  const double r = block_sum<double, kBlock>(a.ratio, shd);
  const double k = block_sum<double, kBlock>(a.kl, shd);
  const unsigned long long lo = block_sum<unsigned long long, kBlock>(a.low, shu);
  const unsigned long long hi = block_sum<unsigned long long, kBlock>(a.high, shu);
  const unsigned long long du = block_sum<unsigned long long, kBlock>(a.dual, shu);
  const unsigned long long ac = block_sum<unsigned long long, kBlock>(a.active, shu);
  const unsigned long long bd = block_sum<unsigned long long, kBlock>(a.bad, shu);
  if (threadIdx.x == 0) {
    out->loss = l;
    out->ratio = r;
    out->kl = k;
    out->low = lo;
    out->high = hi;
    out->dual = du;
    out->active = ac;
    out->bad = bd;
  }
}

// seq_offsets live on the device: bring them over to check them (small: S + 1 values).
void validate(const GrpoLossArgs& a, std::vector<int64_t>& off) {
  if (a.n_seqs >= 1 && a.seq_offsets) {
    off.resize(size_t(a.n_seqs + 1));
    CUDA_CHECK(cudaMemcpy(off.data(), a.seq_offsets, off.size() * sizeof(int64_t), cudaMemcpyDeviceToHost));
  }
  validate_grpo(a, off.empty() ? nullptr : off.data());
}

}  // namespace

GrpoLossStats grpo_loss_cuda(const GrpoLossArgs& a) {
  std::vector<int64_t> off;
  validate(a, off);
  if (a.n_tokens == 0) return GrpoLossStats{};
  const int64_t S = a.n_seqs, n = a.n_tokens;
  const int64_t nblocks = ceil_div(n, kTile);
  const bool seq_mean = a.agg == LossAgg::SeqMean;

  // Scratch layout: Result | total count | per-seq counts | partials.
  const size_t off_total = sizeof(Result);
  const size_t off_counts = off_total + 256;
  const size_t counts_bytes = seq_mean && a.mask ? size_t(S) * sizeof(unsigned long long) : 0;
  const size_t off_parts = (off_counts + counts_bytes + 255) & ~size_t(255);
  Scratch scratch(off_parts + size_t(nblocks) * sizeof(Partial));
  Result* res = scratch.as<Result>(0);
  unsigned long long* total = scratch.as<unsigned long long>(off_total);
  unsigned long long* seq_count = counts_bytes ? scratch.as<unsigned long long>(off_counts) : nullptr;
  Partial* parts = scratch.as<Partial>(off_parts);
  CUDA_CHECK(cudaMemset(scratch.get(), 0, off_parts));
  CUDA_CHECK(cudaMemset(&res->first_bad_input, 0xff, 2 * sizeof(unsigned long long)));

  Params q;
  q.lo = 1.0f - a.eps_low;
  q.hi = 1.0f + a.eps_high;
  q.dual_c = a.dual_clip;
  q.beta = a.beta;
  q.dual = a.dual_clip > 1.0f;
  q.has_ref = a.ref_logp != nullptr;
  q.seq_mean = seq_mean;
  q.S = double(S);
  q.total_active = nullptr;
  q.seq_count = seq_count;
  if (a.agg == LossAgg::ConstNorm) {
    q.w_uniform = float(1.0 / (double(S) * double(a.norm_length)));
  } else if (a.agg == LossAgg::TokenMean && !a.mask) {
    q.w_uniform = float(1.0 / double(std::max<int64_t>(1, n)));
  } else {
    q.w_uniform = 0.f;
    if (a.agg == LossAgg::TokenMean) q.total_active = total;
  }

  const bool need_count = a.mask && (a.agg == LossAgg::TokenMean || seq_mean);
  if (need_count) {
    k_count<<<unsigned(nblocks), kBlock>>>(a.mask, n, a.seq_offsets, S, seq_mean, total, seq_count);
    CUDA_CHECK_LAUNCH();
  }
  k_grpo_tokens<<<unsigned(nblocks), kBlock>>>(n, a.logp, a.old_logp, a.ref_logp, a.advantages, a.mask,
                                               a.seq_offsets, S, q, a.grad_logp, a.token_loss, parts,
                                               &res->first_bad_input);
  CUDA_CHECK_LAUNCH();
  k_grpo_final<<<1, kBlock>>>(parts, nblocks, res);
  CUDA_CHECK_LAUNCH();
  sync_check("grpo_loss_cuda");
  Result h;
  CUDA_CHECK(cudaMemcpy(&h, res, sizeof(h), cudaMemcpyDeviceToHost));

  if (h.bad > 0) {
    const unsigned long long none = ~0ull;
    unsigned long long t = h.first_bad_input != none ? h.first_bad_input : h.first_bad_loss;
    if (t == none || int64_t(t) >= n) t = 0;
    float v[4] = {0, 0, 0, 0};
    CUDA_CHECK(cudaMemcpy(&v[0], a.logp + t, 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&v[1], a.old_logp + t, 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&v[2], a.advantages + t, 4, cudaMemcpyDeviceToHost));
    if (a.ref_logp) CUDA_CHECK(cudaMemcpy(&v[3], a.ref_logp + t, 4, cudaMemcpyDeviceToHost));
    throw_grpo_nonfinite(int64_t(t), v[0], v[1], v[2], a.ref_logp ? &v[3] : nullptr);
  }
  return grpo_stats_from_sums(h.loss, h.ratio, h.kl, int64_t(h.low), int64_t(h.high), int64_t(h.dual), int64_t(h.active));
}

}  // namespace murphy
