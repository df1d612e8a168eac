// The attention cases of kernelHarness (harness_ops.h): the harness run of the attention
// kernels (attention.cc) next to their spec, attention_forward_cpu / attention_backward_cpu,
// on the same inputs (rounded to the storage type once, for both sides).
//   attention_forward:  inputs q [T,H,D], k, v [T,G,D]        -> o, lse
//   attention_backward: inputs q, k, v, dout; o and lse come from the CPU op's forward on the
//                       same inputs (o rounded to the storage type)  -> dq, dk, dv
//   attention_plan:     no inputs -> the plan's sizes (tile, chunk, nTiles, workspaceFloats,
//                       forwardShared, dqShared, dkdvShared; as 1-element arrays, in `kernel`)
// Sizes: tokens, heads, kvHeads, headDim, scale; `ints` are the seq_offsets [n_seqs + 1];
// `fault`: 'causal' or 'gqa' runs a deliberately broken kernel (tests of the tests).
#include "attention.h"
#include "harness_io.h"
#include "harness_ops.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace gpu {

namespace {

AttnPlan plan_for(const HarnessCase& c) {
  AttnShape s;
  s.tokens = c.tokens;
  s.n_heads = c.heads;
  s.n_kv = c.kv_heads;
  s.head_dim = c.head_dim;
  s.scale = c.scale;
  if (c.ints.empty()) throw Error("kernelHarness(" + c.op + "): need the sequence offsets in 'ints'");
  AttnPlan p = attention_plan(s, c.ints.data(), int64_t(c.ints.size()) - 1);
  if (c.fault == "causal") p.fault = AttnFault::Causal;
  else if (c.fault == "gqa") p.fault = AttnFault::Gqa;
  else if (!c.fault.empty()) throw Error("kernelHarness(" + c.op + "): fault must be 'causal' or 'gqa'");
  return p;
}

model::AttnArgs cpu_args(const AttnPlan& p, const std::vector<int64_t>& offsets) {
  model::AttnArgs a;
  a.T = p.shape.tokens;
  a.n_heads = p.shape.n_heads;
  a.n_kv = p.shape.n_kv;
  a.head_dim = p.shape.head_dim;
  a.seq_offsets = offsets.data();
  a.n_seqs = int64_t(offsets.size()) - 1;
  a.scale = p.shape.scale;
  return a;
}

template <typename T>
HarnessOut run_typed(const HarnessCase& c, const AttnPlan& p) {
  HarnessOut out;
  const AttnShape& s = p.shape;
  const int64_t qn = s.tokens * s.n_heads * s.head_dim, kn = s.tokens * s.n_kv * s.head_dim;
  const auto q = to_storage<T>(input(c, "q", qn)), k = to_storage<T>(input(c, "k", kn)), v = to_storage<T>(input(c, "v", kn));
  const auto qf = widen(q), kf = widen(k), vf = widen(v);
  const std::vector<int64_t> offsets(c.ints.begin(), c.ints.end());
  model::AttnArgs a = cpu_args(p, offsets);
  a.q = qf.data(), a.k = kf.data(), a.v = vf.data();
  std::vector<float> ro(static_cast<size_t>(qn)), rlse(size_t(s.tokens * s.n_heads));
  a.out = ro.data(), a.lse = rlse.data();
  model::attention_forward_cpu(a);
  if (c.op == "attention_forward") {
    std::vector<T> o(static_cast<size_t>(qn));
    std::vector<float> lse(rlse.size());
    attention_forward_host(p, q.data(), k.data(), v.data(), o.data(), lse.data(), c.order, c.block);
    out.kernel["o"] = widen(o);
    out.kernel["lse"] = lse;
    out.reference["o"] = ro;
    out.reference["lse"] = rlse;
    return out;
  }
  const auto o = to_storage<T>(ro);
  const auto of = widen(o);
  const auto dout = to_storage<T>(input(c, "dout", qn));
  const auto doutf = widen(dout);
  std::vector<T> dq(static_cast<size_t>(qn)), dk(static_cast<size_t>(kn)), dv(static_cast<size_t>(kn));
  std::vector<float> ws(p.workspace_floats());
  attention_backward_host(p, q.data(), k.data(), v.data(), o.data(), rlse.data(), dout.data(), dq.data(), dk.data(),
                          dv.data(), ws.data(), c.order, c.block);
  out.kernel["dq"] = widen(dq);
  out.kernel["dk"] = widen(dk);
  out.kernel["dv"] = widen(dv);
  std::vector<float> rdq(static_cast<size_t>(qn)), rdk(static_cast<size_t>(kn)), rdv(static_cast<size_t>(kn));
  a.out = const_cast<float*>(of.data());
  a.dout = doutf.data(), a.dq = rdq.data(), a.dk = rdk.data(), a.dv = rdv.data();
  model::attention_backward_cpu(a);
  out.reference["dq"] = rdq;
  out.reference["dk"] = rdk;
  out.reference["dv"] = rdv;
  return out;
}

}  // namespace

HarnessOut run_attention_case(const HarnessCase& c) {
  need_positive(c, {{"tokens", c.tokens}, {"heads", c.heads}, {"kvHeads", c.kv_heads}, {"headDim", c.head_dim}});
  const AttnPlan p = plan_for(c);
  if (c.op == "attention_plan") {
    HarnessOut out;
    auto one = [&](const char* name, double x) { out.kernel[name] = {float(x)}; };
    one("tile", p.tile);
    one("chunk", p.chunk);
    one("nTiles", double(p.n_tiles()));
    one("workspaceFloats", double(p.workspace_floats()));
    one("forwardShared", double(p.forward_shared_floats()));
    one("dqShared", double(p.dq_shared_floats()));
    one("dkdvShared", double(p.dkdv_shared_floats()));
    return out;
  }
  if (c.op != "attention_forward" && c.op != "attention_backward") throw Error("kernelHarness: unknown op '" + c.op + "'");
  return c.bf16 ? run_typed<uint16_t>(c, p) : run_typed<float>(c, p);
}

}  // namespace gpu
}  // namespace murphy
