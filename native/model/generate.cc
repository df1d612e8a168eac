// Generation for the embedded rollout backend: batched prefill of all prompts (one packed
// forward), then batched decode of every live sample with a KV cache. The n samples of a
// prompt share its prefill cache (segment 0) and each appends to its own (segment 1).
//
// Sampling, per sample and step, on the logits z of the last position:
//   temperature 0: greedy, token = argmax z (lowest id on ties), logp = log_softmax(z)[token]
//   otherwise:     z' = z / T;  min-p keeps the z' with (z' - max z') >= log(min_p) (probability
//                  at least min_p times the largest);  top-k keeps the k largest z';  top-p
//                  keeps the smallest set of the largest z' (of those kept) whose probability
//                  mass reaches p;  p = softmax over the kept set;  token = inverse CDF of p at
//                  u, walked in id order when nothing is filtered, else in order of decreasing
//                  z (lowest id first on ties);  logp = log p[token]
//   (vLLM's "processed" log-probs). Alternatives (top_logprobs > 0): the k tokens of largest z
//   (lowest id on ties), each with its log-prob under the same processed distribution,
//   log p_i = (z_i - max z) / T - log sum_kept exp((z - max z) / T), and -inf outside the kept set.
//   u comes from a counter-based hash (murphy/sample_rng.h, shared with the device sampler) of
//   (seed + prompt index, sample index, step), so a prompt's samples do not depend on the
//   other prompts of the call (prompt p of a call with seed s = a call with [p] and s + p).
//   The terms exp((z - max z) / T) are fp64, by a vectorized exp within 2 ulp of the correctly
//   rounded one (sample_terms.cc); the no-filter walk adds them block by block (kTermBlock), so
//   a draw can differ from an exact-arithmetic one only where u s lies within rounding
//   (~1e-16 s) of a boundary.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "../cpu/threads.h"
#include "gemm_driver.h"
#include "murphy/heap.h"
#include "murphy/sample_rng.h"
#include "model_internal.h"

