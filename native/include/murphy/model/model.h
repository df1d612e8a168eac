// The policy network: Qwen3 and OLMo-2 decoders read from Hugging Face config.json and
// safetensors, trained with the fused log-prob + GRPO/KL loss, and sampled with a KV cache.
//
// Qwen3 layer (pre-norm):                    OLMo-2 layer (post-norm inside the residual):
//   a = RMSNorm(x)                              q = RMSNorm_q(x Wq^T) (over all heads)
//   q = RoPE(RMSNorm_qh(a Wq^T)) per head       k = RMSNorm_k(x Wk^T)
//   k = RoPE(RMSNorm_kh(a Wk^T)) per head       q, k = RoPE(q), RoPE(k); v = x Wv^T
//   v = a Wv^T                                  h = x + RMSNorm_pa(Attn(q,k,v) Wo^T)
//   h = x + Attn(q, k, v) Wo^T                  y = h + RMSNorm_pf(MLP(h))
//   y = h + MLP(RMSNorm(h))
// MLP(x) = (silu(x Wg^T) * (x Wu^T)) Wd^T. Final RMSNorm, then logits = x Wh^T with Wh the
// lm_head or (tied) the embedding.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "murphy/common.h"
#include "murphy/adamw.h"
#include "murphy/grpo_loss.h"
#include "murphy/model/ops.h"
#include "murphy/model/big_buffer.h"

