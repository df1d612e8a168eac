// The decoder: forward with saved activations, backward through every op, the chunked
// log-prob + GRPO/KL (or cross-entropy) loss, AdamW with fp32 master weights, scoring.
// Formulas of the two architectures: murphy/model/model.h; of each op: murphy/model/ops.h.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../cpu/threads.h"
#include "murphy/adamw.h"
#include "murphy/convert.h"
#include "murphy/grpo_loss.h"
#include "murphy/logprob.h"
#include "murphy/model/model.h"
#include "gemm.h"
#include "gemm_driver.h"
#include "model_internal.h"
#include "weights.h"

namespace murphy {
namespace model {

void resize(Vec& v, int64_t n, const char* what) {
  if (int64_t(v.size()) != n) checked_resize(v, n, what);
}

// At least n elements, never fewer: for buffers that every use writes before it reads, and whose
// size changes from call to call (no zero-fill, no fresh pages when a call needs less).
void grow(Vec& v, int64_t n, const char* what) {
  if (int64_t(v.size()) < n) checked_resize(v, n, what);
}

void PackedAttn::run(int64_t layer, const float* q, const float* k, const float* v, float* out, float* lse) {
  AttnArgs a;
  a.T = b.T, a.n_heads = c.n_heads, a.n_kv = c.n_kv, a.head_dim = c.head_dim;
  a.seq_offsets = b.seq_offsets, a.n_seqs = b.n_seqs;
  a.scale = float(1.0 / std::sqrt(double(c.head_dim)));
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
  attention_forward_cpu(a);
  if (keep_k) {
    const size_t n = size_t(b.T * c.n_kv * c.head_dim);
    (*keep_k)[size_t(layer)].assign(k, k + n);
    (*keep_v)[size_t(layer)].assign(v, v + n);
  }
}

// ------------------------------------------------------------------------------------
// construction, I/O

void Engine::init_layout(const ModelConfig& c) {
  cfg_ = c;
  layout_ = make_layout(c);
  checked_resize(w_, layout_.total, "the model weights");
  checked_resize(rope_cos_, c.max_pos * (c.head_dim / 2), "the rotary tables");
  checked_resize(rope_sin_, c.max_pos * (c.head_dim / 2), "the rotary tables");
  rope_table_init(rope_cos_.data(), rope_sin_.data(), c.max_pos, c.head_dim, c.rope_theta);
  rope_.head_dim = c.head_dim;
  rope_.max_pos = c.max_pos;
  rope_.cos = rope_cos_.data();
  rope_.sin = rope_sin_.data();
}

Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::load(const std::string& dir) {
  const std::string cfg_path = dir + "/config.json";
  ModelConfig c = parse_config(read_file_text(cfg_path), cfg_path);
  std::unique_ptr<Engine> e(new Engine());
  e->init_layout(c);
  load_weights(dir, e->layout_, c, e->w_.data());
  return e;
}

std::unique_ptr<Engine> Engine::random(const ModelConfig& c, uint64_t seed, float init_std) {
  std::unique_ptr<Engine> e(new Engine());
  e->init_layout(c);
  for (size_t pi = 0; pi < e->layout_.params.size(); ++pi) {
    const ParamInfo& p = e->layout_.params[pi];
    float* w = e->w_.data() + p.offset;
    if (p.shape.size() == 1) {
      std::fill(w, w + p.numel, 1.0f);  // norm gains start at one, as in transformers
      continue;
    }
    const uint64_t s = seed * 0x9e3779b97f4a7c15ull + pi;
    parallel_for(p.numel, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) {  // Box-Muller on counter-based uniform bits
        const double u1 = (double(hash_u32(s, uint64_t(2 * i))) + 1.0) / 4294967297.0;
        const double u2 = double(hash_u32(s, uint64_t(2 * i + 1))) / 4294967296.0;
        w[i] = float(init_std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
      }
    });
  }
  return e;
}

std::vector<SavedFile> Engine::save(const std::string& dir, FileDType dtype, int64_t max_shard_bytes) const {
  return save_weights(dir, layout_, w_.data(), dtype, max_shard_bytes);
}

Engine::Memory Engine::memory() const {
  Memory m;
  m.weights = int64_t(w_.size()) * 4 + int64_t(wb_.size()) * 2;  // fp32 master + the bf16 copy
  m.grads = int64_t(g_.size()) * 4;
  m.optimizer = int64_t(m_.size() + v_.size()) * 4;
  m.reference = int64_t(ref_.size()) * 4;
  m.activations_peak = act_peak_;
  m.matmul_cache = int64_t(gemm_driver::cached_buffer_bytes());
  return m;
}

void Engine::make_reference() {
  checked_resize(ref_, int64_t(w_.size()), "the frozen reference copy");
  std::memcpy(ref_.data(), w_.data(), w_.size() * 4);
}

void Engine::zero_grad() {
  if (g_.empty()) checked_resize(g_, int64_t(w_.size()), "the gradients");
  else std::fill(g_.begin(), g_.end(), 0.0f);
}

void check_packed_batch(const ModelConfig& cfg_, const PackedBatch& b) {
  if (b.T <= 0) throw Error("batch: no tokens");
  if (b.n_seqs < 1 || !b.seq_offsets) throw Error("batch: seqOffsets must hold at least [0, nTokens]");
  if (b.seq_offsets[0] != 0 || b.seq_offsets[b.n_seqs] != b.T)
    throw Error("batch: seqOffsets must start at 0 and end at the number of tokens (" + std::to_string(b.T) + ")");
  for (int64_t s = 0; s < b.n_seqs; ++s)
    if (b.seq_offsets[s + 1] <= b.seq_offsets[s])
      throw Error("batch: sequence " + std::to_string(s) + " is empty or seqOffsets is not increasing");
  for (int64_t t = 0; t < b.T; ++t) {
    if (b.tokens[t] < 0 || int64_t(b.tokens[t]) >= cfg_.vocab)
      throw Error("batch: token id " + std::to_string(b.tokens[t]) + " at position " + std::to_string(t) +
                  " is outside the vocabulary [0, " + std::to_string(cfg_.vocab) + ") of config.json's vocab_size");
    if (b.positions[t] < 0 || int64_t(b.positions[t]) >= cfg_.max_pos)
      throw Error("batch: position id " + std::to_string(b.positions[t]) + " at token " + std::to_string(t) +
                  " is beyond max_position_embeddings (" + std::to_string(cfg_.max_pos) + ")");
  }
}

void Engine::check_batch(const PackedBatch& b) const { check_packed_batch(cfg_, b); }

// ------------------------------------------------------------------------------------
// forward

namespace {


// One decoder layer on T rows: x [T, H] in, x out (in place); activations into A.
void layer_forward(const Fwd& f, int64_t l, float* x, const int32_t* pos, int64_t T, LayerActs& A, AttnHook& attn) {
  const ModelConfig& c = f.c;
  const LayerParams& lp = f.L.layers[size_t(l)];
  const int64_t H = c.hidden, HD = c.head_dim, qd = c.n_heads * HD, kd = c.n_kv * HD, I = c.intermediate;
  const float eps = float(c.rms_eps);
  const bool qwen = c.arch == Arch::Qwen3;
  resize(A.xin, T * H, "activations");
  std::memcpy(A.xin.data(), x, size_t(T * H) * 4);
  const float* src = A.xin.data();
  if (qwen) {
    resize(A.n1, T * H, "activations");
    resize(A.r1, T, "activations");
    rmsnorm_forward_cpu(x, f.P(lp.in_norm), A.n1.data(), A.r1.data(), T, H, eps);
    src = A.n1.data();
  }
  resize(A.qraw, T * qd, "activations");
  resize(A.kraw, T * kd, "activations");
  resize(A.v, T * kd, "activations");
  f.linear(lp.q, src, A.qraw.data(), T, qd, H);
  f.linear(lp.k, src, A.kraw.data(), T, kd, H);
  f.linear(lp.v, src, A.v.data(), T, kd, H);
  resize(A.q, T * qd, "activations");
  resize(A.k, T * kd, "activations");
  if (qwen) {  // per-head norm over head_dim
    resize(A.rq, T * c.n_heads, "activations");
    resize(A.rk, T * c.n_kv, "activations");
    rmsnorm_forward_cpu(A.qraw.data(), f.P(lp.q_norm), A.q.data(), A.rq.data(), T * c.n_heads, HD, eps);
    rmsnorm_forward_cpu(A.kraw.data(), f.P(lp.k_norm), A.k.data(), A.rk.data(), T * c.n_kv, HD, eps);
  } else {  // over the whole projection
    resize(A.rq, T, "activations");
    resize(A.rk, T, "activations");
    rmsnorm_forward_cpu(A.qraw.data(), f.P(lp.q_norm), A.q.data(), A.rq.data(), T, qd, eps);
    rmsnorm_forward_cpu(A.kraw.data(), f.P(lp.k_norm), A.k.data(), A.rk.data(), T, kd, eps);
  }
  rope_cpu(A.q.data(), pos, T, c.n_heads, f.rope, false);
  rope_cpu(A.k.data(), pos, T, c.n_kv, f.rope, false);
  resize(A.att, T * qd, "activations");
  resize(A.lse, T * c.n_heads, "activations");
  attn.run(l, A.q.data(), A.k.data(), A.v.data(), A.att.data(), A.lse.data());
  resize(A.a, T * H, "activations");
  f.linear(lp.o, A.att.data(), A.a.data(), T, H, qd);
  resize(A.h, T * H, "activations");
  if (qwen) {
    for (int64_t i = 0; i < T * H; ++i) A.h[size_t(i)] = x[i] + A.a[size_t(i)];
  } else {
    resize(A.ra, T, "activations");
    rmsnorm_forward_cpu(A.a.data(), f.P(lp.post_attn_norm), A.h.data(), A.ra.data(), T, H, eps);
    add_inplace(A.h.data(), x, T * H);
  }
  const float* min = A.h.data();
  if (qwen) {
    resize(A.n2, T * H, "activations");
    resize(A.r2, T, "activations");
    rmsnorm_forward_cpu(A.h.data(), f.P(lp.post_attn_norm), A.n2.data(), A.r2.data(), T, H, eps);
    min = A.n2.data();
  }
  resize(A.gate, T * I, "activations");
  resize(A.up, T * I, "activations");
  resize(A.act, T * I, "activations");
  f.linear(lp.gate, min, A.gate.data(), T, I, H);
  f.linear(lp.up, min, A.up.data(), T, I, H);
  swiglu_forward_cpu(A.gate.data(), A.up.data(), A.act.data(), T * I);
  resize(A.m, T * H, "activations");
  f.linear(lp.down, A.act.data(), A.m.data(), T, H, I);
  if (qwen) {
    std::memcpy(x, A.h.data(), size_t(T * H) * 4);
    add_inplace(x, A.m.data(), T * H);
  } else {
    resize(A.rm, T, "activations");
    rmsnorm_forward_cpu(A.m.data(), f.P(lp.post_ff_norm), x, A.rm.data(), T, H, eps);
    add_inplace(x, A.h.data(), T * H);
  }
}

}  // namespace


void Engine::forward(const float* w, const PackedBatch& b, Acts& a, bool keep, const uint16_t* wb) const {
  Fwd f{cfg_, layout_, w, rope_, wb};
  PackedAttn attn(cfg_, b);
  run_forward(f, b.tokens, b.positions, b.T, attn, a, keep);
}

void run_forward(const Fwd& f, const int32_t* tokens, const int32_t* pos, int64_t T, AttnHook& attn, Acts& A,
                 bool keep) {
  const ModelConfig& c = f.c;
  const int64_t H = c.hidden;
  A.T = T;
  A.layers.resize(keep ? size_t(c.n_layers) : 1);
  resize(A.x, T * H, "activations");
  embedding_forward_cpu(f.P(f.L.embed), tokens, A.x.data(), T, H);
  for (int64_t l = 0; l < c.n_layers; ++l)
    layer_forward(f, l, A.x.data(), pos, T, A.layers[keep ? size_t(l) : 0], attn);
  resize(A.xf, T * H, "activations");
  resize(A.rf, T, "activations");
  rmsnorm_forward_cpu(A.x.data(), f.P(f.L.final_norm), A.xf.data(), A.rf.data(), T, H, float(c.rms_eps));
}

// ------------------------------------------------------------------------------------
// backward

void Engine::backward(const PackedBatch& b, Acts& A, float* dxf) {
  const ModelConfig& c = cfg_;
  const Layout& L = layout_;
  const int64_t T = b.T, H = c.hidden, HD = c.head_dim, qd = c.n_heads * HD, kd = c.n_kv * HD, I = c.intermediate;
  const bool qwen = c.arch == Arch::Qwen3;
  auto P = [&](int idx) { return w_.data() + L.params[size_t(idx)].offset; };
  auto G = [&](int idx) { return g_.data() + L.params[size_t(idx)].offset; };
  TrainScratch& S = *scratch_;
  const char* what = "the backward pass's buffers";
  for (Vec* v : {&S.dx, &S.dh, &S.tmp_h}) checked_resize(*v, T * H, what);
  for (Vec* v : {&S.dact, &S.dg, &S.du}) checked_resize(*v, T * I, what);
  for (Vec* v : {&S.datt, &S.dq, &S.dqr}) checked_resize(*v, T * qd, what);
  for (Vec* v : {&S.dk, &S.dv, &S.dkr}) checked_resize(*v, T * kd, what);
  Vec &dx = S.dx, &dh = S.dh, &tmpH = S.tmp_h, &dact = S.dact, &dg = S.dg, &du = S.du, &datt = S.datt, &dq = S.dq,
      &dk = S.dk, &dv = S.dv, &dqr = S.dqr, &dkr = S.dkr;
  rmsnorm_backward_cpu(dxf, A.x.data(), P(L.final_norm), A.rf.data(), dx.data(), G(L.final_norm), T, H, false);
  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    const LayerParams& lp = L.layers[size_t(l)];
    LayerActs& a = A.layers[size_t(l)];
    // x_out = h + [norm](m):  dh = dx (+ MLP input grad below)
    std::memcpy(dh.data(), dx.data(), size_t(T * H) * 4);
    const float* dm = dx.data();
    if (!qwen) {
      rmsnorm_backward_cpu(dx.data(), a.m.data(), P(lp.post_ff_norm), a.rm.data(), tmpH.data(), G(lp.post_ff_norm), T, H,
                       false);
      dm = tmpH.data();
    }
    linear_backward_weight(dm, a.act.data(), G(lp.down), T, H, I);
    linear_backward_input(dm, P(lp.down), dact.data(), T, H, I, false);
    swiglu_backward_cpu(dact.data(), a.gate.data(), a.up.data(), dg.data(), du.data(), T * I);
    const float* min = qwen ? a.n2.data() : a.h.data();
    linear_backward_weight(dg.data(), min, G(lp.gate), T, I, H);
    linear_backward_weight(du.data(), min, G(lp.up), T, I, H);
    if (qwen) {
      linear_backward_input(dg.data(), P(lp.gate), tmpH.data(), T, I, H, false);
      linear_backward_input(du.data(), P(lp.up), tmpH.data(), T, I, H, true);
      rmsnorm_backward_cpu(tmpH.data(), a.h.data(), P(lp.post_attn_norm), a.r2.data(), dh.data(), G(lp.post_attn_norm), T,
                       H, true);
    } else {
      linear_backward_input(dg.data(), P(lp.gate), dh.data(), T, I, H, true);
      linear_backward_input(du.data(), P(lp.up), dh.data(), T, I, H, true);
    }
    // h = xin + [norm](a):  dxin = dh (+ attention input grad below)
    std::memcpy(dx.data(), dh.data(), size_t(T * H) * 4);
    const float* da = dh.data();
    if (!qwen) {
      rmsnorm_backward_cpu(dh.data(), a.a.data(), P(lp.post_attn_norm), a.ra.data(), tmpH.data(), G(lp.post_attn_norm), T,
                       H, false);
      da = tmpH.data();
    }
    linear_backward_weight(da, a.att.data(), G(lp.o), T, H, qd);
    linear_backward_input(da, P(lp.o), datt.data(), T, H, qd, false);
    AttnArgs aa;
    aa.T = T, aa.n_heads = c.n_heads, aa.n_kv = c.n_kv, aa.head_dim = HD;
    aa.seq_offsets = b.seq_offsets, aa.n_seqs = b.n_seqs;
    aa.scale = float(1.0 / std::sqrt(double(HD)));
    aa.q = a.q.data(), aa.k = a.k.data(), aa.v = a.v.data(), aa.out = a.att.data(), aa.lse = a.lse.data();
    aa.dout = datt.data(), aa.dq = dq.data(), aa.dk = dk.data(), aa.dv = dv.data();
    attention_backward_cpu(aa);
    rope_cpu(dq.data(), b.positions, T, c.n_heads, rope_, true);
    rope_cpu(dk.data(), b.positions, T, c.n_kv, rope_, true);
    const float eps_unused = 0;
    (void)eps_unused;
    if (qwen) {
      rmsnorm_backward_cpu(dq.data(), a.qraw.data(), P(lp.q_norm), a.rq.data(), dqr.data(), G(lp.q_norm), T * c.n_heads,
                       HD, false);
      rmsnorm_backward_cpu(dk.data(), a.kraw.data(), P(lp.k_norm), a.rk.data(), dkr.data(), G(lp.k_norm), T * c.n_kv, HD,
                       false);
    } else {
      rmsnorm_backward_cpu(dq.data(), a.qraw.data(), P(lp.q_norm), a.rq.data(), dqr.data(), G(lp.q_norm), T, qd, false);
      rmsnorm_backward_cpu(dk.data(), a.kraw.data(), P(lp.k_norm), a.rk.data(), dkr.data(), G(lp.k_norm), T, kd, false);
    }
    const float* src = qwen ? a.n1.data() : a.xin.data();
    linear_backward_weight(dqr.data(), src, G(lp.q), T, qd, H);
    linear_backward_weight(dkr.data(), src, G(lp.k), T, kd, H);
    linear_backward_weight(dv.data(), src, G(lp.v), T, kd, H);
    float* dsrc = qwen ? tmpH.data() : dx.data();
    linear_backward_input(dqr.data(), P(lp.q), dsrc, T, qd, H, !qwen);
    linear_backward_input(dkr.data(), P(lp.k), dsrc, T, kd, H, true);
    linear_backward_input(dv.data(), P(lp.v), dsrc, T, kd, H, true);
    if (qwen)
      rmsnorm_backward_cpu(tmpH.data(), a.xin.data(), P(lp.in_norm), a.r1.data(), dx.data(), G(lp.in_norm), T, H, true);
  }
  embedding_backward_cpu(dx.data(), b.tokens, G(L.embed), T, H);
}