namespace murphy {
namespace model {

namespace {

struct Sample {
  int64_t prompt = 0, j = 0;
  std::vector<Vec> k, v;  // per layer [cap, G, D]
  int64_t len = 0;        // entries in the own cache
  int64_t cap = 0;
  uint64_t stream = 0;
  bool done = false;
  GenResult res;
};

struct CachedAttn : AttnHook {
  const ModelConfig& c;
  std::vector<Sample*>& live;
  const std::vector<Vec>& kpre;
  const std::vector<Vec>& vpre;
  const std::vector<int64_t>& poff;
  const std::vector<int64_t>& plen;
  CachedAttn(const ModelConfig& c_, std::vector<Sample*>& live_, const std::vector<Vec>& kp, const std::vector<Vec>& vp,
             const std::vector<int64_t>& po, const std::vector<int64_t>& pl)
      : c(c_), live(live_), kpre(kp), vpre(vp), poff(po), plen(pl) {}
  void run(int64_t layer, const float* q, const float* k, const float* v, float* out, float*) override {
    const int64_t B = int64_t(live.size()), kvd = c.n_kv * c.head_dim;
    std::vector<const float*> k0(static_cast<size_t>(B)), v0(static_cast<size_t>(B)), k1(static_cast<size_t>(B)), v1(static_cast<size_t>(B));
    std::vector<int64_t> l0(static_cast<size_t>(B)), l1(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      Sample& s = *live[size_t(b)];
      std::memcpy(s.k[size_t(layer)].data() + s.len * kvd, k + b * kvd, size_t(kvd) * 4);
      std::memcpy(s.v[size_t(layer)].data() + s.len * kvd, v + b * kvd, size_t(kvd) * 4);
      k0[size_t(b)] = kpre[size_t(layer)].data() + poff[size_t(s.prompt)] * kvd;
      v0[size_t(b)] = vpre[size_t(layer)].data() + poff[size_t(s.prompt)] * kvd;
      l0[size_t(b)] = plen[size_t(s.prompt)];
      k1[size_t(b)] = s.k[size_t(layer)].data();
      v1[size_t(b)] = s.v[size_t(layer)].data();
      l1[size_t(b)] = s.len + 1;
    }
    AttnCacheArgs a;
    a.B = B, a.n_heads = c.n_heads, a.n_kv = c.n_kv, a.head_dim = c.head_dim;
    a.scale = float(1.0 / std::sqrt(double(c.head_dim)));
    a.q = q, a.k0 = k0.data(), a.v0 = v0.data(), a.len0 = l0.data(), a.k1 = k1.data(), a.v1 = v1.data();
    a.len1 = l1.data(), a.out = out;
    attention_cached_cpu(a);
  }
};

// A draw: the token, its log-prob under the processed distribution, and that distribution
// (max logit m, temperature T, log of the kept mass, and how many of the largest logits it keeps).
struct Draw {
  int32_t token;
  float logp;
  float m;
  double T, log_s;
  int64_t keep;
};

// The sampler's order of token ids: larger logit first, lowest id first on ties (a strict total
// order: -0 and +0 compare equal, so they fall back to the ids).
struct DescByLogit {
  const float* z;
  bool operator()(int32_t a, int32_t b) const { return z[a] > z[b] || (z[a] == z[b] && a < b); }
};

// Sorting scratch of one row: the ids to order and the radix sort's keys and buffers.
struct SortScratch {
  std::vector<int32_t> idx, tmp;
  std::vector<uint32_t> key, ktmp;
  std::vector<float> zk;  // the kept logits in sorted order (their softmax terms' input)
};

// The radix key of a logit: unsigned order of keys = DescByLogit's order of values (the float's
// bits mapped so that unsigned order is float order, negatives flipped whole, positives with the
// sign bit set, -0 taken as +0, then complemented: descending). No NaN.
inline uint32_t desc_key(float z) {
  const float x = z == 0.0f ? 0.0f : z;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return ~((b & 0x80000000u) ? ~b : (b | 0x80000000u));
}

// DescByLogit's order of the n ids in idx (given in increasing id order), the same permutation
// as std::sort with it, by a stable LSD radix sort on 32-bit keys in three passes of 11 bits:
// O(n) where the comparison sort took O(n log n), 10-13 ms a token at Qwen3's 151,936 (top-p
// over the whole vocabulary).
// Key: the float's bits mapped so that unsigned order is float order (negatives flipped whole,
// positives with the sign bit set), -0 taken as +0 (the comparator holds them equal), then
// complemented for descending order; stability keeps equal keys in id order. No NaN (the
// caller has refused them).
void sort_desc(const float* z, int64_t n, SortScratch& s) {
  int32_t* idx = s.idx.data();
  if (n < 4096) {
    std::sort(idx, idx + n, DescByLogit{z});
    return;
  }
  s.tmp.resize(size_t(n)), s.key.resize(size_t(n)), s.ktmp.resize(size_t(n));
  uint32_t* key = s.key.data();
  for (int64_t i = 0; i < n; ++i) key[i] = desc_key(z[idx[i]]);
  int32_t *src = idx, *dst = s.tmp.data();
  uint32_t *ksrc = key, *kdst = s.ktmp.data();
  for (int shift = 0; shift < 32; shift += 11) {
    int64_t count[2049] = {};
    for (int64_t i = 0; i < n; ++i) ++count[((ksrc[i] >> shift) & 2047u) + 1];
    for (int b = 0; b < 2048; ++b) count[b + 1] += count[b];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = count[(ksrc[i] >> shift) & 2047u]++;
      dst[at] = src[i], kdst[at] = ksrc[i];
    }
    std::swap(src, dst), std::swap(ksrc, kdst);
  }
  // three passes: the result is in tmp
  std::memcpy(idx, src, size_t(n) * 4);
}

// The k-th largest of z[0, V) (counted with multiplicity), 1 <= k <= V, no NaN. For k up to V / 16
// a min-heap of the k largest seen: a value enters only when it beats the heap's least, which
// the scan mostly answers "no" with a well-predicted branch (at most ~k ln(V / k) entries on
// values in random order); for larger k, nth_element on a copy of the values.
float kth_largest(const float* z, int64_t V, int64_t k, std::vector<float>& heap) {
  if (k * 16 > V) {
    heap.assign(z, z + V);
    std::nth_element(heap.begin(), heap.begin() + (k - 1), heap.end(), std::greater<float>());
    return heap[size_t(k - 1)];
  }
  heap.assign(z, z + k);
  std::make_heap(heap.begin(), heap.end(), std::greater<float>());
  float least = heap.front();
  for (int64_t i = k; i < V; ++i) {
    if (z[i] > least) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
      heap.back() = z[i];
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
      least = heap.front();
    }
  }
  return least;
}

// The first k ids of DescByLogit's order of all V ids, in that order, into ss.idx[0, k) (the
// order is strict, so they are one set in one order), 1 <= k <= V: top-k's kept set and the
// alternatives (top_logprobs). Above 4,096 ids the k-th largest value t
// is found first (kth_largest), and only the ids with z >= t (t's ties included: at least k)
// are selected and sorted, where nth_element over the ids of the whole vocabulary (each
// comparison two reads of z, and mispredicted branches) took ~1-2 ms a row at Qwen3's 151,936.
void top_k_ids(const float* z, int64_t V, int64_t k, SortScratch& ss) {
  std::vector<int32_t>& idx = ss.idx;
  const DescByLogit desc{z};
  idx.clear();
  if (V < 4096) {
    idx.resize(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
  } else {
    const float t = kth_largest(z, V, k, ss.zk);  // (-0 == +0: either selects both)
    for (int32_t i = 0; i < int32_t(V); ++i)
      if (z[i] >= t) idx.push_back(i);
  }
  std::nth_element(idx.begin(), idx.begin() + k, idx.end(), desc);
  std::sort(idx.begin(), idx.begin() + k, desc);
}

// The sampler's blocks of terms: the no-filter draw finds its block by the block sums, then its
// token by the block's own terms (recomputed: the same values).
constexpr int64_t kTermBlock = 512;

// The terms of the first n ids of ss.idx (a prefix of DescByLogit's order), in that order, into pr.
void sorted_terms(const float* z, int64_t n, float m, double T, SortScratch& ss, std::vector<double>& pr) {
  pr.resize(static_cast<size_t>(n));
  ss.zk.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ss.zk[size_t(i)] = z[ss.idx[size_t(i)]];
  softmax_terms(ss.zk.data(), n, m, T, pr.data());
}

// Top-p's cut of terms in sorted order: the shortest prefix of pr[0, n) whose running share of
// the mass s (sum of pr[i] / s, in order) reaches top_p; 0 when the n terms fall short of it.
int64_t top_p_prefix(const double* pr, int64_t n, double s, float top_p) {
  double c = 0;
  for (int64_t i = 0; i < n; ++i) {
    c += pr[i] / s;
    if (c >= double(top_p)) return i + 1;
  }
  return 0;
}

// The draw from the kept ids idx[0, keep) in that order with terms pr: the first at which the
// running mass reaches u s, s the kept mass summed in that order.
Draw draw_sorted(const std::vector<int32_t>& idx, const std::vector<double>& pr, int64_t keep, double u, float m, double T) {
  double s = 0;
  for (int64_t i = 0; i < keep; ++i) s += pr[size_t(i)];
  const double target = u * s;
  double c = 0;
  int64_t pick = keep - 1;
  for (int64_t i = 0; i < keep; ++i) {
    c += pr[size_t(i)];
    if (c >= target) {
      pick = i;
      break;
    }
  }
  return {idx[size_t(pick)], float(std::log(pr[size_t(pick)] / s)), m, T, std::log(s), keep};
}

// Top-p alone (no min-p, no top-k) over V >= 4,096 tokens: the kept prefix usually holds a few
// of the largest logits, so only the ids above a cut are ordered, not the whole vocabulary.
// softmax_cut_masses gives the mass above each cut x = (z - m) / T >= -cut[j] (2 to 64) and the
// total S; the highest cut whose mass reaches top_p S (with 1e-9 to spare for the summation
// order) holds the kept prefix. Those ids are sorted and walked with S as the total (top-p's
// share sum(pr / S) in sorted order, as top_p_prefix). False, with nothing drawn, when no cut
// holds the prefix (top_p so close to 1 that the mass below x = -64 counts, or rounding: the
// caller orders the whole vocabulary then).
bool top_p_by_cut(const float* z, int64_t V, float top_p, double u, float m, double T, SortScratch& ss,
                  std::vector<double>& pr, Draw& out) {
  const double* cut;
  const int ncut = softmax_top_p_cuts(&cut);
  double mass[kTopPCutsMax + 1];
  softmax_cut_masses(z, V, m, T, mass);
  const double S = mass[ncut];
  int j = 0;
  while (j < ncut && !(mass[j] >= double(top_p) * S * (1.0 + 1e-9))) ++j;
  if (j == ncut) return false;
  // the ids with x >= -cut[j], x computed as softmax_cut_masses computes it (its T = 1 path skips
  // a division by 1, which changes no bits); a float bound below the cut skips the division for
  // most ids (z - m >= -cut T must hold, up to rounding)
  const double lo = -cut[j], zlo = double(m) + lo * T - 1e-6 * (std::fabs(double(m)) + cut[j] * T + 1.0);
  std::vector<int32_t>& idx = ss.idx;
  idx.clear();
  for (int32_t i = 0; i < int32_t(V); ++i) {
    if (!(double(z[i]) >= zlo)) continue;
    if ((double(z[i]) - m) / T >= lo) idx.push_back(i);
  }
  const int64_t n = int64_t(idx.size());
  sort_desc(z, n, ss);
  sorted_terms(z, n, m, T, ss, pr);
  const int64_t keep = top_p_prefix(pr.data(), n, S, top_p);
  if (keep == 0) return false;
  out = draw_sorted(idx, pr, keep, u, m, T);
  return true;
}

Draw sample_row(const float* z, int64_t V, const SampleOptions& o, double u, SortScratch& ss, std::vector<double>& pr) {
  float m;
  int64_t am;
  bool nan;
  argmax_nan(z, V, &m, &am, &nan);
  if (!(m > -std::numeric_limits<float>::infinity()) || nan)
    throw Error("generate: the model produced NaN or -inf logits");
  const double T = o.temperature > 0 ? double(o.temperature) : 1.0;
  const int64_t blocks = (V + kTermBlock - 1) / kTermBlock;
  // s = the sum of every term: the block sums (softmax_block_sums) added in block order
  auto total = [&]() {
    pr.resize(static_cast<size_t>(blocks));
    softmax_block_sums(z, V, m, T, kTermBlock, pr.data());
    double s = 0;
    for (int64_t b = 0; b < blocks; ++b) s += pr[size_t(b)];
    return s;
  };
  if (o.temperature <= 0.0f || o.top_k == 1) {
    if (o.temperature > 0.0f) return {int32_t(am), 0.0f, m, T, 0.0, 1};  // top-k 1: one token kept
    if (!o.logprobs) return {int32_t(am), std::numeric_limits<float>::quiet_NaN(), m, T, 0.0, V};
    const double s = total();
    return {int32_t(am), float(-std::log(s)), m, T, std::log(s), V};
  }
  const bool top_k = o.top_k > 0 && o.top_k < V;
  const bool filter = top_k || o.top_p < 1.0f || o.min_p > 0.0f;
  if (!filter) {  // full softmax in id order
    // the draw: the first token, in id order, at which the running mass reaches u s (and whose
    // term is not 0), the running mass being the sums of the blocks before its block plus the
    // terms of its block before it and its own; should rounding leave the found block short,
    // its last token with a term above 0
    const double s = total(), target = u * s;
    double c = 0;
    int64_t b = 0;
    for (; b < blocks; ++b) {
      const double bs = pr[size_t(b)];
      if (c + bs >= target && bs > 0) break;
      c += bs;
    }
    if (b == blocks) b = am / kTermBlock;  // (unreachable: the running mass ends at s >= u s)
    const int64_t b0 = b * kTermBlock, len = std::min(kTermBlock, V - b0);
    double p[kTermBlock];
    softmax_terms(z + b0, len, m, T, p);
    int64_t tok = -1;
    for (int64_t i = 0; i < len; ++i) {
      c += p[i];
      if (p[i] > 0) {
        tok = b0 + i;
        if (c >= target) break;
      }
    }
    return {int32_t(tok), float((double(z[tok]) - m) / T - std::log(s)), m, T, std::log(s), V};
  }
  if (o.top_p < 1.0f && o.min_p <= 0.0f && !top_k && V >= 4096) {
    Draw d;
    if (top_p_by_cut(z, V, o.top_p, u, m, T, ss, pr, d)) return d;
  }
  std::vector<int32_t>& idx = ss.idx;
  const double lmin = o.min_p > 0.0f ? std::log(double(o.min_p)) : 0.0;
  auto minp_keeps = [&](int32_t i) { return (double(z[i]) - m) / T >= lmin; };
  int64_t keep = V;
  if (top_k) {
    keep = o.top_k;
    top_k_ids(z, V, keep, ss);
  } else {
    // min-p keeps a prefix of the sorted order (its test is monotone in z): only those ids are
    // sorted, in the order they would have in the whole vocabulary's
    idx.clear();
    for (int32_t i = 0; i < int32_t(V); ++i)
      if (o.min_p <= 0.0f || minp_keeps(i)) idx.push_back(i);
    keep = int64_t(idx.size());
    sort_desc(z, keep, ss);
  }
  if (o.min_p > 0.0f) {  // a prefix of the sorted order: (z - m) / T >= log(min_p); the largest always stays
    int64_t k2 = 1;
    while (k2 < keep && minp_keeps(idx[size_t(k2)])) ++k2;
    keep = k2;
  }
  sorted_terms(z, keep, m, T, ss, pr);
  if (o.top_p < 1.0f) {
    double s = 0;
    for (int64_t i = 0; i < keep; ++i) s += pr[size_t(i)];
    const int64_t k2 = top_p_prefix(pr.data(), keep, s, o.top_p);
    if (k2 > 0) keep = k2;
  }
  return draw_sorted(ss.idx, pr, keep, u, m, T);
}

}  // namespace

SampledToken sample_logits_cpu(const float* z, int64_t V, const SampleOptions& o, double u) {
  SortScratch ss;
  std::vector<double> pr;
  const Draw d = sample_row(z, V, o, u, ss, pr);
  return {d.token, d.logp};
}

namespace {

// The k most likely tokens of a draw's distribution (largest z first, lowest id on ties).
void alternatives(const float* z, int64_t V, int64_t k, const Draw& d, SortScratch& ss, std::vector<int32_t>& ids,
                  std::vector<float>& logp) {
  k = std::min(k, V);
  top_k_ids(z, V, k, ss);
  const std::vector<int32_t>& idx = ss.idx;
  for (int64_t r = 0; r < k; ++r) {
    const int32_t t = idx[size_t(r)];
    ids.push_back(t);
    if (t == d.token) logp.push_back(d.logp);  // exactly the sampled token's reported value
    else if (r < d.keep) logp.push_back(float((double(z[t]) - d.m) / d.T - d.log_s));
    else logp.push_back(-std::numeric_limits<float>::infinity());
  }
}

bool cancelled(const SampleOptions& o, int64_t sample) {
  if (o.stop_all != nullptr && o.stop_all->load(std::memory_order_relaxed)) return true;
  return o.cancel != nullptr && __atomic_load_n(o.cancel + sample, __ATOMIC_RELAXED) != 0;
}

}  // namespace

// The caches and logits freed here stay in the process for the next call (a training loop
// generates every step) unless o.release_heap: then they go back to the system, with the matrix
// products' cached big buffers (gemm_driver.h).
std::vector<GenResult> Engine::generate(const std::vector<std::vector<int32_t>>& prompts, const SampleOptions& o) {
  std::vector<GenResult> out = generate_impl(prompts, o);
  if (o.release_heap) {
    gemm_driver::release_cached_buffers();
    release_free_heap();
  }
  return out;
}

std::vector<GenResult> Engine::generate_impl(const std::vector<std::vector<int32_t>>& prompts, const SampleOptions& o) {
  const ModelConfig& c = cfg_;
  const int64_t nP = int64_t(prompts.size()), H = c.hidden, V = c.vocab, kvd = c.n_kv * c.head_dim;
  if (nP == 0) return {};
  if (o.n < 1) throw Error("generate: n must be >= 1");
  if (o.max_new_tokens < 1) throw Error("generate: maxNewTokens must be >= 1");
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) throw Error("generate: topP must be in (0, 1]");
  if (o.top_k < 0) throw Error("generate: topK must be >= 0");
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) throw Error("generate: minP must be in [0, 1]");
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature)) throw Error("generate: temperature must be >= 0");
  if (o.top_logprobs < 0) throw Error("generate: topLogprobs must be >= 0");
  // prefill: all prompts packed into one forward pass
  std::vector<int64_t> off(static_cast<size_t>(nP + 1), 0), plen(static_cast<size_t>(nP));
  for (int64_t p = 0; p < nP; ++p) {
    plen[size_t(p)] = int64_t(prompts[size_t(p)].size());
    if (plen[size_t(p)] == 0) throw Error("generate: prompt " + std::to_string(p) + " is empty");
    if (plen[size_t(p)] >= c.max_pos)
      throw Error("generate: prompt " + std::to_string(p) + " has " + std::to_string(plen[size_t(p)]) +
                  " tokens, at or beyond max_position_embeddings (" + std::to_string(c.max_pos) + ")");
    off[size_t(p + 1)] = off[size_t(p)] + plen[size_t(p)];
  }
  const int64_t T = off[size_t(nP)];
  std::vector<int32_t> toks(static_cast<size_t>(T)), pos(static_cast<size_t>(T));
  for (int64_t p = 0; p < nP; ++p)
    for (int64_t i = 0; i < plen[size_t(p)]; ++i) {
      toks[size_t(off[size_t(p)] + i)] = prompts[size_t(p)][size_t(i)];
      pos[size_t(off[size_t(p)] + i)] = int32_t(i);
    }
  PackedBatch b;
  b.T = T, b.tokens = toks.data(), b.positions = pos.data(), b.seq_offsets = off.data(), b.n_seqs = nP;
  check_batch(b);
  std::vector<Vec> kpre(static_cast<size_t>(c.n_layers)), vpre(static_cast<size_t>(c.n_layers));
  Fwd f{c, layout_, w_.data(), rope_, bf16_.generate ? bf16_weights() : nullptr};
  const int64_t head_off = layout_.params[size_t(layout_.lm_head >= 0 ? layout_.lm_head : layout_.embed)].offset;
  const float* Wh = w_.data() + head_off;
  // logits[M, V] = X[M, H] Wh^T, with the bf16 head when generation uses bf16 weights
  auto head = [&](const float* X, float* out, int64_t M) {
    if (f.wb) linear_forward_bf16(X, f.wb + head_off, out, M, V, H, false);
    else linear_forward(X, Wh, out, M, V, H, false);
  };
  Vec logits;
  {
    Acts A;
    PackedAttn attn(c, b);
    attn.keep_k = &kpre;
    attn.keep_v = &vpre;
    run_forward(f, toks.data(), pos.data(), T, attn, A, false);
    Vec last(static_cast<size_t>(nP * H));
    for (int64_t p = 0; p < nP; ++p)
      std::memcpy(last.data() + p * H, A.xf.data() + (off[size_t(p + 1)] - 1) * H, size_t(H) * 4);
    checked_resize(logits, nP * V, "the logits");
    head(last.data(), logits.data(), nP);
    act_peak_ = std::max(act_peak_, A.bytes() + int64_t(nP * V) * 4);
  }
  // samples
  std::vector<Sample> samples(static_cast<size_t>(nP * o.n));
  for (int64_t p = 0; p < nP; ++p)
    for (int64_t j = 0; j < o.n; ++j) {
      Sample& s = samples[size_t(p * o.n + j)];
      s.prompt = p, s.j = j;
      // prompt p's samples use seeds[p] (or seed + p): they do not depend on the other prompts
      const uint64_t ps = o.seeds.empty() ? o.seed + uint64_t(p) : o.seeds[size_t(p)];
      s.stream = sample_stream(ps, uint64_t(j));
      s.cap = std::min(o.max_new_tokens, c.max_pos - plen[size_t(p)]);
    }
  // The draws of a step's rows [0, B), row i from the logits z_of(i): in parallel over rows, one
  // part of the rows per thread with its own scratch (sorting indices, probabilities). Each
  // row's arithmetic is sample_row's and alternatives', row by row, so the results do not depend
  // on the number of threads. (A row is an fp64 softmax over the vocabulary: the decode step's
  // largest cost after the matrix products at a 32k vocabulary, and serial before.)
  const int64_t parts_max = std::max<int64_t>(1, num_threads());
  std::vector<SortScratch> scratch(static_cast<size_t>(parts_max));
  std::vector<std::vector<double>> pr(static_cast<size_t>(parts_max));
  std::vector<Draw> draws;
  std::vector<std::vector<int32_t>> alt_ids;
  std::vector<std::vector<float>> alt_logp;
  auto draw_rows = [&](const std::vector<Sample*>& rows, int64_t step, const std::function<const float*(int64_t)>& z_of) {
    const int64_t B = int64_t(rows.size()), parts = std::min(B, parts_max);
    draws.resize(size_t(B));
    alt_ids.resize(size_t(B));
    alt_logp.resize(size_t(B));
    parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t i = p * B / parts; i < (p + 1) * B / parts; ++i) {
          const Draw d = sample_row(z_of(i), V, o, sample_uniform(rows[size_t(i)]->stream, step), scratch[size_t(p)], pr[size_t(p)]);
          draws[size_t(i)] = d;
          alt_ids[size_t(i)].clear();
          alt_logp[size_t(i)].clear();
          if (o.top_logprobs > 0) alternatives(z_of(i), V, o.top_logprobs, d, scratch[size_t(p)], alt_ids[size_t(i)], alt_logp[size_t(i)]);
        }
    });
  };
  std::vector<StepToken> stepped;
  // row i's draw into its sample, in row order
  auto take = [&](Sample& s, int64_t i) {
    const Draw& r = draws[size_t(i)];
    s.res.tokens.push_back(r.token);
    s.res.logp.push_back(o.logprobs ? r.logp : std::numeric_limits<float>::quiet_NaN());
    const size_t at = s.res.top_ids.size();
    s.res.top_ids.insert(s.res.top_ids.end(), alt_ids[size_t(i)].begin(), alt_ids[size_t(i)].end());
    s.res.top_logp.insert(s.res.top_logp.end(), alt_logp[size_t(i)].begin(), alt_logp[size_t(i)].end());
    if (o.on_step) {
      StepToken st;
      st.sample = s.prompt * o.n + s.j, st.token = r.token, st.logp = s.res.logp.back();
      st.top_ids.assign(s.res.top_ids.begin() + long(at), s.res.top_ids.end());
      st.top_logp.assign(s.res.top_logp.begin() + long(at), s.res.top_logp.end());
      stepped.push_back(std::move(st));
    }
    if (std::find(o.stop_ids.begin(), o.stop_ids.end(), r.token) != o.stop_ids.end()) {
      s.done = true;
      s.res.finish = "stop";
    } else if (int64_t(s.res.tokens.size()) >= s.cap) {
      s.done = true;
      s.res.finish = "length";
    }
  };
  auto report = [&]() {
    if (o.on_step && !stepped.empty()) o.on_step(stepped);
    stepped.clear();
  };
  auto abort_if_cancelled = [&](Sample& s) {
    if (s.done || !cancelled(o, s.prompt * o.n + s.j)) return false;
    s.done = true;
    s.res.finish = "abort";
    s.k.clear(), s.v.clear();
    return true;
  };
  {
    std::vector<Sample*> first;
    for (Sample& s : samples)
      if (!abort_if_cancelled(s)) first.push_back(&s);
    draw_rows(first, 0, [&](int64_t i) -> const float* { return logits.data() + first[size_t(i)]->prompt * V; });
    for (size_t i = 0; i < first.size(); ++i) take(*first[i], int64_t(i));
  }
  report();
  std::vector<Sample*> live;
  for (Sample& s : samples)
    if (!s.done) {
      s.k.resize(static_cast<size_t>(c.n_layers));
      s.v.resize(static_cast<size_t>(c.n_layers));
      for (int64_t l = 0; l < c.n_layers; ++l) {
        checked_resize(s.k[size_t(l)], s.cap * kvd, "the KV cache");
        checked_resize(s.v[size_t(l)], s.cap * kvd, "the KV cache");
      }
      live.push_back(&s);
    }
  Acts A;
  for (int64_t step = 1; !live.empty(); ++step) {
    live.erase(std::remove_if(live.begin(), live.end(), [&](Sample* s) { return abort_if_cancelled(*s); }), live.end());
    if (live.empty()) break;
    const int64_t B = int64_t(live.size());
    std::vector<int32_t> t(static_cast<size_t>(B)), ps(static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i) {
      t[size_t(i)] = live[size_t(i)]->res.tokens.back();
      ps[size_t(i)] = int32_t(plen[size_t(live[size_t(i)]->prompt)] + live[size_t(i)]->len);
    }
    CachedAttn attn(c, live, kpre, vpre, off, plen);
    run_forward(f, t.data(), ps.data(), B, attn, A, false);
    resize(logits, B * V, "the logits");
    head(A.xf.data(), logits.data(), B);
    draw_rows(live, step, [&](int64_t i) -> const float* { return logits.data() + i * V; });
    std::vector<Sample*> next;
    for (int64_t i = 0; i < B; ++i) {
      Sample& s = *live[size_t(i)];
      ++s.len;
      take(s, i);
      if (!s.done) next.push_back(&s);
      else s.k.clear(), s.v.clear();
    }
    live.swap(next);
    report();
  }
  std::vector<GenResult> out;
  out.reserve(samples.size());
  for (Sample& s : samples) out.push_back(std::move(s.res));
  return out;
}

}  // namespace model
}  // namespace murphy
