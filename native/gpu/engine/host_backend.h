// HostBackend: the device engine's backend on the CPU ("emulate", every build). Memory is
// host memory; kernels run through the harness (run_on_host: the GPU's code, block by block);
// GEMMs go through native/model's linear ops with the layout semantics of gemm_plan.h's three
// products (bf16 operands widened to fp32, the result rounded to the output type after the
// fp32 accumulation, as cuBLASLt with fp32 compute does); attention through the flash-style
// kernels of native/gpu/attention.h run by the harness (MURPHY_ENGINE_ATTN_KERNELS: when that
// header is in the tree), else native/model's packed CPU attention; log-probs, GRPO loss and
// AdamW through native/cpu's ops. So every line of DeviceEngine runs in npm test without a GPU.
#pragma once
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "../gemm_plan.h"
#include "../kernels/decode_shape.h"
#include "../kernels/harness.h"
#include "../kernels/paged_attention.h"
#include "../kernels/sampling.h"
#include "engine_kernels.h"
#include "murphy/adamw.h"
#include "murphy/grpo_loss.h"
#include "murphy/logprob.h"
#include "murphy/model/ops.h"

#if __has_include("../attention.h")
#include "../attention.h"
#define MURPHY_ENGINE_ATTN_KERNELS 1
#endif

namespace murphy {
namespace gpu {

// Attention's shape and sequence offsets for one packed batch (both backends).
struct AttnBatch {
  int64_t T = 0, n_heads = 0, n_kv = 0, head_dim = 0;
  float scale = 1.0f;
  const int64_t* seq_offsets_host = nullptr;  // [n_seqs + 1]
  const int64_t* seq_offsets_dev = nullptr;   // the same on the device
  int64_t n_seqs = 0;
};

#ifdef MURPHY_ENGINE_ATTN_KERNELS
// The attention kernels' plan for a batch, rebuilt only when the batch changes.
class AttnPlanCache {
 public:
  const AttnPlan& get(const AttnBatch& b) {
    offs_.resize(size_t(b.n_seqs + 1));
    bool same = valid_ && plan_.shape.tokens == b.T && plan_.shape.n_heads == b.n_heads && plan_.shape.n_kv == b.n_kv &&
                plan_.shape.head_dim == b.head_dim && plan_.seq_offsets.size() == offs_.size();
    for (size_t i = 0; i < offs_.size(); ++i) {
      offs_[i] = int32_t(b.seq_offsets_host[i]);
      same = same && plan_.seq_offsets[i] == offs_[i];
    }
    if (!same) {
      AttnShape s;
      s.tokens = b.T, s.n_heads = b.n_heads, s.n_kv = b.n_kv, s.head_dim = b.head_dim, s.scale = b.scale;
      plan_ = attention_plan(s, offs_.data(), b.n_seqs);
      valid_ = true;
      ++version_;
    }
    return plan_;
  }
  uint64_t version() const { return version_; }

 private:
  AttnPlan plan_;
  std::vector<int32_t> offs_;
  bool valid_ = false;
  uint64_t version_ = 0;
};
#endif

template <typename T>
inline void widen_into(const T* src, int64_t n, std::vector<float>& dst) {
  dst.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) dst[size_t(i)] = ld(src, i);
}
template <typename T>
inline void round_into(const std::vector<float>& src, T* dst) {
  for (size_t i = 0; i < src.size(); ++i) st(dst, int64_t(i), src[i]);
}

struct HostBackend {
  static const char* name() { return "emulate"; }
  // Order::Reverse runs blocks and threads backwards (tests: identical bits both ways show that
  // no thread depends on another within a phase and no two blocks overlap).
  explicit HostBackend(Order order = Order::Forward) : order_(order) {}

  void* alloc(size_t bytes, const char* what) {
    void* p = std::calloc(bytes ? bytes : 1, 1);
    if (!p)
      throw Error(std::string("out of memory allocating ") + what + " (" + std::to_string(bytes) + " bytes)",
                  ErrorCode::NoMem);
    return p;
  }
  void free(void* p) noexcept { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) { if (bytes) std::memmove(dst, src, bytes); }
  void zero(void* dst, size_t bytes) { if (bytes) std::memset(dst, 0, bytes); }
  int64_t free_bytes() const { return -1; }  // unknown: no device

