// DeviceEngine<Backend, S>: the policy engine with its whole state where the backend keeps
// memory (the GPU for CudaBackend, host memory for HostBackend = "emulate"), written once
// over the backend so that all of its logic runs in npm test on the CPU.
//
// The numbers are model::Engine's (native/model/model.cc, the spec): the same forward, loss,
// backward and AdamW, op for op, with the harness kernels of kernels/model_kernels.h, the
// linear products of gemm_plan.h, the packed causal GQA attention, the chunked lm-head feeding
// the fused log-prob and GRPO/KL (or cross-entropy) loss (at most chunk_rows x vocab fp32
// logits at once), and the multi-tensor AdamW with global-norm clipping.
//
// State and dtypes (S = storage: uint16_t = bf16 in production, float as a precision mode):
//   master weights fp32 [P]        AdamW updates them (bf16 cannot hold lr * update next to w)
//   compute weights S [P]          what every kernel and GEMM reads; refreshed by AdamW's pass
//                                  (param_bf16) after each step. f32 storage: the master itself.
//   gradients fp32 [P]             accumulated over micro-batches (GEMMs write weight
//                                  gradients with beta = 1 straight into them)
//   moments fp32 [2P]              allocated on first use
//   KL reference S [P]             make_reference(): a copy of the compute weights
//   activations S (+ fp32 rstd / lse), and activation gradients S.
// Activation checkpointing: every layer's input is kept; with checkpointing on, backward
// recomputes layer l's forward into one activation slot just before its backward.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../model/model_internal.h"
#include "../../model/weights.h"
#include "../gemm_plan.h"
#include "../kernels/decode_shape.h"
#include "../kernels/model_kernels.h"
#include "engine_kernels.h"
#include "host_backend.h"
#include "murphy/sample_rng.h"
#include "policy_engine.h"
#include "zero_shard.h"

namespace murphy {
namespace gpu {

// Positions per partition of the paged attention (kernels/paged_attention.h: at most kMaxPartition)
constexpr int64_t kPagedPartition = kMaxPartition;

// A typed allocation of the backend's memory; grows (reallocates, contents lost) on ensure().
template <class B, class X>
class DBuf {
 public:
  DBuf() = default;
  DBuf(const DBuf&) = delete;
  DBuf& operator=(const DBuf&) = delete;
  DBuf(DBuf&& o) noexcept { swap(o); }
  DBuf& operator=(DBuf&& o) noexcept { swap(o); return *this; }
  ~DBuf() { release(); }
  void ensure(B* b, int64_t n, const char* what) {
    if (n <= cap_ && p_) { n_ = n; return; }
    release();
    b_ = b;
    p_ = static_cast<X*>(b->alloc(size_t(std::max<int64_t>(n, 1)) * sizeof(X), what));
    cap_ = std::max<int64_t>(n, 1), n_ = n;
  }
  void release() noexcept {
    if (p_) b_->free(p_);
    p_ = nullptr, cap_ = n_ = 0;
  }
  X* data() const { return p_; }
  int64_t size() const { return n_; }
  int64_t bytes() const { return cap_ * int64_t(sizeof(X)); }
  bool empty() const { return p_ == nullptr; }

 private:
  void swap(DBuf& o) noexcept { std::swap(b_, o.b_), std::swap(p_, o.p_), std::swap(cap_, o.cap_), std::swap(n_, o.n_); }
  B* b_ = nullptr;
  X* p_ = nullptr;
  int64_t cap_ = 0, n_ = 0;
};

template <class B, typename S>
class DeviceEngine final : public model::PolicyEngine {
  static_assert(std::is_same<S, float>::value || std::is_same<S, uint16_t>::value, "storage is f32 or bf16");
  static constexpr bool kF32 = std::is_same<S, float>::value;
  template <class X> using Buf = DBuf<B, X>;
  using Vec = std::vector<float>;

 public:
  // Takes the fp32 weights (layout of make_layout(c)) and uploads them.
  DeviceEngine(std::unique_ptr<B> backend, const model::ModelConfig& c, const float* w_host, bool checkpointing)
      : b_(std::move(backend)), cfg_(c), L_(model::make_layout(c)), ckpt_(checkpointing) {
    const int64_t P = L_.total;
    master_.ensure(b(), P, "the fp32 master weights");
    upload_chunked(master_.data(), w_host, P);
    if (!kF32) {
      wc_own_.ensure(b(), P, "the bf16 compute weights");
      refresh_compute(0, P);
    }
    grads_.ensure(b(), P, "the fp32 gradients");
    b_->zero(grads_.data(), size_t(P) * 4);
    const int64_t half = c.head_dim / 2;
    Vec cs(size_t(c.max_pos * half)), sn(size_t(c.max_pos * half));
    model::rope_table_init(cs.data(), sn.data(), c.max_pos, c.head_dim, c.rope_theta);
    cos_.ensure(b(), c.max_pos * half, "the rotary tables");
    sin_.ensure(b(), c.max_pos * half, "the rotary tables");
    b_->upload(cos_.data(), cs.data(), cs.size() * 4);
    b_->upload(sin_.data(), sn.data(), sn.size() * 4);
  }

  const model::ModelConfig& config() const override { return cfg_; }
  const model::Layout& layout() const override { return L_; }
  std::string device() const override { return B::name(); }
  std::string storage() const override { return kF32 ? "f32" : "bf16"; }
  void set_gradient_checkpointing(bool on) override { ckpt_ = on; }

  void get_param(const model::ParamInfo& p, float* out) override { download_weights(out, p.offset, p.numel); }
  void set_param(const model::ParamInfo& p, const float* in) override {
    if (master_released()) {  // ZeRO-1, bf16: round into the compute copy; the shard's part into its master
      Buf<float> tmp;
      tmp.ensure(b(), p.numel, "the parameter being set");
      upload_chunked(tmp.data(), in, p.numel);
      b_->launch(ToStorage<S>{tmp.data(), wc_own_.data() + p.offset, p.numel});
      zero_->adopt(tmp.data(), p.offset, p.numel);
    } else {
      upload_chunked(master_.data() + p.offset, in, p.numel);
      if (!kF32) refresh_compute(p.offset, p.numel);
      if (zero_) zero_->adopt(master_.data() + p.offset, p.offset, p.numel);
    }
    shadow_.reset();
  }
  void get_grad(const model::ParamInfo& p, float* out) override {
    b_->download(out, grads_.data() + p.offset, size_t(p.numel) * 4);
  }
  void get_adam(const model::ParamInfo& p, float* m, float* v) override {
    refuse_if_sharded("getAdamState");
    ensure_moments();
    b_->download(m, m_.data() + p.offset, size_t(p.numel) * 4);
    b_->download(v, v_.data() + p.offset, size_t(p.numel) * 4);
  }
  void set_adam(const model::ParamInfo& p, const float* m, const float* v) override {
    refuse_if_sharded("setAdamState");
    ensure_moments();
    upload_chunked(m_.data() + p.offset, m, p.numel);
    upload_chunked(v_.data() + p.offset, v, p.numel);
  }
  int64_t step() const override { return step_; }
  void set_step(int64_t s) override { step_ = s; }

  std::vector<model::SavedFile> save(const std::string& dir, model::FileDType dtype, int64_t max_shard_bytes) override {
    Vec w;
    model::checked_resize(w, L_.total, "the host copy of the weights (save)");
    download_weights(w.data(), 0, L_.total);
    return model::save_weights(dir, L_, w.data(), dtype, max_shard_bytes);
  }

  void zero_grad() override { b_->zero(grads_.data(), size_t(L_.total) * 4); }

  void make_reference() override {
    ref_.ensure(b(), L_.total, "the frozen reference copy");
    b_->copy(ref_.data(), wc(), size_t(L_.total) * sizeof(S));
  }