namespace murphy {
namespace model {

enum class Arch : int32_t { Qwen3 = 0, Olmo2 = 1 };
enum class FileDType : int32_t { F32 = 0, BF16 = 1, F16 = 2 };

// A file a save wrote: its name (relative to the directory), size and XXH64 (seed 0) of the
// bytes as they were written, so a checkpoint's manifest need not read them back.
struct SavedFile {
  std::string name;
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
};

struct ModelConfig {
  Arch arch = Arch::Qwen3;
  std::string model_type;
  int64_t vocab = 0, hidden = 0, intermediate = 0, n_layers = 0, n_heads = 0, n_kv = 0, head_dim = 0;
  int64_t max_pos = 0;
  double rms_eps = 1e-6, rope_theta = 10000.0;
  bool tie = false;
  FileDType dtype = FileDType::BF16;  // torch_dtype: the dtype weights are saved in by default
};

// Parses and checks config.json's text; errors name `where` and the field.
ModelConfig parse_config(const std::string& text, const std::string& where);

struct ParamInfo {
  std::string name;           // Hugging Face tensor name
  std::vector<int64_t> shape;
  int64_t offset = 0, numel = 0;  // into Weights::data
  bool decay = true;          // AdamW weight decay (matrices yes, norm gains no)
};

struct LayerParams {  // indices into the param list, -1 where the architecture has none
  int in_norm = -1, q = -1, k = -1, v = -1, o = -1, q_norm = -1, k_norm = -1;
  int post_attn_norm = -1, post_ff_norm = -1, gate = -1, up = -1, down = -1;
};

struct Layout {
  std::vector<ParamInfo> params;
  int embed = -1, final_norm = -1, lm_head = -1;  // lm_head -1 when tied
  std::vector<LayerParams> layers;
  int64_t total = 0;
};
Layout make_layout(const ModelConfig& c);

// A batch of packed sequences: one flat list of tokens; sequence s is
// tokens [seq_offsets[s], seq_offsets[s+1]); positions restart at each sequence.
struct PackedBatch {
  int64_t T = 0;
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
  const int64_t* seq_offsets = nullptr;
  int64_t n_seqs = 0;
};

// Option structs: defaults and ranges live in lib/native/options.ts; the binding sets every field.
struct TrainOptions {
  bool cross_entropy = false;    // supervised: loss = -mean over mask of logp
  float temperature = 0.0f;
  GrpoLossArgs loss;             // eps, beta, agg, ... (tensor pointers ignored)
  int64_t chunk_tokens = 0;      // logits rows per chunk
  int64_t keep_logits_bytes = 0; // CPU engine: chunks' logits kept from the loss's first pass to its second
  float grad_scale = 0.0f;       // multiplies this micro-batch's gradient (1 / micro-batches)
};

struct TrainInputs {
  PackedBatch batch;
  const uint8_t* mask = nullptr;        // [T] 1 = token in the loss (never the first of a sequence)
  const float* advantages = nullptr;    // [T]
  const float* old_logp = nullptr;      // [T] optional: none = this pass's log-probs, detached (ratio 1)
  const float* ref_logp = nullptr;      // [T] optional
};

struct TrainStats {
  double loss = 0;
  GrpoLossStats grpo;
  int64_t n_tokens = 0, n_active = 0;
  double mean_logp = 0;   // over active tokens
};

struct AdamWOptions {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  float max_grad_norm = 0.0f;
};

// One token sampled in a decode step, for SampleOptions::on_step.
struct StepToken {
  int64_t sample = 0;  // prompt * n + j
  int32_t token = 0;
  float logp = 0.0f;
  std::vector<int32_t> top_ids;  // top_logprobs entries
  std::vector<float> top_logp;
};

struct SampleOptions {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 0.0f;
  int64_t top_k = 0;         // 0 = off
  float min_p = 0.0f;        // 0 = off; keeps tokens with probability >= min_p x the largest
  int64_t max_new_tokens = 0;
  int64_t n = 0;             // samples per prompt
  uint64_t seed = 0;
  // Per-prompt seeds: when given (one per prompt), prompt p samples with seeds[p] instead of
  // seed + p, so requests with their own seeds can share one call.
  std::vector<uint64_t> seeds;
  std::vector<int32_t> stop_ids;
  // Alternatives reported per sampled token: the top_logprobs most likely tokens of the same
  // processed distribution as logp (-inf outside the kept set). 0 = none.
  int64_t top_logprobs = 0;
  // false: the caller reads no log-probs (evaluations): every logp is NaN, and greedy draws skip
  // the softmax over the vocabulary that only their log-prob needs. Requires top_logprobs = 0.
  bool logprobs = true;
  // After the call, return the freed heap to the system (murphy/heap.h): for a server between
  // requests, not for a loop that generates again (every page given back faults in again).
  bool release_heap = false;
  // Stop flags, one per sample (prompt-major: prompts x n), read between decode steps and
  // possibly written by another thread meanwhile: a sample whose flag is nonzero ends there
  // with finish "abort". nullptr = none.
  const int32_t* cancel = nullptr;
  // One flag that stops every sample the same way (the addon's: set when the process exits, whose
  // exit waits for the generating thread). nullptr = none.
  const std::atomic<bool>* stop_all = nullptr;
  // Called on the generating thread after every decode step with the tokens it sampled.
  std::function<void(const std::vector<StepToken>&)> on_step;
};

// One row of logits sampled as generate() does (generate.cc, the spec of the device sampler in
// native/gpu/kernels/sampling.h): u in (0, 1) from murphy/sample_rng.h; temperature, min_p,
// top_k and top_p of `o` (the rest is unused).
struct SampledToken {
  int32_t token;
  float logp;
};
SampledToken sample_logits_cpu(const float* z, int64_t V, const SampleOptions& o, double u);

struct GenResult {
  std::vector<int32_t> tokens;
  std::vector<float> logp;
  std::vector<int32_t> top_ids;  // [tokens x top_logprobs], most likely first
  std::vector<float> top_logp;
  std::string finish;  // "stop" | "length" | "abort"
};

struct Acts;          // saved activations of one forward pass (native/model/model_internal.h)
struct TrainScratch;  // accumulate()'s buffers, kept between calls (native/model/model_internal.h)
struct ScoreScratch;  // score()'s and logits()'s buffers, kept between calls (native/model/model_internal.h)

class Engine {
 public:
  static std::unique_ptr<Engine> load(const std::string& dir);
  static std::unique_ptr<Engine> random(const ModelConfig& c, uint64_t seed, float init_std);
  ~Engine();

  const ModelConfig& config() const { return cfg_; }
  const Layout& layout() const { return layout_; }
  // The fp32 master weights. The non-const accessor marks the bf16 copy stale (callers may write).
  float* weights() { wb_fresh_ = false; return w_.data(); }
  const float* weights() const { return w_.data(); }