  // every engine kernel runs with kEngineBlock threads (their grid() assumes it), as on the GPU
  template <class K>
  void launch(const K& k) {
    const int64_t g = k.grid();
    if (g > 0) run_on_host(k, g, kEngineBlock, order_);
  }

  // out (+)= the product `which` of first and second (gemm_plan.h's naming); out is fp32 when
  // out_f32, else T. BackwardWeight always accumulates into fp32.
  template <typename T>
  void linear(LinearProduct which, const T* first, const T* second, void* out, bool out_f32, int64_t M, int64_t N,
              int64_t K, bool accumulate) {
    if (M <= 0 || N <= 0 || K <= 0) return;
    const int64_t fn = which == LinearProduct::BackwardWeight || which == LinearProduct::BackwardInput ? M * N : M * K;
    const int64_t sn = which == LinearProduct::BackwardWeight ? M * K : N * K;
    const int64_t on = which == LinearProduct::Forward ? M * N : which == LinearProduct::BackwardInput ? M * K : N * K;
    const float* a;
    const float* b;
    if (sizeof(T) == 4) {
      a = reinterpret_cast<const float*>(first), b = reinterpret_cast<const float*>(second);
    } else {
      widen_into(first, fn, fa_), widen_into(second, sn, fb_);
      a = fa_.data(), b = fb_.data();
    }
    float* o;
    if (out_f32 || sizeof(T) == 4) {
      o = static_cast<float*>(out);
    } else {
      if (accumulate) widen_into(static_cast<const T*>(out), on, fo_);
      else fo_.assign(size_t(on), 0.0f);
      o = fo_.data();
    }
    switch (which) {
      case LinearProduct::Forward: model::linear_forward(a, b, o, M, N, K, accumulate); break;
      case LinearProduct::BackwardInput: model::linear_backward_input(a, b, o, M, N, K, accumulate); break;
      case LinearProduct::BackwardWeight: model::linear_backward_weight(a, b, o, M, N, K); break;
    }
    if (!(out_f32 || sizeof(T) == 4)) round_into(fo_, static_cast<T*>(out));
  }

  // Packed causal GQA attention (ops.h's formulas): the harness-run kernels of attention.h
  // when the tree has them, else native/model's CPU attention on the widened values.
#ifdef MURPHY_ENGINE_ATTN_KERNELS
  template <typename T>
  void attention_forward(const AttnBatch& s, const T* q, const T* k, const T* v, T* out, float* lse) {
    attention_forward_host<T>(plans_.get(s), q, k, v, out, lse, order_);
  }
  template <typename T>
  void attention_backward(const AttnBatch& s, const T* q, const T* k, const T* v, const T* out, const float* lse,
                          const T* dout, T* dq, T* dk, T* dv) {
    const AttnPlan& p = plans_.get(s);
    ws_.resize(p.workspace_floats());
    attention_backward_host<T>(p, q, k, v, out, lse, dout, dq, dk, dv, ws_.data(), order_);
  }
#else
  template <typename T>
  void attention_forward(const AttnBatch& s, const T* q, const T* k, const T* v, T* out, float* lse) {
    model::AttnArgs a = attn_args(s);
    const int64_t nq = s.T * s.n_heads * s.head_dim, nk = s.T * s.n_kv * s.head_dim;
    if (sizeof(T) == 4) {
      a.q = reinterpret_cast<const float*>(q), a.k = reinterpret_cast<const float*>(k);
      a.v = reinterpret_cast<const float*>(v), a.out = reinterpret_cast<float*>(out), a.lse = lse;
      model::attention_forward_cpu(a);
      return;
    }
    widen_into(q, nq, aq_), widen_into(k, nk, ak_), widen_into(v, nk, av_);
    ao_.assign(size_t(nq), 0.0f);
    a.q = aq_.data(), a.k = ak_.data(), a.v = av_.data(), a.out = ao_.data(), a.lse = lse;
    model::attention_forward_cpu(a);
    round_into(ao_, out);
  }
  template <typename T>
  void attention_backward(const AttnBatch& s, const T* q, const T* k, const T* v, const T* out, const float* lse,
                          const T* dout, T* dq, T* dk, T* dv) {
    model::AttnArgs a = attn_args(s);
    const int64_t nq = s.T * s.n_heads * s.head_dim, nk = s.T * s.n_kv * s.head_dim;
    a.lse = const_cast<float*>(lse);
    if (sizeof(T) == 4) {
      a.q = reinterpret_cast<const float*>(q), a.k = reinterpret_cast<const float*>(k);
      a.v = reinterpret_cast<const float*>(v), a.out = reinterpret_cast<float*>(const_cast<T*>(out));
      a.dout = reinterpret_cast<const float*>(dout);
      a.dq = reinterpret_cast<float*>(dq), a.dk = reinterpret_cast<float*>(dk), a.dv = reinterpret_cast<float*>(dv);
      model::attention_backward_cpu(a);
      return;
    }
    widen_into(q, nq, aq_), widen_into(k, nk, ak_), widen_into(v, nk, av_), widen_into(out, nq, ao_);
    widen_into(dout, nq, ad_);
    gq_.assign(size_t(nq), 0.0f), gk_.assign(size_t(nk), 0.0f), gv_.assign(size_t(nk), 0.0f);
    a.q = aq_.data(), a.k = ak_.data(), a.v = av_.data(), a.out = ao_.data(), a.dout = ad_.data();
    a.dq = gq_.data(), a.dk = gk_.data(), a.dv = gv_.data();
    model::attention_backward_cpu(a);
    round_into(gq_, dq), round_into(gk_, dk), round_into(gv_, dv);
  }
#endif