// ------------------------------------------------------------------------------------
// loss, training step, scoring

// rows of xf whose logits are needed: row t-1 predicts token t (t not first in its sequence)
std::vector<int64_t> first_flags(const PackedBatch& b) {
  std::vector<int64_t> first(static_cast<size_t>(b.T), 0);
  for (int64_t s = 0; s < b.n_seqs; ++s) first[size_t(b.seq_offsets[s])] = 1;
  return first;
}

int64_t chunk_rows(int64_t want, int64_t vocab) {
  const int64_t cap = std::max<int64_t>(1, (int64_t(16) << 20) / vocab);  // <= 64 MiB of logits
  return std::max<int64_t>(1, std::min(want, cap));
}


TrainStats Engine::accumulate(const TrainInputs& in, const TrainOptions& opt) {
  const PackedBatch& b = in.batch;
  check_batch(b);
  const ModelConfig& c = cfg_;
  const int64_t T = b.T, H = c.hidden, V = c.vocab;
  if (g_.empty()) zero_grad();
  const bool need_ref = !opt.cross_entropy && opt.loss.beta != 0.0f;
  Vec ref_buf;
  const float* ref = in.ref_logp;
  if (need_ref && !ref) {
    if (!has_reference())
      throw Error("train step: beta > 0 needs reference log-probs (pass refLogp, or create the reference copy)");
    checked_resize(ref_buf, T, "reference log-probs");
    score(b, opt.temperature, true, ref_buf.data());
    ref = ref_buf.data();
  }
  if (!scratch_) scratch_.reset(new TrainScratch());
  TrainScratch& S = *scratch_;
  Acts& A = S.acts;
  forward(w_.data(), b, A, true, bf16_.forward ? bf16_weights() : nullptr);
  const std::vector<int64_t> first = first_flags(b);
  std::vector<int64_t> rows;  // token indices t in the loss
  std::vector<uint8_t> mask(static_cast<size_t>(T), 0);
  for (int64_t t = 0; t < T; ++t)
    if (!first[size_t(t)] && (!in.mask || in.mask[t])) {
      rows.push_back(t);
      mask[size_t(t)] = 1;
    }
  const int64_t n = int64_t(rows.size());
  const float* Wh = w_.data() + layout_.params[size_t(layout_.lm_head >= 0 ? layout_.lm_head : layout_.embed)].offset;
  float* Gh = g_.data() + layout_.params[size_t(layout_.lm_head >= 0 ? layout_.lm_head : layout_.embed)].offset;
  // The head's logits are made chunk by chunk (C rows, <= 64 MiB): pass 1 takes the log-probs,
  // the loss then needs all of them, pass 2 takes each chunk's gradient. The first `kept` chunks
  // keep their logits between the passes (a slot each, within opt.keep_logits_bytes); the others
  // share one slot and are computed again in pass 2 (the product X W^T, one of the head's four),
  // except the one the shared slot still holds. When every chunk is kept (`all`), X holds every
  // row and pass 1 makes the logits of all chunks of more than kSkinnyRows rows in one product
  // (W packed once, not once a chunk): the packed path gives each row the same bits however the
  // rows are split into calls of more than kSkinnyRows rows (gemm.h). Kept, merged or computed
  // again, the logits are the same bits, so the step's result does not depend on the budget.
  const int64_t C = chunk_rows(opt.chunk_tokens, V);
  const int64_t n_chunks = (n + C - 1) / C;
  const int64_t kept = std::min(n_chunks, std::max<int64_t>(0, opt.keep_logits_bytes) / (C * V * 4));
  const bool all = n > 0 && kept == n_chunks;
  const int64_t slots = std::max<int64_t>(1, kept + (kept < n_chunks ? 1 : 0));
  const int64_t xrows = all ? n : C;  // rows X, tgt and lp_c hold
  const char* what = "the loss's buffers";
  checked_resize(S.x, xrows * H, what);
  checked_resize(S.dx_chunk, C * H, what);
  grow(S.logits, slots * C * V, what);  // (written by the head's product before any read)
  checked_resize(S.lp_chunk, xrows, what);
  checked_resize(S.g_chunk, C, what);
  for (Vec* v : {&S.logp, &S.glogp}) checked_resize(*v, T, what);
  checked_resize(S.lse, n, what);
  checked_resize(S.dxf, T * H, what);
  S.tgt.assign(static_cast<size_t>(xrows), 0);
  Vec &X = S.x, &dX = S.dx_chunk, &logp = S.logp, &lse = S.lse, &lp_c = S.lp_chunk,
      &glogp = S.glogp, &dxf = S.dxf, &g_c = S.g_chunk;
  std::vector<int32_t>& tgt = S.tgt;
  act_peak_ = std::max(act_peak_, A.bytes() + int64_t(slots * C * V + (xrows + C) * H) * 4);
  // chunk ci's logits: its own slot when kept, else the shared one (slot `kept`); kept slots
  // are in row order, so with `all` they are one [n, V] array
  auto chunk_logits = [&](int64_t ci) { return S.logits.data() + std::min(ci, kept) * C * V; };
  // rows [r0, r0 + cn) of the loss: their inputs and targets into X and tgt, from row `at`
  auto gather = [&](int64_t r0, int64_t cn, int64_t at) {
    for (int64_t i = 0; i < cn; ++i) {
      const int64_t t = rows[size_t(r0 + i)];
      std::memcpy(X.data() + (at + i) * H, A.xf.data() + (t - 1) * H, size_t(H) * 4);
      tgt[size_t(at + i)] = b.tokens[t];
    }
  };
  // the log-probs of rows [r0, r0 + cn), whose logits and targets start at `z` and tgt[at]
  auto log_probs = [&](int64_t r0, int64_t cn, const float* z, int64_t at) {
    LogprobForwardArgs fa;
    fa.logits = z, fa.dtype = DType::F32, fa.n_rows = cn, fa.vocab = V, fa.targets = tgt.data() + at;
    fa.temperature = opt.temperature, fa.logp = lp_c.data() + at, fa.lse = lse.data() + r0;
    logprob_forward_cpu(fa);
    for (int64_t i = 0; i < cn; ++i) logp[size_t(rows[size_t(r0 + i)])] = lp_c[size_t(at + i)];
  };
  int64_t shared_holds = -1;  // the chunk whose logits the shared slot holds
  // pass 1: log-probs of the active tokens
  if (all) {
    gather(0, n, 0);
    // the chunks of more than kSkinnyRows rows in one product (all of them but a last short one)
    const int64_t last = n - (n_chunks - 1) * C;
    const int64_t merged = C <= kSkinnyRows ? 0 : last > kSkinnyRows ? n : (n_chunks - 1) * C;
    if (merged > 0) linear_forward(X.data(), Wh, S.logits.data(), merged, V, H, false);
    for (int64_t r0 = merged; r0 < n; r0 += C)
      linear_forward(X.data() + r0 * H, Wh, S.logits.data() + r0 * V, std::min(C, n - r0), V, H, false);
    log_probs(0, n, S.logits.data(), 0);
  } else {
    for (int64_t r0 = 0; r0 < n; r0 += C) {
      const int64_t cn = std::min(C, n - r0), ci = r0 / C;
      gather(r0, cn, 0);
      float* logits = chunk_logits(ci);
      linear_forward(X.data(), Wh, logits, cn, V, H, false);
      if (ci >= kept) shared_holds = ci;
      log_probs(r0, cn, logits, 0);
    }
  }
  // the loss and dL/dlogp
  TrainStats st;
  st.n_tokens = T;
  st.n_active = n;
  double sum_lp = 0;
  for (int64_t t : rows) sum_lp += logp[size_t(t)];
  st.mean_logp = n ? sum_lp / double(n) : 0.0;
  if (opt.cross_entropy) {
    st.loss = n ? -st.mean_logp : 0.0;
    for (int64_t t : rows) glogp[size_t(t)] = -1.0f / float(n);
    st.grpo.n_active = n;
    st.grpo.loss = st.loss;
  } else {
    if (!in.advantages) throw Error("train step: advantages are required for the GRPO loss");
    GrpoLossArgs la = opt.loss;
    // no old log-probs: this pass's own, as constants (on-policy: every ratio exactly 1)
    la.n_tokens = T, la.logp = logp.data(), la.old_logp = in.old_logp ? in.old_logp : logp.data();
    la.ref_logp = need_ref ? ref : nullptr;
    la.advantages = in.advantages, la.mask = mask.data(), la.seq_offsets = b.seq_offsets, la.n_seqs = b.n_seqs;
    la.grad_logp = glogp.data(), la.token_loss = nullptr;
    st.grpo = grpo_loss_cpu(la);
    st.loss = st.grpo.loss;
  }
  // pass 2: each chunk's logits (kept, held by the shared slot, or computed again), dlogits,
  // back into xf and the head
  for (int64_t r0 = 0; r0 < n; r0 += C) {
    const int64_t cn = std::min(C, n - r0), ci = r0 / C;
    bool any = false;
    for (int64_t i = 0; i < cn; ++i) {
      g_c[size_t(i)] = glogp[size_t(rows[size_t(r0 + i)])] * opt.grad_scale;
      any |= g_c[size_t(i)] != 0.0f;
    }
    if (!any) continue;
    if (!all && n > C) gather(r0, cn, 0);  // (a single chunk's rows are still in X; with `all`, every chunk's)
    const int64_t at = all ? r0 : 0;  // the chunk's first row in X and tgt
    float* logits = chunk_logits(ci);
    if (ci >= kept && shared_holds != ci) {
      linear_forward(X.data(), Wh, logits, cn, V, H, false);
      shared_holds = ci;
    }
    // dlogits in place of the logits (they are not read again; the shared slot then holds none)
    LogprobBackwardArgs ba;
    ba.logits = logits, ba.dtype = DType::F32, ba.n_rows = cn, ba.vocab = V, ba.targets = tgt.data() + at;
    ba.temperature = opt.temperature, ba.lse = lse.data() + r0, ba.grad_logp = g_c.data();
    ba.grad_logits = logits;
    logprob_backward_cpu(ba);
    if (ci >= kept) shared_holds = -1;
    const float* dlogits = logits;
    linear_backward_weight(dlogits, X.data() + at * H, Gh, cn, V, H);
    linear_backward_input(dlogits, Wh, dX.data(), cn, V, H, false);
    for (int64_t i = 0; i < cn; ++i) {
      float* dst = dxf.data() + (rows[size_t(r0 + i)] - 1) * H;
      const float* src = dX.data() + i * H;
      for (int64_t k = 0; k < H; ++k) dst[k] += src[k];
    }
  }
  backward(b, A, dxf.data());
  return st;
}