  model::Engine::Memory memory() const override {
    model::Engine::Memory m;
    m.weights = master_.bytes() + wc_own_.bytes();
    m.grads = grads_.bytes();
    m.optimizer = m_.bytes() + v_.bytes() + (zero_ ? zero_->bytes() : 0);
    m.reference = ref_.bytes();
    m.activations_peak = act_peak_;
    return m;
  }

  // ---------------------------------------------------------------------------------
  // training step (model::Engine::accumulate's steps, on the backend)

  model::TrainStats accumulate(const model::TrainInputs& in, const model::TrainOptions& opt) override {
    // ZeRO-1's overlap (zero_shard.h): armed for this micro-batch only, whatever happens
    struct Disarm {
      ZeroShard<B, S>* z;
      ~Disarm() { if (z) z->disarm(); }
    } disarm{zero_ && zero_->armed() ? zero_.get() : nullptr};
    const model::PackedBatch& hb = in.batch;
    model::check_packed_batch(cfg_, hb);
    const int64_t T = hb.T, H = cfg_.hidden, V = cfg_.vocab;
    const bool need_ref = !opt.cross_entropy && opt.loss.beta != 0.0f;
    Vec ref_host;
    const float* ref = in.ref_logp;
    if (need_ref && !ref) {
      if (ref_.empty())
        throw Error("train step: beta > 0 needs reference log-probs (pass refLogp, or create the reference copy)");
      ref_host.resize(size_t(T));
      score(hb, opt.temperature, true, ref_host.data());
      ref = ref_host.data();
    }
    if (!opt.cross_entropy && !in.advantages) throw Error("train step: advantages are required for the GRPO loss");
    upload_batch(hb);
    forward(wc(), T, true);
    const std::vector<int64_t> first = model::first_flags(hb);
    std::vector<int32_t> rows;  // tokens t in the loss; row t - 1 of xf predicts them
    std::vector<uint8_t> mask(size_t(T), 0);
    for (int64_t t = 0; t < T; ++t)
      if (!first[size_t(t)] && (!in.mask || in.mask[t])) rows.push_back(int32_t(t)), mask[size_t(t)] = 1;
    const int64_t n = int64_t(rows.size());
    const S* Wh = wc() + head_param().offset;
    float* Gh = grads_.data() + head_param().offset;
    // The head's logits are made chunk by chunk (C rows, <= 64 MiB), as on the CPU engine
    // (native/model/model.cc): pass 1 takes the log-probs, the loss then needs all of them, pass 2
    // takes each chunk's gradient. The first `kept` chunks keep their logits between the passes
    // (a slot each, within opt.keep_logits_bytes: keepLogitsMb); the others share one slot and
    // are computed again in pass 2 (the product X W^T, one of the head's four), except the one
    // the shared slot still holds. The same product on the same rows either way: the budget moves
    // memory and time, not the result.
    const int64_t C = model::chunk_rows(opt.chunk_tokens, V);
    const int64_t n_chunks = (n + C - 1) / C;
    const int64_t kept = std::min(n_chunks, std::max<int64_t>(0, opt.keep_logits_bytes) / (C * V * 4));
    const int64_t slots = std::max<int64_t>(1, kept + (kept < n_chunks ? 1 : 0));
    const int64_t stride = (C * V + 63) / 64 * 64;  // slots start 256-byte aligned, as the GEMMs' outputs
    ensure_head(C, n, slots, stride);
    note_peak(int64_t(slots * stride) * 4 + int64_t(C * V) * (4 + int64_t(sizeof(S))) + 2 * C * H * int64_t(sizeof(S)));
    // chunk ci's logits: its own slot when kept, else the shared one (slot `kept`)
    auto chunk_logits = [&](int64_t ci) { return logits_.data() + std::min(ci, kept) * stride; };
    int64_t shared_holds = -1;  // the chunk whose logits the shared slot holds
    int64_t gathered = -1;      // the chunk whose rows and targets xc_ and tgt_ hold
    // pass 1: log-probs of the active tokens, chunk by chunk
    Vec logp(static_cast<size_t>(T), 0.0f), lp_c(static_cast<size_t>(C));
    for (int64_t r0 = 0; r0 < n; r0 += C) {
      const int64_t cn = std::min(C, n - r0), ci = r0 / C;
      gather_head(rows.data() + r0, cn);
      gathered = ci;
      float* z = chunk_logits(ci);
      head_forward(cn, Wh, z);
      if (ci >= kept) shared_holds = ci;
      LogprobForwardArgs fa;
      fa.logits = z, fa.dtype = DType::F32, fa.n_rows = cn, fa.vocab = V, fa.targets = tgt_.data();
      fa.temperature = opt.temperature, fa.logp = lpc_.data(), fa.lse = lse_.data() + r0;
      b_->logprob_forward(fa);
      b_->download(lp_c.data(), lpc_.data(), size_t(cn) * 4);
      for (int64_t i = 0; i < cn; ++i) logp[size_t(rows[size_t(r0 + i)])] = lp_c[size_t(i)];
    }
    // the loss and dL/dlogp
    model::TrainStats st;
    st.n_tokens = T;
    st.n_active = n;
    Vec glogp(size_t(T), 0.0f);
    double sum_lp = 0;
    for (int32_t t : rows) sum_lp += logp[size_t(t)];
    st.mean_logp = n ? sum_lp / double(n) : 0.0;
    if (opt.cross_entropy) {
      st.loss = n ? -st.mean_logp : 0.0;
      for (int32_t t : rows) glogp[size_t(t)] = -1.0f / float(n);
      st.grpo.n_active = n;
      st.grpo.loss = st.loss;
    } else {
      // no old log-probs: this pass's own, as constants (on-policy: every ratio exactly 1)
      st.grpo = grpo_on_backend(hb, logp.data(), in.old_logp ? in.old_logp : logp.data(), need_ref ? ref : nullptr, in.advantages, mask.data(),
                                opt.loss, glogp.data());
      st.loss = st.grpo.loss;
    }
    // pass 2: each chunk's dlogits back into the head's gradient and dL/dxf
    Buf<S>& dxf = scratch_h(0);
    b_->zero(dxf.data(), size_t(T * H) * sizeof(S));
    Vec g_c(static_cast<size_t>(C));
    for (int64_t r0 = 0; r0 < n; r0 += C) {
      const int64_t cn = std::min(C, n - r0), ci = r0 / C;
      bool any = false;
      for (int64_t i = 0; i < cn; ++i) {
        g_c[size_t(i)] = glogp[size_t(rows[size_t(r0 + i)])] * opt.grad_scale;
        any |= g_c[size_t(i)] != 0.0f;
      }
      if (!any) continue;
      if (gathered != ci) gather_head(rows.data() + r0, cn), gathered = ci;  // the weight gradient reads the rows
      float* z = chunk_logits(ci);
      if (ci >= kept && shared_holds != ci) head_forward(cn, Wh, z), shared_holds = ci;
      b_->upload(gc_.data(), g_c.data(), size_t(cn) * 4);
      LogprobBackwardArgs ba;
      ba.logits = z, ba.dtype = DType::F32, ba.n_rows = cn, ba.vocab = V, ba.targets = tgt_.data();
      ba.temperature = opt.temperature, ba.lse = lse_.data() + r0, ba.grad_logp = gc_.data();
      ba.grad_logits = dlogits_.data();
      b_->logprob_backward(ba);
      const S* dl = to_storage(dlogits_.data(), dl_t_, cn * V);
      b_->linear(LinearProduct::BackwardWeight, dl, xc_.data(), Gh, true, cn, V, H, true);
      b_->linear(LinearProduct::BackwardInput, dl, Wh, dxc_.data(), false, cn, V, H, false);
      b_->launch(ScatterRows<S>{dxc_.data(), idx_.data(), dxf.data(), cn, H});
    }
    backward(dxf.data(), T);
    if (zero_) zero_->backward_done();
    grads_final_from(0);
    return st;
  }

