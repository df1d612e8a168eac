// See harness_decode.h. Each case is checked, run through run_on_host, and run through its
// spec on the same (rounded) inputs: a plain copy loop for the KV append, native/model's
// attention against a KV cache (contexts gathered from the pool) for paged attention with the
// log-sum-exp from an fp64 loop, and the CPU sampler (model::sample_logits_cpu) for sampling.
#include "harness_decode.h"

#include <cmath>
#include <set>

#include "harness_io.h"
#include "kernels/paged_attention.h"
#include "kernels/sampling.h"
#include "murphy/model/model.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace gpu {

namespace {

[[noreturn]] void bad(const HarnessCase& c, const std::string& what) { throw Error("kernelHarness(" + c.op + "): " + what); }

int64_t param(const HarnessCase& c, const char* name, int64_t lo, int64_t hi) {
  auto it = c.params.find(name);
  if (it == c.params.end()) bad(c, std::string("missing param '") + name + "'");
  const double v = it->second;
  if (!(v == std::floor(v)) || v < double(lo) || v > double(hi))
    bad(c, std::string("param '") + name + "' = " + std::to_string(v) + " must be an integer in [" + std::to_string(lo) +
               ", " + std::to_string(hi) + "]");
  return int64_t(v);
}

const std::vector<int32_t>& ints(const HarnessCase& c, const char* name, int64_t expect) {
  auto it = c.int_in.find(name);
  if (it == c.int_in.end()) bad(c, std::string("missing int input '") + name + "'");
  if (int64_t(it->second.size()) != expect)
    bad(c, std::string("int input '") + name + "' has " + std::to_string(it->second.size()) + " values, expected " +
               std::to_string(expect));
  return it->second;
}

constexpr int64_t kBig = int64_t(1) << 40;

// A deliberately broken variant for the tests to catch (param fault, 0 = none).
int fault(const HarnessCase& c) {
  auto it = c.params.find("fault");
  return it == c.params.end() ? 0 : int(it->second);
}

template <typename T>
HarnessOut run_typed(const HarnessCase& c) {
  HarnessOut o;
  const int B = c.block;
  if (c.op == "kv_append") {
    const KvAppendCase a = kv_append_case(c);
    const int64_t row = a.G * a.D;
    const auto k = to_storage<T>(input(c, "k", a.n_new * row)), v = to_storage<T>(input(c, "v", a.n_new * row));
    auto kp = to_storage<T>(input(c, "kPool", a.slots * row)), vp = to_storage<T>(input(c, "vPool", a.slots * row));
    std::vector<float> rk = widen(kp), rv = widen(vp);
    const KvAppend<T> kern{k.data(), v.data(), a.slot.data(), kp.data(), vp.data(), a.n_new, row, B};
    run_on_host(kern, kern.grid(), B, c.order);
    o.kernel["kPool"] = widen(kp);
    o.kernel["vPool"] = widen(vp);
    const auto kf = widen(k), vf = widen(v);
    for (int64_t t = 0; t < a.n_new; ++t)
      if (a.slot[size_t(t)] >= 0)
        for (int64_t e = 0; e < row; ++e) {
          rk[size_t(a.slot[size_t(t)] * row + e)] = kf[size_t(t * row + e)];
          rv[size_t(a.slot[size_t(t)] * row + e)] = vf[size_t(t * row + e)];
        }
    o.reference["kPool"] = rk;
    o.reference["vPool"] = rv;
  } else if (c.op == "paged_attention") {
    const PagedAttentionCase a = paged_attention_case(c);
    const int64_t pool = a.n_blocks * a.block_size * a.G * a.D;
    const auto q = to_storage<T>(input(c, "q", a.n_new * a.H * a.D));
    const auto kp = to_storage<T>(input(c, "kPool", pool)), vp = to_storage<T>(input(c, "vPool", pool));
    std::vector<float> op(size_t(a.n_new * a.H * a.n_parts * a.D)), mp(size_t(a.n_new * a.H * a.n_parts)), lp(mp.size());
    std::vector<T> out(size_t(a.n_new * a.H * a.D));
    std::vector<float> lse(size_t(a.n_new * a.H));
    const PagedAttentionPartial<T> kp1{q.data(), kp.data(), vp.data(), a.table.data(), a.seq.data(), a.pos.data(),
                                       op.data(), mp.data(), lp.data(), a.n_new, a.H, a.G, a.D, a.block_size,
                                       a.max_blocks, a.partition, a.n_parts, a.scale};
    run_on_host(kp1, kp1.grid(), B, c.order);
    // fault 1 (tests only): a reduce that believes partitions are twice as long, so it merges
    // only the first half of them
    const PagedAttentionReduce<T> kp2{op.data(), mp.data(), lp.data(), a.pos.data(), out.data(), lse.data(),
                                      a.n_new, a.H, a.D, fault(c) == 1 ? 2 * a.partition : a.partition, a.n_parts};
    run_on_host(kp2, kp2.grid(), B, c.order);
    o.kernel["out"] = widen(out);
    o.kernel["lse"] = lse;
    // Spec: each token's context gathered from the pool into one segment, native/model's
    // attention against a KV cache; lse in fp64.
    const auto qf = widen(q), kf = widen(kp), vf = widen(vp);
    const int64_t row = a.G * a.D;
    std::vector<std::vector<float>> kc(size_t(a.n_new)), vc(size_t(a.n_new));
    std::vector<const float*> k0(size_t(a.n_new)), v0(size_t(a.n_new));
    std::vector<int64_t> len0(size_t(a.n_new));
    std::vector<float> rlse(lse.size());
    for (int64_t t = 0; t < a.n_new; ++t) {
      const int64_t n = a.pos[size_t(t)] + 1;
      const int32_t* table = a.table.data() + int64_t(a.seq[size_t(t)]) * a.max_blocks;
      kc[size_t(t)].resize(size_t(n * row));
      vc[size_t(t)].resize(size_t(n * row));
      for (int64_t j = 0; j < n; ++j) {
        const int64_t s = int64_t(table[j / a.block_size]) * a.block_size + j % a.block_size;
        std::copy(kf.begin() + s * row, kf.begin() + (s + 1) * row, kc[size_t(t)].begin() + j * row);
        std::copy(vf.begin() + s * row, vf.begin() + (s + 1) * row, vc[size_t(t)].begin() + j * row);
      }
      k0[size_t(t)] = kc[size_t(t)].data(), v0[size_t(t)] = vc[size_t(t)].data(), len0[size_t(t)] = n;
      for (int64_t h = 0; h < a.H; ++h) {
        const int64_t g = h / (a.H / a.G);
        std::vector<double> sc(static_cast<size_t>(n));
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t d = 0; d < a.D; ++d)
            s += double(qf[size_t((t * a.H + h) * a.D + d)]) * kc[size_t(t)][size_t((j * a.G + g) * a.D + d)];
          sc[size_t(j)] = s * a.scale;
          mx = std::max(mx, sc[size_t(j)]);
        }
        double sum = 0;
        for (double s : sc) sum += std::exp(s - mx);
        rlse[size_t(t * a.H + h)] = float(mx + std::log(sum));
      }
    }
    std::vector<float> rout(out.size());
    model::AttnCacheArgs args;
    args.B = a.n_new, args.n_heads = a.H, args.n_kv = a.G, args.head_dim = a.D, args.scale = a.scale;
    args.q = qf.data(), args.k0 = k0.data(), args.v0 = v0.data(), args.len0 = len0.data(), args.out = rout.data();
    model::attention_cached_cpu(args);
    o.reference["out"] = rout;
    o.reference["lse"] = rlse;
  } else if (c.op == "sample") {
    const SampleCase a = sample_case(c);
    const auto z = to_storage<T>(input(c, "logits", a.rows * a.V));
    std::vector<int32_t> tok(size_t(a.rows));
    std::vector<float> lp(size_t(a.rows));
    const SampleRows<T> k{z.data(), a.temperature.data(), a.top_p.data(), a.min_p.data(), a.top_k.data(), a.stream.data(),
                          a.step.data(), tok.data(), lp.data(), a.rows, a.V,
                          id_search_steps(a.V) - (fault(c) == 1 ? 1 : 0)};  // fault 1: one id step too few
    run_on_host(k, k.grid(), B, c.order);
    o.kernel["token"] = std::vector<float>(tok.begin(), tok.end());
    o.kernel["logp"] = lp;
    const auto zf = widen(z);
    std::vector<float> rt(size_t(a.rows)), rl(size_t(a.rows));
    for (int64_t r = 0; r < a.rows; ++r) {
      model::SampleOptions so;
      so.temperature = a.temperature[size_t(r)], so.top_p = a.top_p[size_t(r)], so.top_k = a.top_k[size_t(r)];
      so.min_p = a.min_p[size_t(r)];
      const model::SampledToken s =
          model::sample_logits_cpu(zf.data() + r * a.V, a.V, so, sample_uniform(a.stream[size_t(r)], a.step[size_t(r)]));
      rt[size_t(r)] = float(s.token), rl[size_t(r)] = s.logp;
    }
    o.reference["token"] = rt;
    o.reference["logp"] = rl;
  } else {
    bad(c, "not a decode op");
  }
  return o;
}

}  // namespace

