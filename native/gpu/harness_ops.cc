// See harness_ops.h. For each op: check the inputs, convert them to the storage type, run
// the kernel through run_on_host, and run the native/model CPU op on the same (rounded)
// values. bf16 storage: inputs are rounded to bf16 once, so both sides see the same numbers;
// the kernel's outputs are bf16 (returned widened), the CPU op's are f32.
#include "harness_ops.h"

#include "gemm_plan.h"
#include "harness_decode.h"
#include "harness_io.h"
#include "kernels/model_kernels.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace gpu {

namespace {

template <typename T>
HarnessOut run_typed(const HarnessCase& c) {
  HarnessOut o;
  const int B = c.block;
  if (c.op == "rmsnorm_forward" || c.op == "rmsnorm_backward") {
    need_positive(c, {{"rows", c.rows}, {"n", c.n}});
    const auto x = to_storage<T>(input(c, "x", c.rows * c.n));
    const auto w = to_storage<T>(input(c, "w", c.n));
    const auto xf = widen(x), wf = widen(w);
    if (c.op == "rmsnorm_forward") {
      std::vector<T> y(size_t(c.rows * c.n));
      std::vector<float> rstd(size_t(c.rows));
      const RmsNormForward<T> k{x.data(), w.data(), y.data(), rstd.data(), c.rows, c.n, c.eps};
      run_on_host(k, k.grid(), B, c.order);
      o.kernel["y"] = widen(y);
      o.kernel["rstd"] = rstd;
      std::vector<float> ry(y.size()), rr(rstd.size());
      model::rmsnorm_forward_cpu(xf.data(), wf.data(), ry.data(), rr.data(), c.rows, c.n, c.eps);
      o.reference["y"] = ry;
      o.reference["rstd"] = rr;
    } else {
      const auto dy = to_storage<T>(input(c, "dy", c.rows * c.n));
      const auto dyf = widen(dy);
      const std::vector<float>& rstd = input(c, "rstd", c.rows);
      std::vector<T> dx(size_t(c.rows * c.n));
      std::vector<float> dw(size_t(c.n), 0.0f);
      const RmsNormBackwardInput<T> ki{dy.data(), x.data(), w.data(), rstd.data(), dx.data(), c.rows, c.n};
      run_on_host(ki, ki.grid(), B, c.order);
      const RmsNormBackwardWeight<T> kw{dy.data(), x.data(), rstd.data(), dw.data(), c.rows, c.n, B};
      run_on_host(kw, kw.grid(), B, c.order);
      o.kernel["dx"] = widen(dx);
      o.kernel["dw"] = dw;
      std::vector<float> rdx(dx.size()), rdw(dw.size(), 0.0f);
      model::rmsnorm_backward_cpu(dyf.data(), xf.data(), wf.data(), rstd.data(), rdx.data(), rdw.data(), c.rows, c.n, false);
      o.reference["dx"] = rdx;
      o.reference["dw"] = rdw;
    }
  } else if (c.op == "residual_rmsnorm_forward" || c.op == "rmsnorm_residual_forward") {
    // residual_rmsnorm: h = x + d, y = norm(h) w;  rmsnorm_residual: h = x + norm(a) w.
    need_positive(c, {{"rows", c.rows}, {"n", c.n}});
    const bool pre = c.op == "residual_rmsnorm_forward";
    const auto x = to_storage<T>(input(c, "x", c.rows * c.n));
    const auto b = to_storage<T>(input(c, pre ? "d" : "a", c.rows * c.n));
    const auto w = to_storage<T>(input(c, "w", c.n));
    const auto xf = widen(x), bf = widen(b), wf = widen(w);
    std::vector<T> h(size_t(c.rows * c.n)), y(pre ? h.size() : 0);
    std::vector<float> rstd(size_t(c.rows));
    if (pre) {
      const ResidualRmsNormForward<T> k{x.data(), b.data(), w.data(), h.data(), y.data(), rstd.data(), c.rows, c.n, c.eps};
      run_on_host(k, k.grid(), B, c.order);
    } else {
      const RmsNormResidualForward<T> k{b.data(), w.data(), x.data(), h.data(), rstd.data(), c.rows, c.n, c.eps};
      run_on_host(k, k.grid(), B, c.order);
    }
    o.kernel["h"] = widen(h);
    o.kernel["rstd"] = rstd;
    if (pre) o.kernel["y"] = widen(y);
    // Reference: the unfused CPU ops; the add's result is stored in T, as an unfused pipeline would.
    std::vector<float> rh(h.size()), rr(rstd.size());
    if (pre) {
      rh = xf;
      model::add_inplace(rh.data(), bf.data(), int64_t(rh.size()));
      rh = widen(to_storage<T>(rh));
      std::vector<float> ry(rh.size());
      model::rmsnorm_forward_cpu(rh.data(), wf.data(), ry.data(), rr.data(), c.rows, c.n, c.eps);
      o.reference["y"] = ry;
    } else {
      model::rmsnorm_forward_cpu(bf.data(), wf.data(), rh.data(), rr.data(), c.rows, c.n, c.eps);
      model::add_inplace(rh.data(), xf.data(), int64_t(rh.size()));
    }
    o.reference["h"] = rh;
    o.reference["rstd"] = rr;
  } else if (c.op == "lt_linear_forward" || c.op == "lt_linear_backward_input" || c.op == "lt_linear_backward_weight") {
    // The cuBLASLt layout plan executed by a column-major reference GEMM vs native/model's
    // linear ops (f32 only: this checks the layout, not rounding). Sizes: rows = M, n = N, dim = K.
    const int64_t M = c.rows, N = c.n, K = c.dim;
    need_positive(c, {{"rows", M}, {"n", N}, {"dim", K}});
    const bool acc = c.accumulate;
    const std::vector<float>* first;
    const std::vector<float>* second;
    std::vector<float> out, ref;
    LinearProduct which;
    if (c.op == "lt_linear_forward") {
      which = LinearProduct::Forward;
      first = &input(c, "x", M * K), second = &input(c, "w", N * K);
      out = input(c, "y", M * N);
    } else if (c.op == "lt_linear_backward_input") {
      which = LinearProduct::BackwardInput;
      first = &input(c, "dy", M * N), second = &input(c, "w", N * K);
      out = input(c, "dx", M * K);
    } else {
      which = LinearProduct::BackwardWeight;
      first = &input(c, "dy", M * N), second = &input(c, "x", M * K);
      out = input(c, "dw", N * K);
    }
    ref = out;
    const LtGemmPlan p = linear_plan(which, M, N, K, acc);
    const std::vector<float>& a = p.a_is == 0 ? *first : *second;
    const std::vector<float>& b = p.b_is == 0 ? *first : *second;
    if (c.run_plan) colmajor_gemm_ref(p, a.data(), int64_t(a.size()), b.data(), int64_t(b.size()), out.data(), int64_t(out.size()));
    if (which == LinearProduct::Forward) model::linear_forward(first->data(), second->data(), ref.data(), M, N, K, acc);
    else if (which == LinearProduct::BackwardInput) model::linear_backward_input(first->data(), second->data(), ref.data(), M, N, K, acc);
    else model::linear_backward_weight(first->data(), second->data(), ref.data(), M, N, K);
    if (c.run_plan) o.kernel["out"] = out;
    o.reference["out"] = ref;
  } else if (c.op == "rope_forward" || c.op == "rope_backward") {
    need_positive(c, {{"tokens", c.tokens}, {"heads", c.heads}, {"headDim", c.head_dim}, {"maxPos", c.max_pos}});
    if (c.head_dim % 2 != 0) throw Error("kernelHarness(" + c.op + "): headDim must be even");
    if (int64_t(c.ints.size()) != c.tokens) throw Error("kernelHarness(" + c.op + "): need one position per token");
    for (int32_t p : c.ints)
      if (p < 0 || p >= c.max_pos) throw Error("kernelHarness(" + c.op + "): position " + std::to_string(p) + " outside [0, maxPos)");
    const bool inverse = c.op == "rope_backward";
    auto x = to_storage<T>(input(c, "x", c.tokens * c.heads * c.head_dim));
    std::vector<float> ref = widen(x);
    const int64_t h = c.head_dim / 2;
    std::vector<float> cos_t(size_t(c.max_pos * h)), sin_t(size_t(c.max_pos * h));
    model::rope_table_init(cos_t.data(), sin_t.data(), c.max_pos, c.head_dim, c.theta);
    const Rope<T> k{x.data(), c.ints.data(), cos_t.data(), sin_t.data(), c.tokens, c.heads, c.head_dim, inverse, B};
    run_on_host(k, k.grid(), B, c.order);
    o.kernel["x"] = widen(x);
    model::RopeTable tab{c.head_dim, c.max_pos, cos_t.data(), sin_t.data()};
    model::rope_cpu(ref.data(), c.ints.data(), c.tokens, c.heads, tab, inverse);
    o.reference["x"] = ref;
  } else if (c.op == "swiglu_forward" || c.op == "swiglu_backward") {
    need_positive(c, {{"n", c.n}});
    const auto g = to_storage<T>(input(c, "g", c.n)), u = to_storage<T>(input(c, "u", c.n));
    const auto gf = widen(g), uf = widen(u);
    if (c.op == "swiglu_forward") {
      std::vector<T> a(size_t(c.n));
      const SwigluForward<T> k{g.data(), u.data(), a.data(), c.n, B};
      run_on_host(k, k.grid(), B, c.order);
      o.kernel["act"] = widen(a);
      std::vector<float> ra(a.size());
      model::swiglu_forward_cpu(gf.data(), uf.data(), ra.data(), c.n);
      o.reference["act"] = ra;
    } else {
      const auto da = to_storage<T>(input(c, "da", c.n));
      const auto daf = widen(da);
      std::vector<T> dg(size_t(c.n)), du(size_t(c.n));
      const SwigluBackward<T> k{da.data(), g.data(), u.data(), dg.data(), du.data(), c.n, B};
      run_on_host(k, k.grid(), B, c.order);
      o.kernel["dg"] = widen(dg);
      o.kernel["du"] = widen(du);
      std::vector<float> rdg(dg.size()), rdu(du.size());
      model::swiglu_backward_cpu(daf.data(), gf.data(), uf.data(), rdg.data(), rdu.data(), c.n);
      o.reference["dg"] = rdg;
      o.reference["du"] = rdu;
    }
  } else if (c.op == "embedding_forward" || c.op == "embedding_backward") {
    need_positive(c, {{"tokens", c.tokens}, {"vocab", c.vocab}, {"dim", c.dim}});
    if (int64_t(c.ints.size()) != c.tokens) throw Error("kernelHarness(" + c.op + "): need one id per token");
    for (int32_t id : c.ints)
      if (id < 0 || id >= c.vocab) throw Error("kernelHarness(" + c.op + "): token id " + std::to_string(id) + " outside [0, vocab)");
    if (c.op == "embedding_forward") {
      const auto table = to_storage<T>(input(c, "table", c.vocab * c.dim));
      const auto tf = widen(table);
      std::vector<T> y(size_t(c.tokens * c.dim));
      const EmbeddingGather<T> k{table.data(), c.ints.data(), y.data(), c.tokens, c.dim, B};
      run_on_host(k, k.grid(), B, c.order);
      o.kernel["y"] = widen(y);
      std::vector<float> ry(y.size());
      model::embedding_forward_cpu(tf.data(), c.ints.data(), ry.data(), c.tokens, c.dim);
      o.reference["y"] = ry;
    } else {
      const auto dy = to_storage<T>(input(c, "dy", c.tokens * c.dim));
      const auto dyf = widen(dy);
      std::vector<float> dt(size_t(c.vocab * c.dim), 0.0f), rdt(dt.size(), 0.0f);
      const EmbeddingScatter<T> k{dy.data(), c.ints.data(), dt.data(), c.tokens, c.dim, B};
      run_on_host(k, k.grid(), B, c.order);
      o.kernel["dtable"] = dt;
      model::embedding_backward_cpu(dyf.data(), c.ints.data(), rdt.data(), c.tokens, c.dim);
      o.reference["dtable"] = rdt;
    }
  } else {
    throw Error("kernelHarness: unknown op '" + c.op + "'");
  }
  return o;
}

}  // namespace

HarnessOut run_harness_case(const HarnessCase& c) {
  if (is_decode_op(c.op)) return run_decode_case(c);
  return c.bf16 ? run_typed<uint16_t>(c) : run_typed<float>(c);
}

}  // namespace gpu
}  // namespace murphy