  AdamWResult optimizer_step(const model::AdamWOptions& o) override {
    refuse_if_sharded("optimizerStep");
    ensure_moments();
    std::vector<AdamWTensor> ts;
    for (const model::ParamInfo& p : L_.params) {
      AdamWTensor t;
      t.param = master_.data() + p.offset;
      t.grad = grads_.data() + p.offset;
      t.m = m_.data() + p.offset;
      t.v = v_.data() + p.offset;
      t.param_bf16 = kF32 ? nullptr : reinterpret_cast<uint16_t*>(wc_own_.data()) + p.offset;
      t.numel = p.numel;
      t.decay = p.decay;
      ts.push_back(t);
    }
    AdamWArgs a;
    a.tensors = ts.data();
    a.n_tensors = int64_t(ts.size());
    a.lr = o.lr, a.beta1 = o.beta1, a.beta2 = o.beta2, a.eps = o.eps, a.weight_decay = o.weight_decay;
    a.step = step_ + 1;
    a.max_grad_norm = o.max_grad_norm;
    AdamWResult r = b_->adamw(a);
    if (!r.skipped) ++step_;
    shadow_.reset();
    zero_grad();
    return r;
  }

  void score(const model::PackedBatch& hb, float temperature, bool reference, float* out) override {
    model::check_packed_batch(cfg_, hb);
    if (reference && ref_.empty()) throw Error("score: no reference copy (create it first)");
    const int64_t T = hb.T, V = cfg_.vocab;
    const S* w = reference ? ref_.data() : wc();
    upload_batch(hb);
    forward(w, T, false);
    const std::vector<int64_t> first = model::first_flags(hb);
    std::vector<int32_t> rows;
    for (int64_t t = 0; t < T; ++t) {
      out[t] = 0.0f;
      if (!first[size_t(t)]) rows.push_back(int32_t(t));
    }
    const int64_t n = int64_t(rows.size()), C = model::chunk_rows(256, V);
    ensure_head(C, C);
    note_peak(int64_t(C * V) * 4);
    Vec lp(static_cast<size_t>(C));
    const S* Wh = w + head_param().offset;
    for (int64_t r0 = 0; r0 < n; r0 += C) {
      const int64_t cn = std::min(C, n - r0);
      head_logits(rows.data() + r0, cn, Wh);
      LogprobForwardArgs fa;
      fa.logits = logits_.data(), fa.dtype = DType::F32, fa.n_rows = cn, fa.vocab = V, fa.targets = tgt_.data();
      fa.temperature = temperature, fa.logp = lpc_.data(), fa.lse = lse_.data();
      b_->logprob_forward(fa);
      b_->download(lp.data(), lpc_.data(), size_t(cn) * 4);
      for (int64_t i = 0; i < cn; ++i) out[rows[size_t(r0 + i)]] = lp[size_t(i)];
    }
  }

  void logits(const model::PackedBatch& hb, float* out) override {
    model::check_packed_batch(cfg_, hb);
    const int64_t T = hb.T, V = cfg_.vocab, H = cfg_.hidden;
    upload_batch(hb);
    forward(wc(), T, false);
    Buf<float> all;
    all.ensure(b(), T * V, "the logits");
    b_->linear(LinearProduct::Forward, xf_.data(), wc() + head_param().offset, all.data(), true, T, V, H, false);
    b_->download(out, all.data(), size_t(T * V) * 4);
  }

  // Sampling runs on a CPU engine holding a copy of the current master weights (made on
  // first use after each change): the device decode path is issue 14's.
  std::vector<model::GenResult> generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const model::SampleOptions& o) override {
    if (!shadow_) {
      shadow_ = model::Engine::random(cfg_, 0, 0.0f);
      download_weights(shadow_->weights(), 0, L_.total);
      shadow_->set_bf16(bf16_);
    }
    return shadow_->generate(prompts, o);
  }

  void set_bf16(const model::Engine::Bf16Use& u) override {
    if (u.forward)
      throw Error("setBf16: 'forward' is the CPU engine's option; the device engine computes in its storage dtype (" +
                  storage() + ")");
    bf16_ = u;
    if (shadow_) shadow_->set_bf16(u);
  }
  model::Engine::Bf16Use bf16() const override { return bf16_; }

  // ---------------------------------------------------------------------------------
  // ZeRO-1 on the engine's own memory (zero_shard.h)

  void zero_init(const ZeroPlan& plan) override {
    if (zero_) throw Error("zeroInit: ZeRO-1 is set up on this engine already (zeroSetShard sets the shard)");
    zero_.reset(new ZeroShard<B, S>(b(), L_, plan, zero_target()));
    m_.release(), v_.release();  // the shard's moments replace the engine's
    if (!kF32) master_.release();  // bf16: the shard's fp32 master replaces the full one
    shadow_.reset();
  }
  AdamWResult zero_step(NcclComm& comm, const ZeroStepOptions& o) override {
    need_zero("zeroStep");
    AdamWResult r = zero_->step(comm, o, zero_target(), step_);
    if (!r.skipped) ++step_;
    shadow_.reset();
    return r;
  }
  void zero_overlap_next(std::shared_ptr<NcclComm> comm, double timeout_ms, bool timeline) override {
    need_zero("zeroOverlapNext");
    zero_->arm(std::move(comm), timeout_ms, timeline);
  }
  void zero_flush(std::shared_ptr<NcclComm> comm, double timeout_ms) override {
    need_zero("zeroFlush");
    zero_->flush(std::move(comm), timeout_ms, zero_target());
  }
  std::vector<int64_t> zero_overlap_trace(double* timeline_ms) const override {
    need_zero("zeroOverlapTrace");
    *timeline_ms = zero_->timeline_ms();
    return zero_->trace();
  }
  int64_t zero_shard_size() const override {
    if (!zero_) throw Error("zeroShard: ZeRO-1 is not set up on this engine (zeroInit first)");
    return zero_->size();
  }
  void zero_get_shard(float* master, float* m, float* v) override {
    need_zero("zeroShard");
    zero_->get(zero_target(), master, m, v);
  }
  void zero_set_shard(const float* master, const float* m, const float* v, int64_t step) override {
    need_zero("zeroSetShard");
    zero_->set(zero_target(), master, m, v);
    step_ = step;
    shadow_.reset();
  }

  // bf16 weight-sync buckets from the compute copy (bf16: a copy; f32: rounded to nearest even)
  void pack_bf16(const std::vector<PackEntry>& es, void* out, int64_t out_bytes, bool out_on_device) override {
    const bool host = std::strcmp(B::name(), "emulate") == 0;
    if (out_on_device == host)
      throw Error(std::string("packBf16: the bucket must live where the engine's memory does (") +
                  (host ? "a host Uint8Array for the emulated engine" : "a u8 DeviceArray for the CUDA engine") + ")");
    for (const PackEntry& e : es)
      if (e.numel < 0 || e.offset < 0 || e.offset + e.numel > L_.total || e.byte_offset < 0 || e.byte_offset % 2 ||
          e.byte_offset + 2 * e.numel > out_bytes)
        throw Error("packBf16: an entry at byte " + std::to_string(e.byte_offset) + " (" + std::to_string(e.numel) +
                    " elements) lies outside the bucket of " + std::to_string(out_bytes) + " bytes or the model");
    for (const PackEntry& e : es) {
      uint16_t* dst = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(out) + e.byte_offset);
      if (kF32) b_->launch(ToStorage<uint16_t>{master_.data() + e.offset, dst, e.numel});
      else b_->copy(dst, wc_own_.data() + e.offset, size_t(e.numel) * 2);
    }
  }

  // ---------------------------------------------------------------------------------
  // paged generation (docs/gpu.md, "Generation"): KV pools on the backend, one step over them