bool is_decode_op(const std::string& op) { return op == "kv_append" || op == "paged_attention" || op == "sample"; }

KvAppendCase kv_append_case(const HarnessCase& c) {
  KvAppendCase a;
  a.G = param(c, "kvHeads", 1, 1024), a.D = param(c, "headDim", 1, 4096);
  a.slots = param(c, "nBlocks", 1, kBig) * param(c, "blockSize", 1, 65536);
  auto it = c.int_in.find("slots");
  if (it == c.int_in.end()) bad(c, "missing int input 'slots'");
  a.n_new = int64_t(it->second.size());
  std::set<int64_t> seen;
  for (int32_t s : it->second) {
    if (s >= a.slots) bad(c, "slot " + std::to_string(s) + " outside the pool's " + std::to_string(a.slots) + " slots");
    if (s >= 0 && !seen.insert(s).second) bad(c, "slot " + std::to_string(s) + " appears twice (two writers of one slot)");
    a.slot.push_back(s);
  }
  return a;
}

PagedAttentionCase paged_attention_case(const HarnessCase& c) {
  PagedAttentionCase a;
  a.H = param(c, "heads", 1, 1024), a.G = param(c, "kvHeads", 1, 1024), a.D = param(c, "headDim", 1, kMaxHeadDim);
  if (a.H % a.G != 0) bad(c, "heads (" + std::to_string(a.H) + ") must be a multiple of kvHeads (" + std::to_string(a.G) + ")");
  a.block_size = param(c, "blockSize", 1, 65536), a.n_blocks = param(c, "nBlocks", 1, kBig);
  a.max_blocks = param(c, "maxBlocks", 1, kBig), a.partition = param(c, "partition", 1, kMaxPartition);
  auto sc = c.params.find("scale");
  a.scale = sc == c.params.end() ? float(1.0 / std::sqrt(double(a.D))) : float(sc->second);
  auto it = c.int_in.find("contextLens");
  if (it == c.int_in.end()) bad(c, "missing int input 'contextLens'");
  const std::vector<int32_t>& ctx = it->second;
  a.n_seqs = int64_t(ctx.size());
  const std::vector<int32_t>& ql = ints(c, "queryLens", a.n_seqs);
  a.table = ints(c, "blockTable", a.n_seqs * a.max_blocks);
  for (int64_t s = 0; s < a.n_seqs; ++s) {
    const int64_t n = ctx[size_t(s)], m = ql[size_t(s)];
    if (n < 1 || n > a.max_blocks * a.block_size)
      bad(c, "contextLens[" + std::to_string(s) + "] = " + std::to_string(n) + " must be in [1, maxBlocks x blockSize]");
    if (m < 0 || m > n) bad(c, "queryLens[" + std::to_string(s) + "] = " + std::to_string(m) + " must be in [0, contextLens]");
    for (int64_t b = 0; b < (n + a.block_size - 1) / a.block_size; ++b) {
      const int32_t blk = a.table[size_t(s * a.max_blocks + b)];
      if (blk < 0 || blk >= a.n_blocks)
        bad(c, "blockTable[" + std::to_string(s) + "][" + std::to_string(b) + "] = " + std::to_string(blk) + " outside [0, nBlocks)");
    }
    for (int64_t j = n - m; j < n; ++j) {
      a.seq.push_back(int32_t(s)), a.pos.push_back(int32_t(j));
      a.n_parts = std::max(a.n_parts, j / a.partition + 1);
    }
  }
  a.n_new = int64_t(a.seq.size());
  if (a.n_new == 0) bad(c, "no query tokens (all queryLens are 0)");
  return a;
}

