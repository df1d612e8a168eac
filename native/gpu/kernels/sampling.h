// Sampling one token per row of logits on the device, in harness form (harness.h): one block
// per row, no sort of the vocabulary. The spec is the CPU sampler (native/model/generate.cc,
// model::sample_logits_cpu), with the same random numbers (murphy/sample_rng.h), so that the
// same seed and options give the same token on the CPU and on the device.
//
// For a row z[0..V) with temperature T, min_p, top_k, top_p, and u = sample_uniform(stream, step):
//   m = max z, a = the lowest id with z_a = m;  p_i = exp((z_i - m) / T)  (fp64)
//   T == 0:         token a, logp = -log sum_i exp(z_i - m)                       (greedy)
//   top_k == 1:     token a, logp = 0
//   otherwise the kept set is a prefix of the order "z descending, lowest id first on ties":
//     min-p keeps i with (z_i - m) / T >= log(min_p);  top-k the first k of those;  top-p the
//     shortest prefix of those whose mass reaches top_p times their total;  S = mass kept.
//   The draw is the first element, walking the kept set, at which the running mass reaches
//   u S: walked in id order when nothing is filtered (as the CPU sampler), else in the
//   descending order above.  logp = log(p_token / S).
//
// Each "first element of an order at which a running count or mass reaches a target" is found
// by an 8-way search with block reductions, in a fixed number of steps: each step evaluates the
// count or mass at 7 thresholds that split the current interval into 8 in one read of the row
// (each thread summing, per threshold, its strided elements that the threshold admits), and
// keeps the part where the target is crossed. First over the 32-bit order key of the logit value
// (the largest key K whose elements with key >= K reach the target: 11 steps), then over the id
// among the elements whose key is K (ties: lowest id first; ceil(log8 V) steps, 6 for V =
// 151,936). A bisection finds the same K and id (the count or mass of a set, summed in the same
// fixed order, is monotone in the threshold), in 32 + ceil(log2 V) steps: 50 against 17 for
// that vocabulary. Counts and masses are summed in fp64 in a fixed order (each thread its strided
// elements in order, then each 32-thread group's first thread, then thread 0), so a set always
// sums to the same bits; the CPU sums in its own order (vector lanes in blocks of 512, the
// blocks in order) and with its own fp64 exp (within 2 ulp of glibc's), which can move a draw
// only when u S lies within ~1e-16 of a boundary. Every step reads the row again: at most
// 3 (11 + ceil(log8 V)) + 4 passes over it (55 for V = 151,936; 154 with bisections).
#pragma once
#include <cstring>

#include "harness.h"
#include "murphy/sample_rng.h"