  void kv_allocate(int64_t n_blocks, int64_t block_size) override {
    if (n_blocks < 1 || block_size < 1)
      throw Error("kvAllocate: blocks and blockSize must be integers >= 1 (got " + std::to_string(n_blocks) + ", " +
                  std::to_string(block_size) + ")");
    if (n_blocks * block_size > int64_t(INT32_MAX))
      throw Error("kvAllocate: blocks x blockSize = " + std::to_string(n_blocks * block_size) +
                  " slots is more than slotMapping's int32 can address; ask for fewer blocks");
    if (cfg_.head_dim > kMaxHeadDim)
      throw Error("kvAllocate: the paged attention holds a head of at most " + std::to_string(kMaxHeadDim) +
                      " values; this model's head_dim is " + std::to_string(cfg_.head_dim) + "; use generate()",
                  ErrorCode::NotSup);
    kv_release();
    const int64_t n = cfg_.n_layers * n_blocks * block_size * kv_row();
    try {
      kv_.k.ensure(b(), n, "the KV cache");
      kv_.v.ensure(b(), n, "the KV cache");
    } catch (const Error& e) {
      kv_release();
      if (e.code != ErrorCode::NoMem) throw;
      throw Error("kvAllocate: " + std::to_string(n_blocks) + " blocks of " + std::to_string(block_size) + " tokens (" +
                      std::to_string(2 * n * int64_t(sizeof(S))) +
                      " bytes, K and V of every layer) do not fit in free memory; ask for fewer blocks (kvInfo(): "
                      "freeBytes / bytesPerBlock)",
                  ErrorCode::NoMem);
    }
    kv_.blocks = n_blocks, kv_.block_size = block_size;
  }

  void kv_release() override {
    kv_.k.release(), kv_.v.release();
    kv_.blocks = kv_.block_size = 0;
    pg_ = PagedBufs();  // the step's activations go too
  }

  model::KvInfo kv_info() const override {
    model::KvInfo k;
    k.blocks = kv_.blocks, k.block_size = kv_.block_size;
    k.bytes_per_token = 2 * cfg_.n_layers * kv_row() * int64_t(sizeof(S));
    k.free_bytes = b_->free_bytes();
    return k;
  }

  void paged_step(const model::PagedInputs& in, const model::PagedSampling& s, int32_t* tokens, float* logp) override {
    model::check_paged_inputs(cfg_, kv_.blocks, kv_.block_size, in, &s, "pagedStep");
    paged_forward(in);
    const int64_t R = in.n_samples, V = cfg_.vocab;
    if (R == 0) return;
    const char* w = "the sampling inputs";
    // the R rows to sample: a row sampled several times (a fork of n samples) is gathered n times
    bool identity = R == in.n_logits;
    for (int64_t r = 0; identity && r < R; ++r) identity = in.sample_rows[r] == r;
    const float* z = pg_.logits.data();
    if (!identity) {
      pg_.srows.ensure(b(), R, w);
      pg_.slogits.ensure(b(), R * V, "the sampled rows' logits");
      b_->upload(pg_.srows.data(), in.sample_rows, size_t(R) * 4);
      b_->launch(GatherRows<float>{pg_.logits.data(), pg_.srows.data(), pg_.slogits.data(), R, V});
      z = pg_.slogits.data();
    }
    std::vector<uint64_t> stream(static_cast<size_t>(R));
    std::vector<int64_t> step(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) {
      stream[size_t(r)] = sample_stream(uint64_t(s.seed[r]), uint64_t(in.sample_indices[r]));
      step[size_t(r)] = s.step[r];
    }
    for (Buf<float>* x : {&pg_.temp, &pg_.top_p, &pg_.min_p, &pg_.logp}) x->ensure(b(), R, w);
    pg_.top_k.ensure(b(), R, w), pg_.token.ensure(b(), R, w), pg_.stream.ensure(b(), R, w), pg_.step.ensure(b(), R, w);
    b_->upload(pg_.temp.data(), s.temperature, size_t(R) * 4);
    b_->upload(pg_.top_p.data(), s.top_p, size_t(R) * 4);
    b_->upload(pg_.min_p.data(), s.min_p, size_t(R) * 4);
    b_->upload(pg_.top_k.data(), s.top_k, size_t(R) * 4);
    b_->upload(pg_.stream.data(), stream.data(), size_t(R) * 8);
    b_->upload(pg_.step.data(), step.data(), size_t(R) * 8);
    b_->sample(z, pg_.temp.data(), pg_.top_p.data(), pg_.min_p.data(), pg_.top_k.data(), pg_.stream.data(),
               pg_.step.data(), pg_.token.data(), pg_.logp.data(), R, V);
    b_->download(tokens, pg_.token.data(), size_t(R) * 4);
    b_->download(logp, pg_.logp.data(), size_t(R) * 4);
  }

  void paged_logits(const model::PagedInputs& in, float* logits) override {
    model::check_paged_inputs(cfg_, kv_.blocks, kv_.block_size, in, nullptr, "pagedLogits");
    paged_forward(in);
    b_->download(logits, pg_.logits.data(), size_t(in.n_logits * cfg_.vocab) * 4);
  }

 private:
  B* b() { return b_.get(); }
  ZeroTarget<S> zero_target() {
    S* wcm = kF32 ? reinterpret_cast<S*>(master_.data()) : wc_own_.data();
    return ZeroTarget<S>{master_.empty() ? nullptr : master_.data(), wcm, grads_.data(), L_.total};
  }
  // ZeRO-1 with bf16 storage keeps no full fp32 master: the weights are the compute copy.
  bool master_released() const { return !kF32 && master_.empty(); }
  // fp32 weights [off, off + n) to the host: the master, or the bf16 compute copy widened
  void download_weights(float* out, int64_t off, int64_t n) {
    if (!master_released()) {
      b_->download(out, master_.data() + off, size_t(n) * 4);
      return;
    }
    const int64_t chunk = int64_t(1) << 22;
    std::vector<uint16_t> h(size_t(std::min(chunk, std::max<int64_t>(n, 1))));
    for (int64_t i = 0; i < n; i += chunk) {
      const int64_t c = std::min(chunk, n - i);
      b_->download(h.data(), wc_own_.data() + off + i, size_t(c) * 2);
      for (int64_t j = 0; j < c; ++j) out[i + j] = bf16_to_f32(h[size_t(j)]);
    }
  }
  void need_zero(const char* what) const {
    if (!zero_) throw Error(std::string(what) + ": ZeRO-1 is not set up on this engine (zeroInit first)");
  }
  void refuse_if_sharded(const char* what) const {
    if (zero_)
      throw Error(std::string(what) + ": this engine's optimizer state is sharded (ZeRO-1, zeroInit): step with zeroStep "
                  "and read the shard with zeroShard");
  }
  const S* wc() const { return kF32 ? reinterpret_cast<const S*>(master_.data()) : wc_own_.data(); }
  const model::ParamInfo& head_param() const { return L_.params[size_t(L_.lm_head >= 0 ? L_.lm_head : L_.embed)]; }
  void note_peak(int64_t extra) { act_peak_ = std::max(act_peak_, acts_bytes() + extra); }

  // host fp32 -> backend memory in chunks (the CUDA backend stages them through pinned memory)
  void upload_chunked(float* dst, const float* src, int64_t n) {
    const int64_t chunk = int64_t(1) << 22;
    for (int64_t i = 0; i < n; i += chunk) b_->upload(dst + i, src + i, size_t(std::min(chunk, n - i)) * 4);
  }
  void refresh_compute(int64_t off, int64_t n) {
    if (kF32) return;
    b_->launch(ToStorage<S>{master_.data() + off, wc_own_.data() + off, n});
  }
  void ensure_moments() {
    if (m_.empty()) {
      m_.ensure(b(), L_.total, "the AdamW moments");
      v_.ensure(b(), L_.total, "the AdamW moments");
      b_->zero(m_.data(), size_t(L_.total) * 4);
      b_->zero(v_.data(), size_t(L_.total) * 4);
    }
  }
  // fp32 values -> storage S (a copy of the pointer when S is float)
  const S* to_storage(const float* src, Buf<S>& dst, int64_t n) {
    if (kF32) return reinterpret_cast<const S*>(src);
    dst.ensure(b(), n, "the lm-head chunk");
    b_->launch(ToStorage<S>{src, dst.data(), n});
    return dst.data();
  }