SampleCase sample_case(const HarnessCase& c) {
  SampleCase a;
  a.V = param(c, "vocab", 1, int64_t(1) << 30);
  auto it = c.in.find("logits");
  if (it == c.in.end()) bad(c, "missing input 'logits'");
  if (int64_t(it->second.size()) % a.V != 0) bad(c, "logits must hold rows x vocab values");
  a.rows = int64_t(it->second.size()) / a.V;
  a.temperature = input(c, "temperature", a.rows), a.top_p = input(c, "topP", a.rows), a.min_p = input(c, "minP", a.rows);
  a.top_k = ints(c, "topK", a.rows);
  const auto& seed = ints(c, "seed", a.rows);
  const auto& j = ints(c, "sampleIndex", a.rows);
  const auto& step = ints(c, "step", a.rows);
  for (int64_t r = 0; r < a.rows; ++r) {
    const size_t i = size_t(r);
    if (!(a.temperature[i] >= 0.0f) || !std::isfinite(a.temperature[i])) bad(c, "temperature must be >= 0");
    if (!(a.top_p[i] > 0.0f && a.top_p[i] <= 1.0f)) bad(c, "topP must be in (0, 1]");
    if (!(a.min_p[i] >= 0.0f && a.min_p[i] <= 1.0f)) bad(c, "minP must be in [0, 1]");
    if (a.top_k[i] < 0) bad(c, "topK must be >= 0");
    if (j[i] < 0 || step[i] < 0) bad(c, "sampleIndex and step must be >= 0");
    a.stream.push_back(sample_stream(uint64_t(uint32_t(seed[i])), uint64_t(j[i])));
    a.step.push_back(step[i]);
  }
  return a;
}

HarnessOut run_decode_case(const HarnessCase& c) { return c.bf16 ? run_typed<uint16_t>(c) : run_typed<float>(c); }

}  // namespace gpu
}  // namespace murphy