namespace murphy {
namespace gpu {

// Unsigned keys in the order of the float values; -0 is taken as +0, so equal logits have
// equal keys (as the CPU sampler's comparisons see them).
MURPHY_HD uint32_t logit_key(float z) {
  if (z == 0.0f) z = 0.0f;
  uint32_t b;
  memcpy(&b, &z, 4);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// fp64 values in the (float) shared memory, by slot (slot i = floats 2i, 2i + 1).
MURPHY_HD double sh_get(const float* sh, int i) {
  double v;
  memcpy(&v, sh + 2 * i, 8);
  return v;
}
MURPHY_HD void sh_put(float* sh, int i, double v) { memcpy(sh + 2 * i, &v, 8); }

// The searches split an interval [lo, hi) of keys or ids into kSampleWays parts a step, at the
// thresholds t_j = lo + floor(j (hi - lo) / kSampleWays), j = 1 .. kSampleWays - 1 (exact in
// fp64: hi - lo <= 2^32). Each part is at most ceil((hi - lo) / kSampleWays) long.
constexpr int kSampleWays = 8;
MURPHY_HD double search_threshold(double lo, double hi, int j) { return lo + floor(double(j) * (hi - lo) / kSampleWays); }

// Steps of a search that narrows an interval of n values to one.
constexpr int search_steps(int64_t n) {
  int steps = 0;
  while (n > 1) n = (n + kSampleWays - 1) / kSampleWays, ++steps;
  return steps;
}
constexpr int kKeySearchSteps = search_steps(int64_t(1) << 32);  // 11

// Steps of the search over ids [0, V) (the interval (-1, V - 1]: V values).
inline int id_search_steps(int64_t V) { return search_steps(V); }

template <typename T>
struct SampleRows {
  const T* logits;           // [rows, V]
  const float* temperature;  // [rows]; 0 = greedy
  const float* top_p;        // [rows]; 1 = off
  const float* min_p;        // [rows]; 0 = off
  const int32_t* top_k;      // [rows]; 0 = off
  const uint64_t* stream;    // [rows]: sample_stream(seed, sample index)
  const int64_t* step;       // [rows]: which draw of the stream
  int32_t* token;            // [rows] out; -1 when the row's largest logit is -inf or NaN
  float* logp;               // [rows] out
  int64_t rows, V;
  int id_steps;              // id_search_steps(V)

  // Launched with 512 threads (kSampleBlock, decode_shape.h): at most that many, so that ptxas
  // may give each thread up to 128 registers. The kParts fp64 partials of a search step need
  // more than the 64 that 1,024-thread launch bounds allow (the bisection used all 64).
  static constexpr int kBlockLimit = 512;

  // Stages of three phases (partials; 32-thread groups; thread 0 totals and decides), then
  // one phase that writes the outputs.
  enum Stage { kArgmax, kAgg, kSearch };
  MURPHY_HD int search_len() const { return kKeySearchSteps + id_steps; }
  MURPHY_HD int stages() const { return 4 + 3 * search_len(); }
  MURPHY_HD int phases() const { return 3 * stages() + 1; }
  int64_t grid() const { return rows; }

  // Shared memory in fp64 slots: kParts per-thread partials [0, kParts B) (the argmax's value
  // and id, an aggregate's count and mass, a search step's total at each threshold); the same
  // per 32-thread group after them (at most 32 groups); the row's state after those.
  enum Slot {
    M, AM, TEMP, LMIN, MINP_ON, DONE, TOKEN, LOGP, FILTER, SUM,     // row
    ACT, MASS, TARGET, LO, HI, KSTAR, IDORDER,                      // the current search
    C1ON, C1K, C1T, C2ON, C2K, C2T,                                 // top-k and top-p cuts
    kSlots
  };
  static constexpr int kParts = kSampleWays - 1;
  static size_t shared_floats(int block) { return size_t(2 * (kParts * block + 32 * kParts + kSlots)); }
  MURPHY_HD static int part(int thread, int j) { return thread * kParts + j; }
  MURPHY_HD static int group(int block, int g, int j) { return kParts * block + g * kParts + j; }
  MURPHY_HD static int state(int block, int s) { return kParts * block + 32 * kParts + s; }

  // What stage `st` is: its kind, and for searches which one (0 top-k, 1 top-p, 2 the draw) and
  // the step within it.
  MURPHY_HD void stage_of(int st, Stage& kind, int& search, int& it) const {
    const int S = search_len();
    search = -1, it = 0;
    if (st == 0) kind = kArgmax;
    else if (st == 1 || st == 2 + S || st == 3 + 2 * S) kind = kAgg;
    else {
      kind = kSearch;
      search = st < 2 + S ? 0 : st < 3 + 2 * S ? 1 : 2;
      it = st - (search == 0 ? 2 : search == 1 ? 3 + S : 4 + 2 * S);
    }
  }

  MURPHY_HD static bool in_cut(uint32_t key, int64_t i, double K, double t) {
    return double(key) > K || (double(key) == K && double(i) <= t);
  }

  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int B = t.block_dim;
    const int64_t r = t.block;
    const T* z = logits + r * V;
    auto S = [&](int s) { return sh_get(sh, state(B, s)); };
    if (phase == 3 * stages()) {  // outputs
      if (t.thread == 0) {
        token[r] = int32_t(S(TOKEN));
        logp[r] = float(S(LOGP));
      }
      return;
    }
    const int st = phase / 3, sub = phase % 3;
    if (sub == 2 && t.thread != 0) return;  // thread 0 decides, writing the state: nobody else reads it now
    Stage kind;
    int search, it;
    stage_of(st, kind, search, it);
    if (st > 0 && S(DONE) != 0.0) return;
    if (kind == kSearch && S(ACT) == 0.0) return;

    if (kind == kArgmax) {
      if (sub == 0) {
        float best = -INFINITY;
        int64_t id = V;
        for (int64_t i = t.thread; i < V; i += B) {
          const float v = ld(z, i);
          if (v > best) best = v, id = i;
        }
        sh_put(sh, part(t.thread, 0), double(best));
        sh_put(sh, part(t.thread, 1), double(id));
      } else if (sub == 1) {
        if (t.thread % 32 != 0) return;
        double best = -INFINITY, id = double(V);
        const int end = t.thread + 32 < B ? t.thread + 32 : B;
        for (int k = t.thread; k < end; ++k) {
          const double v = sh_get(sh, part(k, 0)), j = sh_get(sh, part(k, 1));
          if (v > best || (v == best && j < id)) best = v, id = j;
        }
        sh_put(sh, group(B, t.thread / 32, 0), best);
        sh_put(sh, group(B, t.thread / 32, 1), id);
      } else if (t.thread == 0) {
        double best = -INFINITY, id = double(V);
        for (int g = 0; g < (B + 31) / 32; ++g) {
          const double v = sh_get(sh, group(B, g, 0)), j = sh_get(sh, group(B, g, 1));
          if (v > best || (v == best && j < id)) best = v, id = j;
        }
        decide_start(best, id, r, sh, B);
      }
      return;
    }

    // kAgg: the count and mass of the kept elements. A search step: the count or the mass of
    // the kept elements that each of its kParts thresholds admits.
    const double m = S(M), T_ = S(TEMP), lmin = S(LMIN);
    const bool minp = S(MINP_ON) != 0.0;
    const bool c1 = S(C1ON) != 0.0, c2 = S(C2ON) != 0.0;
    const double c1k = S(C1K), c1t = S(C1T), c2k = S(C2K), c2t = S(C2T);
    const bool key_step = kind == kSearch && it < kKeySearchSteps && S(IDORDER) == 0.0;
    const double lo = S(LO), hi = S(HI), kstar = S(KSTAR);
    // A converged search (id searches shorter than the step count; an id-order draw, which
    // has no key steps) reads nothing; thread 0 still ends it at its last step.
    const bool converged = kind == kSearch && hi - lo <= 1.0;
    if (converged && sub < 2) return;
    const int n = kind == kSearch ? kParts : 2;  // values per thread and group
    if (sub == 0) {
      const bool idorder = S(IDORDER) != 0.0;
      double acc[kParts];
      for (int j = 0; j < kParts; ++j) acc[j] = 0.0;
      // the kept set: min-p, then the top-k cut, then the top-p cut, each where it is on
      auto kept = [&](float v, uint32_t key, int64_t i) {
        return (!minp || (double(v) - m) / T_ >= lmin) && (!c1 || in_cut(key, i, c1k, c1t)) && (!c2 || in_cut(key, i, c2k, c2t));
      };
      if (kind == kAgg) {
        for (int64_t i = t.thread; i < V; i += B) {
          const float v = ld(z, i);
          if (!kept(v, logit_key(v), i)) continue;
          acc[0] += 1.0;
          acc[1] += exp((double(v) - m) / T_);
        }
      } else {
        const bool mass = S(MASS) != 0.0;
        double th[kParts];
        for (int j = 0; j < kParts; ++j) th[j] = search_threshold(lo, hi, j + 1);
        // keys: admitted by t when key >= t (the lowest threshold admits most); ids: when
        // id <= t, or key > K* or (key == K* and id <= t) (the highest admits most)
        auto admits = [&](uint32_t key, int64_t i, double tj) {
          if (key_step) return double(key) >= tj;
          return idorder ? double(i) <= tj : in_cut(key, i, kstar, tj);
        };
        const double widest = key_step ? th[0] : th[kParts - 1];
        for (int64_t i = t.thread; i < V; i += B) {
          const float v = ld(z, i);
          const uint32_t key = logit_key(v);
          if (!kept(v, key, i) || !admits(key, i, widest)) continue;
          const double x = mass ? exp((double(v) - m) / T_) : 1.0;
          for (int j = 0; j < kParts; ++j)
            if (admits(key, i, th[j])) acc[j] += x;
        }
      }
      for (int j = 0; j < n; ++j) sh_put(sh, part(t.thread, j), acc[j]);
    } else if (sub == 1) {
      if (t.thread % 32 != 0) return;
      const int end = t.thread + 32 < B ? t.thread + 32 : B;
      for (int j = 0; j < n; ++j) {
        double a = 0.0;
        for (int k = t.thread; k < end; ++k) a += sh_get(sh, part(k, j));
        sh_put(sh, group(B, t.thread / 32, j), a);
      }
    } else if (t.thread == 0) {
      double tot[kParts];
      for (int j = 0; j < n; ++j) {
        double a = 0.0;
        for (int g = 0; g < (B + 31) / 32; ++g) a += sh_get(sh, group(B, g, j));
        tot[j] = a;
      }
      if (kind == kAgg) decide_agg(st == 1 ? 0 : st == 2 + search_len() ? 1 : 2, tot[0], tot[1], r, sh, B);
      else decide_step(search, it, key_step, converged, tot, z, sh, B);
    }
  }

  // After the argmax: the row's mode.
  MURPHY_HD void decide_start(double best, double id, int64_t r, float* sh, int B) const {
    auto put = [&](int s, double v) { sh_put(sh, state(B, s), v); };
    for (int s = 0; s < kSlots; ++s) put(s, 0.0);
    put(M, best), put(AM, id);
    const float temp = temperature[r];
    if (!(best > -INFINITY) || best != best) {  // -inf or NaN: no distribution
      put(TOKEN, -1.0), put(LOGP, NAN), put(DONE, 1.0);
      return;
    }
    if (temp > 0.0f && top_k[r] == 1) {  // one token kept
      put(TOKEN, id), put(LOGP, 0.0), put(DONE, 1.0);
      return;
    }
    const bool greedy = !(temp > 0.0f);
    put(TEMP, greedy ? 1.0 : double(temp));
    if (!greedy && min_p[r] > 0.0f) put(MINP_ON, 1.0), put(LMIN, log(double(min_p[r])));
    const bool topk = top_k[r] > 0 && int64_t(top_k[r]) < V;
    put(FILTER, !greedy && (topk || top_p[r] < 1.0f || min_p[r] > 0.0f) ? 1.0 : 0.0);
  }

  // After the count c and mass w of the kept set (which = 0: min-p applied; 1: and top-k; 2: and top-p).
  MURPHY_HD void decide_agg(int which, double c, double w, int64_t r, float* sh, int B) const {
    auto S = [&](int s) { return sh_get(sh, state(B, s)); };
    auto put = [&](int s, double v) { sh_put(sh, state(B, s), v); };
    const bool greedy = !(temperature[r] > 0.0f);
    put(ACT, 0.0);
    if (which == 0) {
      if (greedy) {
        put(TOKEN, S(AM)), put(LOGP, -log(w)), put(DONE, 1.0);
        return;
      }
      const int64_t k = top_k[r];
      if (k > 0 && k < V && c > double(k)) start_search(false, double(k), false, sh, B);
    } else if (which == 1) {
      if (top_p[r] < 1.0f) start_search(true, double(top_p[r]) * w, false, sh, B);
    } else {
      put(SUM, w);  // S, for the log-prob
      start_search(true, sample_uniform(stream[r], step[r]) * w, S(FILTER) == 0.0, sh, B);
    }
  }

  MURPHY_HD void start_search(bool mass, double target, bool idorder, float* sh, int B) const {
    auto put = [&](int s, double v) { sh_put(sh, state(B, s), v); };
    put(ACT, 1.0), put(MASS, mass ? 1.0 : 0.0), put(TARGET, target), put(IDORDER, idorder ? 1.0 : 0.0);
    if (idorder) put(LO, -1.0), put(HI, double(V - 1));
    else put(LO, 0.0), put(HI, 4294967296.0);  // keys: G(lo) >= target > G(hi)
  }

  // One search step: tot[j] is the count or mass admitted at threshold j + 1 of [LO, HI).
  // Keys: G(t) (key >= t) falls as t rises, and the search keeps G(LO) >= target > G(HI); ids:
  // H(t) rises with t, and it keeps H(LO) < target <= H(HI). The new interval is the part
  // between the last threshold on LO's side and the first on HI's.
  MURPHY_HD void decide_step(int search, int it, bool key_step, bool converged, const double* tot, const T* z,
                             float* sh, int B) const {
    auto S = [&](int s) { return sh_get(sh, state(B, s)); };
    auto put = [&](int s, double v) { sh_put(sh, state(B, s), v); };
    if (!converged) {
      const double lo = S(LO), hi = S(HI), target = S(TARGET);
      double nlo = lo, nhi = hi;
      for (int j = 0; j < kParts; ++j) {
        const double tj = search_threshold(lo, hi, j + 1);
        if (key_step == (tot[j] >= target)) {
          nlo = tj;
        } else {
          nhi = tj;
          break;
        }
      }
      put(LO, nlo), put(HI, nhi);
    }
    if (key_step && it == kKeySearchSteps - 1) {  // the key K of the cut: now the id among the elements with key K
      put(KSTAR, S(LO)), put(LO, -1.0), put(HI, double(V - 1));
    }
    if (it != search_len() - 1) return;
    const double K = S(KSTAR), tcut = S(HI);
    if (search == 0) put(C1ON, 1.0), put(C1K, K), put(C1T, tcut);
    else if (search == 1) put(C2ON, 1.0), put(C2K, K), put(C2T, tcut);
    else {
      const double Ssum = S(SUM), m = S(M), Tm = S(TEMP);
      const int64_t tok = int64_t(tcut);
      const double x = (double(ld(z, tok)) - m) / Tm;
      put(TOKEN, double(tok));
      put(LOGP, S(IDORDER) != 0.0 ? x - log(Ssum) : log(exp(x) / Ssum));
      put(DONE, 1.0);
    }
    put(ACT, 0.0);
  }
};

}  // namespace gpu
}  // namespace murphy