  // ---- the batch on the backend
  void upload_batch(const model::PackedBatch& hb) {
    const int64_t T = hb.T;
    tok_.ensure(b(), T, "the batch");
    pos_.ensure(b(), T, "the batch");
    off_.ensure(b(), hb.n_seqs + 1, "the batch");
    b_->upload(tok_.data(), hb.tokens, size_t(T) * 4);
    b_->upload(pos_.data(), hb.positions, size_t(T) * 4);
    b_->upload(off_.data(), hb.seq_offsets, size_t(hb.n_seqs + 1) * 8);
    off_host_.assign(hb.seq_offsets, hb.seq_offsets + hb.n_seqs + 1);
    tok_host_.assign(hb.tokens, hb.tokens + T);
  }

  GrpoLossStats grpo_on_backend(const model::PackedBatch& hb, const float* logp, const float* old, const float* ref,
                                const float* adv, const uint8_t* mask, const GrpoLossArgs& opts, float* glogp) {
    const int64_t T = hb.T;
    Buf<float>&d_lp = loss_.lp, &d_old = loss_.old, &d_ref = loss_.ref, &d_adv = loss_.adv, &d_g = loss_.g;
    Buf<uint8_t>& d_mask = loss_.mask;
    for (auto* x : {&d_lp, &d_old, &d_adv, &d_g}) x->ensure(b(), T, "the loss inputs");
    d_mask.ensure(b(), T, "the loss inputs");
    b_->upload(d_lp.data(), logp, size_t(T) * 4);
    b_->upload(d_old.data(), old, size_t(T) * 4);
    b_->upload(d_adv.data(), adv, size_t(T) * 4);
    b_->upload(d_mask.data(), mask, size_t(T));
    if (ref) {
      d_ref.ensure(b(), T, "the loss inputs");
      b_->upload(d_ref.data(), ref, size_t(T) * 4);
    }
    GrpoLossArgs la = opts;
    la.n_tokens = T, la.logp = d_lp.data(), la.old_logp = d_old.data(), la.ref_logp = ref ? d_ref.data() : nullptr;
    la.advantages = d_adv.data(), la.mask = d_mask.data(), la.seq_offsets = off_.data(), la.n_seqs = hb.n_seqs;
    la.grad_logp = d_g.data(), la.token_loss = nullptr;
    GrpoLossStats st = b_->grpo_loss(la);
    b_->download(glogp, d_g.data(), size_t(T) * 4);
    return st;
  }

  // ---- the chunked lm-head
  // `slots` chunks of logits `stride` floats apart: the kept ones and the shared one (train step), else one
  void ensure_head(int64_t C, int64_t n_lse, int64_t slots = 1, int64_t stride = 0) {
    const int64_t H = cfg_.hidden, V = cfg_.vocab;
    xc_.ensure(b(), C * H, "the lm-head chunk");
    dxc_.ensure(b(), C * H, "the lm-head chunk");
    logits_.ensure(b(), (slots - 1) * stride + C * V, "the lm-head logits kept between the loss's two passes (--keep-logits-mb sets how many)");
    dlogits_.ensure(b(), C * V, "the lm-head chunk's logits");
    idx_.ensure(b(), C, "the lm-head chunk");
    tgt_.ensure(b(), C, "the lm-head chunk");
    lpc_.ensure(b(), C, "the lm-head chunk");
    gc_.ensure(b(), C, "the lm-head chunk");
    lse_.ensure(b(), std::max<int64_t>(n_lse, 1), "the log-sum-exps");
  }
  // rows[0..cn) are token indices: gathers xf rows t - 1 into xc_ and targets tokens[t] into tgt_
  void gather_head(const int32_t* rows, int64_t cn) {
    const int64_t H = cfg_.hidden;
    std::vector<int32_t> src(static_cast<size_t>(cn)), tg(static_cast<size_t>(cn));
    for (int64_t i = 0; i < cn; ++i) src[size_t(i)] = rows[i] - 1, tg[size_t(i)] = tok_host_[size_t(rows[i])];
    b_->upload(idx_.data(), src.data(), size_t(cn) * 4);
    b_->upload(tgt_.data(), tg.data(), size_t(cn) * 4);
    b_->launch(GatherRows<S>{xf_.data(), idx_.data(), xc_.data(), cn, H});
  }
  // the gathered rows' logits (fp32) into z: X W^T
  void head_forward(int64_t cn, const S* Wh, float* z) {
    b_->linear(LinearProduct::Forward, xc_.data(), Wh, z, true, cn, cfg_.vocab, cfg_.hidden, false);
  }
  void head_logits(const int32_t* rows, int64_t cn, const S* Wh) {
    gather_head(rows, cn);
    head_forward(cn, Wh, logits_.data());
  }
  // ---- activations
  struct LayerBufs {
    Buf<S> n1, qraw, kraw, q, k, v, att, a, h, n2, gate, up, act, m;
    Buf<float> r1, rq, rk, lse, ra, r2, rm;
    int64_t bytes() const {
      int64_t s = 0;
      for (const Buf<S>* x : {&n1, &qraw, &kraw, &q, &k, &v, &att, &a, &h, &n2, &gate, &up, &act, &m}) s += x->bytes();
      for (const Buf<float>* x : {&r1, &rq, &rk, &lse, &ra, &r2, &rm}) s += x->bytes();
      return s;
    }
  };
  int64_t acts_bytes() const {
    int64_t s = xf_.bytes() + rf_.bytes();
    for (const auto& x : xs_) s += x.bytes();
    for (const auto& l : acts_) s += l.bytes();
    for (const auto& x : scratch_) s += x.bytes();
    for (const Buf<float>* x : {&bw_.dx, &bw_.dh, &bw_.acc}) s += x->bytes();
    for (const Buf<S>* x : {&bw_.dact, &bw_.dg, &bw_.du, &bw_.datt, &bw_.dq, &bw_.dk, &bw_.dv, &bw_.dqr, &bw_.dkr}) s += x->bytes();
    return s;
  }
  Buf<S>& scratch_h(int i) {
    if (scratch_.size() < 4) scratch_.resize(4);
    scratch_[size_t(i)].ensure(b(), cur_T_ * cfg_.hidden, "activation gradients");
    return scratch_[size_t(i)];
  }

  const S* P(const S* w, int idx) const { return w + L_.params[size_t(idx)].offset; }
  float* G(int idx) { return grads_.data() + L_.params[size_t(idx)].offset; }
  // ZeRO-1's overlap: every gradient in [x, total) is final (a no-op unless armed)
  void grads_final_from(int64_t x) {
    if (zero_ && zero_->armed()) zero_->grads_final_from(x, zero_target());
  }
  // Where layer l's parameters begin in the flat vector (they are contiguous: make_layout)
  int64_t layer_begin(int64_t l) const {
    const model::LayerParams& lp = L_.layers[size_t(l)];
    return L_.params[size_t(lp.in_norm >= 0 ? lp.in_norm : lp.q)].offset;
  }