  // bf16 weights (docs/model.md, "bf16 weights"): a bf16 copy of the master weights, refreshed
  // by each optimizer step (AdamW writes it in the same pass) or on first use after the weights
  // changed, used by generate() (`generate`) and by the layers' forward of accumulate(), score()
  // and logits() (`forward`; the LM head of the loss stays fp32). Both off by default.
  struct Bf16Use { bool generate = false, forward = false; };
  void set_bf16(const Bf16Use& u);
  Bf16Use bf16() const { return bf16_; }

  // Writes `dir`/model.safetensors or sharded files plus the index (each file atomically);
  // returns each file with its size and hash (hashed while written).
  std::vector<SavedFile> save(const std::string& dir, FileDType dtype, int64_t max_shard_bytes) const;

  // Forward + loss + backward of one micro-batch; gradients accumulate into the grad buffer.
  TrainStats accumulate(const TrainInputs& in, const TrainOptions& opt);
  // AdamW on the accumulated gradients (fp32 master weights), then zeroes them.
  AdamWResult optimizer_step(const AdamWOptions& o);
  void zero_grad();
  const float* grads() const { return g_.data(); }
  int64_t step() const { return step_; }
  // The AdamW state, for checkpoints: the moments laid out like the weights (allocated, at
  // zero, on first use) and the number of steps taken (the next step's bias correction).
  float* adam_m() { ensure_moments(); return m_.data(); }
  float* adam_v() { ensure_moments(); return v_.data(); }
  void set_step(int64_t s) { step_ = s; }

  // Log-probs of every token given the ones before it in its sequence (0 for the first
  // token of each sequence), with temperature; no gradients. reference = the frozen copy.
  void score(const PackedBatch& b, float temperature, bool reference, float* logp_out);
  // Logits of every position (tests): [T, vocab].
  void logits(const PackedBatch& b, float* out);

  void make_reference();  // freezes a copy of the current weights
  bool has_reference() const { return !ref_.empty(); }

  // n samples per prompt; results[p * n + j].
  std::vector<GenResult> generate(const std::vector<std::vector<int32_t>>& prompts, const SampleOptions& o);

  // matmul_cache: the bytes the CPU matrix products' cache of big packing buffers holds now, for
  // the whole process (gemm_driver.h; 0 for the device engines, whose products have none).
  struct Memory { int64_t weights = 0, grads = 0, optimizer = 0, reference = 0, activations_peak = 0, matmul_cache = 0; };
  Memory memory() const;

 private:
  std::vector<GenResult> generate_impl(const std::vector<std::vector<int32_t>>& prompts, const SampleOptions& o);
  Engine() = default;
  void init_layout(const ModelConfig& c);
  void ensure_moments();
  void check_batch(const PackedBatch& b) const;
  void forward(const float* w, const PackedBatch& b, Acts& a, bool keep, const uint16_t* wb = nullptr) const;
  void backward(const PackedBatch& b, Acts& a, float* dxf);

  ModelConfig cfg_;
  Layout layout_;
  BigFloats w_, g_, m_, v_, ref_;  // parameter-sized: on huge pages where the system allows (big_buffer.h)
  BigHalfs wb_;  // bf16 copy of w_ (empty while bf16 is off)
  bool wb_fresh_ = false;
  Bf16Use bf16_;
  const uint16_t* bf16_weights();  // wb_, refreshed from w_ when stale
  std::vector<float> rope_cos_, rope_sin_;
  RopeTable rope_;
  int64_t step_ = 0;
  int64_t act_peak_ = 0;
  std::unique_ptr<TrainScratch> scratch_;  // made by the first accumulate()
  std::unique_ptr<ScoreScratch> score_scratch_;  // made by the first score() or logits()
  ScoreScratch& score_scratch();
};

// fp16 <-> fp32 (IEEE half, round to nearest even)
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

// Allocation with a clear out-of-memory error naming what was being allocated.
void checked_resize(std::vector<float>& v, int64_t n, const char* what);
void checked_resize(BigFloats& v, int64_t n, const char* what);

}  // namespace model
}  // namespace murphy