void Engine::ensure_moments() {
  if (m_.empty()) {
    checked_resize(m_, int64_t(w_.size()), "the AdamW moments");
    checked_resize(v_, int64_t(w_.size()), "the AdamW moments");
  }
}

void Engine::set_bf16(const Bf16Use& u) {
  bf16_ = u;
  if (!u.generate && !u.forward) {
    BigHalfs().swap(wb_);
    wb_fresh_ = false;
  }
}

const uint16_t* Engine::bf16_weights() {
  if (wb_.empty()) {
    try {
      wb_.resize(w_.size());
    } catch (const std::bad_alloc&) {
      throw Error("model: out of memory allocating the bf16 weights (" + std::to_string(w_.size() * 2) + " bytes)",
                  ErrorCode::NoMem);
    }
    wb_fresh_ = false;
  }
  if (!wb_fresh_) {
    f32_to_bf16_cpu(w_.data(), wb_.data(), int64_t(w_.size()));
    wb_fresh_ = true;
  }
  return wb_.data();
}

AdamWResult Engine::optimizer_step(const AdamWOptions& o) {
  if (g_.empty()) zero_grad();
  ensure_moments();
  std::vector<AdamWTensor> ts;
  for (const ParamInfo& p : layout_.params) {
    AdamWTensor t;
    t.param = w_.data() + p.offset;
    t.grad = g_.data() + p.offset;
    t.m = m_.data() + p.offset;
    t.v = v_.data() + p.offset;
    t.numel = p.numel;
    t.decay = p.decay;
    t.param_bf16 = wb_.empty() ? nullptr : wb_.data() + p.offset;  // the bf16 copy, written in the same pass
    ts.push_back(t);
  }
  AdamWArgs a;
  a.tensors = ts.data();
  a.n_tensors = int64_t(ts.size());
  a.lr = o.lr, a.beta1 = o.beta1, a.beta2 = o.beta2, a.eps = o.eps, a.weight_decay = o.weight_decay;
  a.step = step_ + 1;
  a.max_grad_norm = o.max_grad_norm;
  const bool was_fresh = wb_fresh_;
  AdamWResult r = adamw_cpu(a);
  wb_fresh_ = !wb_.empty() && (r.skipped ? was_fresh : true);
  if (!r.skipped) ++step_;
  zero_grad();
  return r;
}