  void ensure_layer(LayerBufs& A, int64_t T) {
    const int64_t H = cfg_.hidden, qd = cfg_.n_heads * cfg_.head_dim, kd = cfg_.n_kv * cfg_.head_dim,
                  I = cfg_.intermediate;
    const bool qwen = cfg_.arch == model::Arch::Qwen3;
    const char* w = "activations";
    if (qwen) A.n1.ensure(b(), T * H, w), A.n2.ensure(b(), T * H, w), A.r1.ensure(b(), T, w), A.r2.ensure(b(), T, w);
    else A.m.ensure(b(), T * H, w), A.ra.ensure(b(), T, w), A.rm.ensure(b(), T, w);
    A.qraw.ensure(b(), T * qd, w), A.q.ensure(b(), T * qd, w), A.att.ensure(b(), T * qd, w);
    A.kraw.ensure(b(), T * kd, w), A.k.ensure(b(), T * kd, w), A.v.ensure(b(), T * kd, w);
    A.a.ensure(b(), T * H, w), A.h.ensure(b(), T * H, w);
    A.gate.ensure(b(), T * I, w), A.up.ensure(b(), T * I, w), A.act.ensure(b(), T * I, w);
    A.rq.ensure(b(), qwen ? T * cfg_.n_heads : T, w), A.rk.ensure(b(), qwen ? T * cfg_.n_kv : T, w);
    A.lse.ensure(b(), T * cfg_.n_heads, w);
  }

  AttnBatch attn_shape(int64_t T) const {
    AttnBatch s;
    s.T = T, s.n_heads = cfg_.n_heads, s.n_kv = cfg_.n_kv, s.head_dim = cfg_.head_dim;
    s.scale = float(1.0 / std::sqrt(double(cfg_.head_dim)));
    s.seq_offsets_host = off_host_.data(), s.seq_offsets_dev = off_.data();
    s.n_seqs = int64_t(off_host_.size()) - 1;
    return s;
  }

  // Runs the network; every layer's input stays in xs_[l], the final normed states in xf_.
  // keep: one activation slot per layer (backward without recomputation); else one slot.
  void forward(const S* w, int64_t T, bool keep) {
    const int64_t H = cfg_.hidden, nl = cfg_.n_layers;
    cur_T_ = T;
    xs_.resize(size_t(nl + 1));
    for (auto& x : xs_) x.ensure(b(), T * H, "activations");
    const size_t slots = keep && !ckpt_ ? size_t(nl) : 1;
    if (acts_.size() < slots) acts_.resize(slots);
    for (size_t i = 0; i < slots; ++i) ensure_layer(acts_[i], T);
    b_->launch(EmbeddingGather<S>{P(w, L_.embed), tok_.data(), xs_[0].data(), T, H, kEngineBlock});
    for (int64_t l = 0; l < nl; ++l)
      layer_forward(w, l, T, acts_[slots == 1 ? 0 : size_t(l)], xs_[size_t(l)].data(), xs_[size_t(l + 1)].data());
    xf_.ensure(b(), T * H, "activations");
    rf_.ensure(b(), T, "activations");
    b_->launch(RmsNormForward<S>{xs_[size_t(nl)].data(), P(w, L_.final_norm), xf_.data(), rf_.data(), T, H,
                                 float(cfg_.rms_eps)});
    note_peak(0);
  }

  int64_t kv_row() const { return cfg_.n_kv * cfg_.head_dim; }

  // The forward of a paged step (inputs checked): the block copies, the T new tokens through
  // every layer with their K and V appended to the pools at slot_mapping and paged attention
  // over the pools, then the final norm and the lm-head on the L logits rows -> pg_.logits [L, V].
  void paged_forward(const model::PagedInputs& in) {
    const model::ModelConfig& c = cfg_;
    const int64_t T = in.T, H = c.hidden, L = in.n_logits, V = c.vocab, row = kv_row(), bs = kv_.block_size;
    const int64_t layer = kv_.blocks * bs * row, blk = bs * row;
    const S* w = wc();
    // copy-on-write: whole blocks, every layer's K and V, before this step's writes
    for (int64_t i = 0; i < in.n_copies; ++i) {
      const int64_t src = in.copies[2 * i], dst = in.copies[2 * i + 1];
      for (int64_t l = 0; l < c.n_layers; ++l) {
        b_->copy(kv_.k.data() + l * layer + dst * blk, kv_.k.data() + l * layer + src * blk, size_t(blk) * sizeof(S));
        b_->copy(kv_.v.data() + l * layer + dst * blk, kv_.v.data() + l * layer + src * blk, size_t(blk) * sizeof(S));
      }
    }
    // the step's index arrays; seq[t] = the sequence (block-table row) of token t
    std::vector<int32_t> seq(static_cast<size_t>(T));
    std::vector<int64_t> slot(static_cast<size_t>(T));
    int64_t max_len = 0;
    for (int64_t sq = 0; sq < in.n_seqs; ++sq) {
      for (int64_t t = in.query_start_loc[sq]; t < in.query_start_loc[sq + 1]; ++t) seq[size_t(t)] = int32_t(sq);
      max_len = std::max<int64_t>(max_len, in.seq_lens[sq]);
    }
    for (int64_t t = 0; t < T; ++t) slot[size_t(t)] = in.slot_mapping[t];
    const char* wi = "the paged step's inputs";
    pg_.tok.ensure(b(), T, wi), pg_.pos.ensure(b(), T, wi), pg_.seq.ensure(b(), T, wi), pg_.slot.ensure(b(), T, wi);
    pg_.table.ensure(b(), in.n_seqs * in.max_blocks, wi);
    b_->upload(pg_.tok.data(), in.input_ids, size_t(T) * 4);
    b_->upload(pg_.pos.data(), in.positions, size_t(T) * 4);
    b_->upload(pg_.seq.data(), seq.data(), size_t(T) * 4);
    b_->upload(pg_.slot.data(), slot.data(), size_t(T) * 8);
    b_->upload(pg_.table.data(), in.block_tables, size_t(in.n_seqs * in.max_blocks) * 4);
    PagedAttentionShape sh;
    sh.n_new = T, sh.H = c.n_heads, sh.G = c.n_kv, sh.D = c.head_dim, sh.block_size = bs, sh.max_blocks = in.max_blocks;
    sh.partition = kPagedPartition, sh.n_parts = (max_len - 1) / kPagedPartition + 1;
    sh.scale = float(1.0 / std::sqrt(double(c.head_dim)));
    pg_.ws.ensure(b(), paged_attention_workspace_floats(sh), "the paged attention's partials");
    // the layers, ping-ponging between two residual-stream buffers
    const char* wa = "the paged step's activations";
    pg_.x0.ensure(b(), T * H, wa), pg_.x1.ensure(b(), T * H, wa);
    ensure_layer(pg_.A, T);
    S* x = pg_.x0.data();
    S* y = pg_.x1.data();
    b_->launch(EmbeddingGather<S>{P(w, L_.embed), pg_.tok.data(), x, T, H, kEngineBlock});
    for (int64_t l = 0; l < c.n_layers; ++l) {
      S* kp = kv_.k.data() + l * layer;
      S* vp = kv_.v.data() + l * layer;
      layer_forward_with(w, l, T, pg_.pos.data(), pg_.A, x, y, [&](LayerBufs& A) {
        b_->kv_append(A.k.data(), A.v.data(), pg_.slot.data(), kp, vp, T, row);
        b_->paged_attention(A.q.data(), kp, vp, pg_.table.data(), pg_.seq.data(), pg_.pos.data(), pg_.ws.data(),
                            A.att.data(), A.lse.data(), sh);
      });
      std::swap(x, y);
    }
    if (L == 0) return;
    // final norm and lm-head on the L rows only (both per row: the same values as on all T rows)
    const char* wl = "the paged step's logits rows";
    pg_.idx.ensure(b(), L, wl), pg_.rows.ensure(b(), L * H, wl), pg_.rows_n.ensure(b(), L * H, wl);
    pg_.rstd.ensure(b(), L, wl), pg_.logits.ensure(b(), L * V, "the paged step's logits");
    b_->upload(pg_.idx.data(), in.logits_indices, size_t(L) * 4);
    b_->launch(GatherRows<S>{x, pg_.idx.data(), pg_.rows.data(), L, H});
    b_->launch(RmsNormForward<S>{pg_.rows.data(), P(w, L_.final_norm), pg_.rows_n.data(), pg_.rstd.data(), L, H,
                                 float(c.rms_eps)});
    b_->linear(LinearProduct::Forward, pg_.rows_n.data(), w + head_param().offset, pg_.logits.data(), true, L, V, H,
               false);
  }

