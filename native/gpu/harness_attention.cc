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
#include "harness_attention.h"

#include "harness_io.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace gpu {

namespace {

AttnPlan plan_for(const HarnessCase& c) {
  need_positive(c, {{"tokens", c.tokens}, {"heads", c.heads}, {"kvHeads", c.kv_heads}, {"headDim", c.head_dim}});
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
HarnessOut run_typed(const HarnessCase& c, const AttnCaseInputs& in) {
  HarnessOut out;
  const AttnPlan& p = in.plan;
  const auto q = to_storage<T>(in.q), k = to_storage<T>(in.k), v = to_storage<T>(in.v);  // exact: already rounded
  if (c.op == "attention_forward") {
    std::vector<T> o(in.o.size());
    std::vector<float> lse(in.lse.size());
    attention_forward_host(p, q.data(), k.data(), v.data(), o.data(), lse.data(), c.order, c.block);
    out.kernel["o"] = widen(o);
    out.kernel["lse"] = lse;
    out.reference["o"] = in.o_ref;
    out.reference["lse"] = in.lse;
    return out;
  }
  const auto o = to_storage<T>(in.o), dout = to_storage<T>(in.dout);
  std::vector<T> dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<float> ws(p.workspace_floats());
  attention_backward_host(p, q.data(), k.data(), v.data(), o.data(), in.lse.data(), dout.data(), dq.data(), dk.data(),
                          dv.data(), ws.data(), c.order, c.block);
  out.kernel["dq"] = widen(dq);
  out.kernel["dk"] = widen(dk);
  out.kernel["dv"] = widen(dv);
  const std::vector<int64_t> offsets(p.seq_offsets.begin(), p.seq_offsets.end());
  model::AttnArgs a = cpu_args(p, offsets);
  std::vector<float> rdq(in.q.size()), rdk(in.k.size()), rdv(in.v.size());
  a.q = in.q.data(), a.k = in.k.data(), a.v = in.v.data();
  a.out = const_cast<float*>(in.o.data());  // read only by the backward
  a.lse = const_cast<float*>(in.lse.data());
  a.dout = in.dout.data(), a.dq = rdq.data(), a.dk = rdk.data(), a.dv = rdv.data();
  model::attention_backward_cpu(a);
  out.reference["dq"] = rdq;
  out.reference["dk"] = rdk;
  out.reference["dv"] = rdv;
  return out;
}

// Rounds to the storage type and back.
std::vector<float> rounded(const std::vector<float>& x, bool bf16) {
  return bf16 ? widen(to_storage<uint16_t>(x)) : x;
}

}  // namespace

AttnCaseInputs attention_case_inputs(const HarnessCase& c) {
  AttnCaseInputs in;
  in.plan = plan_for(c);
  const AttnShape& s = in.plan.shape;
  const int64_t qn = s.tokens * s.n_heads * s.head_dim, kn = s.tokens * s.n_kv * s.head_dim;
  in.q = rounded(input(c, "q", qn), c.bf16);
  in.k = rounded(input(c, "k", kn), c.bf16);
  in.v = rounded(input(c, "v", kn), c.bf16);
  if (c.op == "attention_backward") in.dout = rounded(input(c, "dout", qn), c.bf16);
  const std::vector<int64_t> offsets(in.plan.seq_offsets.begin(), in.plan.seq_offsets.end());
  model::AttnArgs a = cpu_args(in.plan, offsets);
  in.o_ref.resize(size_t(qn));
  in.lse.resize(size_t(s.tokens * s.n_heads));
  a.q = in.q.data(), a.k = in.k.data(), a.v = in.v.data(), a.out = in.o_ref.data(), a.lse = in.lse.data();
  model::attention_forward_cpu(a);
  in.o = rounded(in.o_ref, c.bf16);
  return in;
}

HarnessOut run_attention_case(const HarnessCase& c) {
  if (c.op == "attention_plan") {
    const AttnPlan p = plan_for(c);
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
  const AttnCaseInputs in = attention_case_inputs(c);
  return c.bf16 ? run_typed<uint16_t>(c, in) : run_typed<float>(c, in);
}

}  // namespace gpu
}  // namespace murphy