void Engine::score(const PackedBatch& b, float temperature, bool reference, float* out) {
  check_batch(b);
  if (reference && !has_reference()) throw Error("score: no reference copy (create it first)");
  const int64_t T = b.T, H = cfg_.hidden, V = cfg_.vocab;
  ScoreScratch& S = score_scratch();
  Acts& A = S.acts;
  forward(reference ? ref_.data() : w_.data(), b, A, false, !reference && bf16_.forward ? bf16_weights() : nullptr);
  const float* w = reference ? ref_.data() : w_.data();
  const float* Wh = w + layout_.params[size_t(layout_.lm_head >= 0 ? layout_.lm_head : layout_.embed)].offset;
  const std::vector<int64_t> first = first_flags(b);
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < T; ++t) {
    out[t] = 0.0f;
    if (!first[size_t(t)]) rows.push_back(t);
  }
  const int64_t n = int64_t(rows.size()), C = chunk_rows(256, V);
  const char* what = "the scoring buffers";
  resize(S.x, C * H, what);
  resize(S.logits, C * V, what);
  resize(S.lp, C, what);
  resize(S.lse, C, what);
  S.tgt.resize(static_cast<size_t>(C));
  Vec &X = S.x, &logits = S.logits, &lp = S.lp, &lse = S.lse;
  std::vector<int32_t>& tgt = S.tgt;
  act_peak_ = std::max(act_peak_, A.bytes() + int64_t(C * V) * 4);
  for (int64_t r0 = 0; r0 < n; r0 += C) {
    const int64_t cn = std::min(C, n - r0);
    for (int64_t i = 0; i < cn; ++i) {
      const int64_t t = rows[size_t(r0 + i)];
      std::memcpy(X.data() + i * H, A.xf.data() + (t - 1) * H, size_t(H) * 4);
      tgt[size_t(i)] = b.tokens[t];
    }
    linear_forward(X.data(), Wh, logits.data(), cn, V, H, false);
    LogprobForwardArgs fa;
    fa.logits = logits.data(), fa.dtype = DType::F32, fa.n_rows = cn, fa.vocab = V, fa.targets = tgt.data();
    fa.temperature = temperature, fa.logp = lp.data(), fa.lse = lse.data();
    logprob_forward_cpu(fa);
    for (int64_t i = 0; i < cn; ++i) out[rows[size_t(r0 + i)]] = lp[size_t(i)];
  }
}

ScoreScratch& Engine::score_scratch() {
  if (!score_scratch_) score_scratch_.reset(new ScoreScratch());
  return *score_scratch_;
}

void Engine::logits(const PackedBatch& b, float* out) {
  check_batch(b);
  Acts& A = score_scratch().acts;
  forward(w_.data(), b, A, false, bf16_.forward ? bf16_weights() : nullptr);
  const float* Wh = w_.data() + layout_.params[size_t(layout_.lm_head >= 0 ? layout_.lm_head : layout_.embed)].offset;
  linear_forward(A.xf.data(), Wh, out, b.T, cfg_.vocab, cfg_.hidden, false);
}

}  // namespace model
}  // namespace murphy