  // One decoder layer (model.h's formulas; model.cc's layer_forward op for op): xin -> xout,
  // with the training's packed causal attention over the batch.
  void layer_forward(const S* w, int64_t l, int64_t T, LayerBufs& A, const S* xin, S* xout) {
    layer_forward_with(w, l, T, pos_.data(), A, xin, xout, [&](LayerBufs& a) {
      b_->attention_forward(attn_shape(T), a.q.data(), a.k.data(), a.v.data(), a.att.data(), a.lse.data());
    });
  }

  // The layer with its attention given: attend(A) reads A.q, A.k, A.v (roped at `pos`) and
  // writes A.att [T, n_heads x head_dim] and A.lse [T, n_heads].
  template <class Attend>
  void layer_forward_with(const S* w, int64_t l, int64_t T, const int32_t* pos, LayerBufs& A, const S* xin, S* xout,
                          Attend&& attend) {
    const model::ModelConfig& c = cfg_;
    const model::LayerParams& lp = L_.layers[size_t(l)];
    const int64_t H = c.hidden, HD = c.head_dim, qd = c.n_heads * HD, kd = c.n_kv * HD, I = c.intermediate;
    const float eps = float(c.rms_eps);
    const bool qwen = c.arch == model::Arch::Qwen3;
    const S* src = xin;
    if (qwen) {
      b_->launch(RmsNormForward<S>{xin, P(w, lp.in_norm), A.n1.data(), A.r1.data(), T, H, eps});
      src = A.n1.data();
    }
    b_->linear(LinearProduct::Forward, src, P(w, lp.q), A.qraw.data(), false, T, qd, H, false);
    b_->linear(LinearProduct::Forward, src, P(w, lp.k), A.kraw.data(), false, T, kd, H, false);
    b_->linear(LinearProduct::Forward, src, P(w, lp.v), A.v.data(), false, T, kd, H, false);
    if (qwen) {  // per-head norms over head_dim
      b_->launch(RmsNormForward<S>{A.qraw.data(), P(w, lp.q_norm), A.q.data(), A.rq.data(), T * c.n_heads, HD, eps});
      b_->launch(RmsNormForward<S>{A.kraw.data(), P(w, lp.k_norm), A.k.data(), A.rk.data(), T * c.n_kv, HD, eps});
    } else {  // over the whole projection
      b_->launch(RmsNormForward<S>{A.qraw.data(), P(w, lp.q_norm), A.q.data(), A.rq.data(), T, qd, eps});
      b_->launch(RmsNormForward<S>{A.kraw.data(), P(w, lp.k_norm), A.k.data(), A.rk.data(), T, kd, eps});
    }
    b_->launch(Rope<S>{A.q.data(), pos, cos_.data(), sin_.data(), T, c.n_heads, HD, false, kEngineBlock});
    b_->launch(Rope<S>{A.k.data(), pos, cos_.data(), sin_.data(), T, c.n_kv, HD, false, kEngineBlock});
    attend(A);
    b_->linear(LinearProduct::Forward, A.att.data(), P(w, lp.o), A.a.data(), false, T, H, qd, false);
    const S* min = A.h.data();
    if (qwen) {  // h = x + a; n2 = norm(h): one fused pass
      b_->launch(ResidualRmsNormForward<S>{xin, A.a.data(), P(w, lp.post_attn_norm), A.h.data(), A.n2.data(),
                                          A.r2.data(), T, H, eps});
      min = A.n2.data();
    } else {  // h = x + norm(a)
      b_->launch(RmsNormResidualForward<S>{A.a.data(), P(w, lp.post_attn_norm), xin, A.h.data(), A.ra.data(), T, H,
                                          eps});
    }
    b_->linear(LinearProduct::Forward, min, P(w, lp.gate), A.gate.data(), false, T, I, H, false);
    b_->linear(LinearProduct::Forward, min, P(w, lp.up), A.up.data(), false, T, I, H, false);
    b_->launch(SwigluForward<S>{A.gate.data(), A.up.data(), A.act.data(), T * I, kEngineBlock});
    if (qwen) {  // x_out = h + down(act)
      b_->linear(LinearProduct::Forward, A.act.data(), P(w, lp.down), xout, false, T, H, I, false);
      b_->launch(AddKernel<S>{xout, xout, A.h.data(), T * H});
    } else {  // x_out = h + norm(down(act))
      b_->linear(LinearProduct::Forward, A.act.data(), P(w, lp.down), A.m.data(), false, T, H, I, false);
      b_->launch(RmsNormResidualForward<S>{A.m.data(), P(w, lp.post_ff_norm), A.h.data(), xout, A.rm.data(), T, H,
                                          eps});
    }
  }

  // rmsnorm backward: out = the input gradient (storage S), dw += the gain's gradient
  void norm_backward(const S* dy, const S* x, const S* w, const float* rstd, S* out, float* dw, int64_t rows, int64_t n) {
    b_->launch(RmsNormBackwardInput<S>{dy, x, w, rstd, out, rows, n});
    b_->launch(RmsNormBackwardWeight<S>{dy, x, rstd, dw, rows, n, kEngineBlock});
  }