  // The decode kernels of paged generation (kernels/paged_attention.h, kernels/sampling.h), with
  // the block sizes the GPU launchers use (decode_kernels.cu).
  template <typename T>
  void kv_append(const T* k, const T* v, const int64_t* slot, T* k_pool, T* v_pool, int64_t n_new, int64_t row) {
    const KvAppend<T> kern{k, v, slot, k_pool, v_pool, n_new, row, kAppendBlock};
    run_on_host(kern, kern.grid(), kAppendBlock, order_);
  }
  template <typename T>
  void paged_attention(const T* q, const T* k_pool, const T* v_pool, const int32_t* table, const int32_t* seq,
                       const int32_t* pos, float* workspace, T* out, float* lse, const PagedAttentionShape& a) {
    float* o_part = workspace;
    float* m_part = o_part + a.n_new * a.H * a.n_parts * a.D;
    float* l_part = m_part + a.n_new * a.H * a.n_parts;
    const PagedAttentionPartial<T> k1{q, k_pool, v_pool, table, seq, pos, o_part, m_part, l_part, a.n_new, a.H, a.G,
                                      a.D, a.block_size, a.max_blocks, a.partition, a.n_parts, a.scale};
    run_on_host(k1, k1.grid(), kPagedAttnBlock, order_);
    const PagedAttentionReduce<T> k2{o_part, m_part, l_part, pos, out, lse, a.n_new, a.H, a.D, a.partition, a.n_parts};
    run_on_host(k2, k2.grid(), kPagedAttnBlock, order_);
  }
  void sample(const float* logits, const float* temperature, const float* top_p, const float* min_p,
              const int32_t* top_k, const uint64_t* stream, const int64_t* step, int32_t* token, float* logp,
              int64_t rows, int64_t V) {
    const SampleRows<float> k{logits, temperature, top_p, min_p, top_k, stream, step, token, logp, rows, V,
                              id_search_steps(V)};
    run_on_host(k, k.grid(), kSampleBlock, order_);
  }

  void logprob_forward(const LogprobForwardArgs& a) { logprob_forward_cpu(a); }
  void logprob_backward(const LogprobBackwardArgs& a) { logprob_backward_cpu(a); }
  GrpoLossStats grpo_loss(const GrpoLossArgs& a) { return grpo_loss_cpu(a); }
  AdamWResult adamw(const AdamWArgs& a) { return adamw_cpu(a); }

 private:
  Order order_;
  static model::AttnArgs attn_args(const AttnBatch& s) {
    model::AttnArgs a;
    a.T = s.T, a.n_heads = s.n_heads, a.n_kv = s.n_kv, a.head_dim = s.head_dim;
    a.seq_offsets = s.seq_offsets_host, a.n_seqs = s.n_seqs, a.scale = s.scale;
    return a;
  }
  std::vector<float> fa_, fb_, fo_, aq_, ak_, av_, ao_, ad_, gq_, gk_, gv_;
#ifdef MURPHY_ENGINE_ATTN_KERNELS
  AttnPlanCache plans_;
  std::vector<float> ws_;
#endif
};

}  // namespace gpu
}  // namespace murphy