  // model.cc's Engine::backward, op for op. dxf: dL/d(final normed states) [T, H]. The residual
  // stream's gradient (dx, dh: every contribution adds into it) is fp32 in both storage modes,
  // as are the sums of several GEMMs' input gradients; the operands of the kernels and GEMMs
  // are S (converted once per use).
  void backward(const S* dxf, int64_t T) {
    const model::ModelConfig& c = cfg_;
    const int64_t H = c.hidden, HD = c.head_dim, qd = c.n_heads * HD, kd = c.n_kv * HD, I = c.intermediate;
    const int64_t TH = T * H;
    const bool qwen = c.arch == model::Arch::Qwen3;
    const S* w = wc();
    S* tmpH = scratch_h(1).data();
    S* resT = scratch_h(2).data();  // the residual gradient rounded to S, as a GEMM / kernel operand
    S* recompute = scratch_h(3).data();
    // kept across calls (grown when a batch is larger): no allocation per micro-batch
    Buf<float>&dx = bw_.dx, &dh = bw_.dh, &acc = bw_.acc;
    Buf<S>&dact = bw_.dact, &dg = bw_.dg, &du = bw_.du, &datt = bw_.datt, &dq = bw_.dq, &dk = bw_.dk, &dv = bw_.dv,
    &dqr = bw_.dqr, &dkr = bw_.dkr;
    const char* what = "activation gradients";
    dx.ensure(b(), TH, what), dh.ensure(b(), TH, what), acc.ensure(b(), TH, what);
    dact.ensure(b(), T * I, what), dg.ensure(b(), T * I, what), du.ensure(b(), T * I, what);
    datt.ensure(b(), T * qd, what), dq.ensure(b(), T * qd, what), dqr.ensure(b(), T * qd, what);
    dk.ensure(b(), T * kd, what), dv.ensure(b(), T * kd, what), dkr.ensure(b(), T * kd, what);
    note_peak(0);
    const size_t f4 = 4;
    auto to_s = [&](const float* src, S* dst, int64_t n) { b_->launch(ToStorage<S>{src, dst, n}); };
    auto add_into = [&](float* y, const S* x, int64_t n, bool assign) { b_->launch(AccumulateF32<S>{y, x, n, assign}); };
    norm_backward(dxf, xs_[size_t(c.n_layers)].data(), P(w, L_.final_norm), rf_.data(), tmpH, G(L_.final_norm), T, H);
    add_into(dx.data(), tmpH, TH, true);
    grads_final_from(L_.params[size_t(L_.final_norm)].offset);  // and the head's (written before)
    for (int64_t l = c.n_layers - 1; l >= 0; --l) {
      const model::LayerParams& lp = L_.layers[size_t(l)];
      const S* xin = xs_[size_t(l)].data();
      LayerBufs* ap;
      if (ckpt_) {  // recompute this layer's activations from its saved input
        ap = &acts_[0];
        layer_forward(w, l, T, *ap, xin, recompute);
      } else {
        ap = &acts_[size_t(l)];
      }
      LayerBufs& a = *ap;
      // x_out = h + [norm](m):  dh = dx (+ the MLP input gradient below)
      b_->copy(dh.data(), dx.data(), size_t(TH) * f4);
      to_s(dx.data(), resT, TH);
      const S* dm = resT;
      if (!qwen) {
        norm_backward(resT, a.m.data(), P(w, lp.post_ff_norm), a.rm.data(), tmpH, G(lp.post_ff_norm), T, H);
        dm = tmpH;
      }
      b_->linear(LinearProduct::BackwardWeight, dm, a.act.data(), G(lp.down), true, T, H, I, true);
      b_->linear(LinearProduct::BackwardInput, dm, P(w, lp.down), dact.data(), false, T, H, I, false);
      b_->launch(SwigluBackward<S>{dact.data(), a.gate.data(), a.up.data(), dg.data(), du.data(), T * I, kEngineBlock});
      const S* min = qwen ? a.n2.data() : a.h.data();
      b_->linear(LinearProduct::BackwardWeight, dg.data(), min, G(lp.gate), true, T, I, H, true);
      b_->linear(LinearProduct::BackwardWeight, du.data(), min, G(lp.up), true, T, I, H, true);
      if (qwen) {  // the MLP's input gradient (fp32 sum), back through norm2 into dh
        b_->linear(LinearProduct::BackwardInput, dg.data(), P(w, lp.gate), acc.data(), true, T, I, H, false);
        b_->linear(LinearProduct::BackwardInput, du.data(), P(w, lp.up), acc.data(), true, T, I, H, true);
        to_s(acc.data(), resT, TH);
        norm_backward(resT, a.h.data(), P(w, lp.post_attn_norm), a.r2.data(), tmpH, G(lp.post_attn_norm), T, H);
        add_into(dh.data(), tmpH, TH, false);
      } else {
        b_->linear(LinearProduct::BackwardInput, dg.data(), P(w, lp.gate), dh.data(), true, T, I, H, true);
        b_->linear(LinearProduct::BackwardInput, du.data(), P(w, lp.up), dh.data(), true, T, I, H, true);
      }
      // h = xin + [norm](a):  dxin = dh (+ the attention input gradient below)
      b_->copy(dx.data(), dh.data(), size_t(TH) * f4);
      to_s(dh.data(), resT, TH);
      const S* da = resT;
      if (!qwen) {
        norm_backward(resT, a.a.data(), P(w, lp.post_attn_norm), a.ra.data(), tmpH, G(lp.post_attn_norm), T, H);
        da = tmpH;
      }
      b_->linear(LinearProduct::BackwardWeight, da, a.att.data(), G(lp.o), true, T, H, qd, true);
      b_->linear(LinearProduct::BackwardInput, da, P(w, lp.o), datt.data(), false, T, H, qd, false);
      b_->attention_backward(attn_shape(T), a.q.data(), a.k.data(), a.v.data(), a.att.data(), a.lse.data(),
                             datt.data(), dq.data(), dk.data(), dv.data());
      b_->launch(Rope<S>{dq.data(), pos_.data(), cos_.data(), sin_.data(), T, c.n_heads, HD, true, kEngineBlock});
      b_->launch(Rope<S>{dk.data(), pos_.data(), cos_.data(), sin_.data(), T, c.n_kv, HD, true, kEngineBlock});
      if (qwen) {
        norm_backward(dq.data(), a.qraw.data(), P(w, lp.q_norm), a.rq.data(), dqr.data(), G(lp.q_norm), T * c.n_heads, HD);
        norm_backward(dk.data(), a.kraw.data(), P(w, lp.k_norm), a.rk.data(), dkr.data(), G(lp.k_norm), T * c.n_kv, HD);
      } else {
        norm_backward(dq.data(), a.qraw.data(), P(w, lp.q_norm), a.rq.data(), dqr.data(), G(lp.q_norm), T, qd);
        norm_backward(dk.data(), a.kraw.data(), P(w, lp.k_norm), a.rk.data(), dkr.data(), G(lp.k_norm), T, kd);
      }
      const S* src = qwen ? a.n1.data() : xin;
      b_->linear(LinearProduct::BackwardWeight, dqr.data(), src, G(lp.q), true, T, qd, H, true);
      b_->linear(LinearProduct::BackwardWeight, dkr.data(), src, G(lp.k), true, T, kd, H, true);
      b_->linear(LinearProduct::BackwardWeight, dv.data(), src, G(lp.v), true, T, kd, H, true);
      float* dsrc = qwen ? acc.data() : dx.data();  // fp32: q, k, v input gradients summed
      b_->linear(LinearProduct::BackwardInput, dqr.data(), P(w, lp.q), dsrc, true, T, qd, H, !qwen);
      b_->linear(LinearProduct::BackwardInput, dkr.data(), P(w, lp.k), dsrc, true, T, kd, H, true);
      b_->linear(LinearProduct::BackwardInput, dv.data(), P(w, lp.v), dsrc, true, T, kd, H, true);
      if (qwen) {
        to_s(acc.data(), resT, TH);
        norm_backward(resT, xin, P(w, lp.in_norm), a.r1.data(), tmpH, G(lp.in_norm), T, H);
        add_into(dx.data(), tmpH, TH, false);
      }
      grads_final_from(layer_begin(l));
    }
    b_->launch(EmbeddingScatter<float>{dx.data(), tok_.data(), G(L_.embed), T, H, kEngineBlock});
  }

  std::unique_ptr<B> b_;
  model::ModelConfig cfg_;
  model::Layout L_;
  bool ckpt_ = false;
  Buf<float> master_, grads_, m_, v_, cos_, sin_;
  Buf<S> wc_own_, ref_;
  int64_t step_ = 0, act_peak_ = 0, cur_T_ = 0;
  // batch
  Buf<int32_t> tok_, pos_;
  Buf<int64_t> off_;
  std::vector<int64_t> off_host_;
  std::vector<int32_t> tok_host_;
  // activations
  std::vector<Buf<S>> xs_, scratch_;
  std::vector<LayerBufs> acts_;
  Buf<S> xf_;
  Buf<float> rf_;
  // lm-head chunk
  Buf<S> xc_, dxc_, dl_t_;
  Buf<float> logits_, dlogits_, lpc_, gc_, lse_;
  Buf<int32_t> idx_, tgt_;
  // backward's gradients and the loss inputs, kept across calls
  struct {
    Buf<float> dx, dh, acc;
    Buf<S> dact, dg, du, datt, dq, dk, dv, dqr, dkr;
  } bw_;
  struct {
    Buf<float> lp, old, ref, adv, g;
    Buf<uint8_t> mask;
  } loss_;
  std::unique_ptr<model::Engine> shadow_;
  model::Engine::Bf16Use bf16_;
  std::unique_ptr<ZeroShard<B, S>> zero_;  // ZeRO-1's shard, after zero_init
  // paged generation: the pools [n_layers][blocks, block_size, n_kv, head_dim] (storage S) and
  // the step's buffers (freed with the pools)
  struct {
    Buf<S> k, v;
    int64_t blocks = 0, block_size = 0;
  } kv_;
  struct PagedBufs {
    Buf<int32_t> tok, pos, seq, table, idx, srows, top_k, token;
    Buf<int64_t> slot, step;
    Buf<uint64_t> stream;
    Buf<S> x0, x1, rows, rows_n;
    Buf<float> ws, rstd, logits, slogits, temp, top_p, min_p, logp;
    LayerBufs A;
  } pg_;
};

}  // namespace gpu
}  // namespace murphy
