// The one interface the addon's model binding (native/addon/model.cc) talks to, implemented by
// the CPU engine (model::Engine, through CpuPolicyEngine) and by the device engine
// (DeviceEngine over HostBackend = "emulate", or over CudaBackend = "cuda"). Parameters,
// gradients and moments cross it as fp32 host copies of one parameter at a time, so the
// binding never sees where they live. No math here.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "murphy/model/model.h"
#include "paged_inputs.h"
#include "zero_plan.h"

namespace murphy {
namespace gpu {
class NcclComm;
}
}  // namespace murphy

namespace murphy {
namespace model {

class PolicyEngine {
 public:
  virtual ~PolicyEngine() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const Layout& layout() const = 0;
  // "cpu", "emulate" or "cuda", and the storage dtype of the compute weights ("f32" / "bf16").
  virtual std::string device() const = 0;
  virtual std::string storage() const = 0;

  virtual void get_param(const ParamInfo& p, float* out) = 0;
  virtual void set_param(const ParamInfo& p, const float* in) = 0;
  virtual void get_grad(const ParamInfo& p, float* out) = 0;  // zeros before the first micro-batch
  virtual void get_adam(const ParamInfo& p, float* m, float* v) = 0;
  virtual void set_adam(const ParamInfo& p, const float* m, const float* v) = 0;
  virtual int64_t step() const = 0;
  virtual void set_step(int64_t s) = 0;

  // Each file written with its size and hash (model::save_weights).
  virtual std::vector<model::SavedFile> save(const std::string& dir, FileDType dtype, int64_t max_shard_bytes) = 0;
  virtual TrainStats accumulate(const TrainInputs& in, const TrainOptions& opt) = 0;
  virtual AdamWResult optimizer_step(const AdamWOptions& o) = 0;
  virtual void zero_grad() = 0;
  virtual void score(const PackedBatch& b, float temperature, bool reference, float* logp_out) = 0;
  virtual void logits(const PackedBatch& b, float* out) = 0;
  virtual void make_reference() = 0;
  virtual std::vector<GenResult> generate(const std::vector<std::vector<int32_t>>& prompts, const SampleOptions& o) = 0;
  virtual Engine::Memory memory() const = 0;
  // The CPU engine's bf16 copy of the weights for generate / forward (model.h's Bf16Use). The
  // device engines' precision is their storage; their sampling runs on a CPU copy, which takes
  // `generate`; `forward` is refused there.
  virtual void set_bf16(const Engine::Bf16Use& u) = 0;
  virtual Engine::Bf16Use bf16() const = 0;
  // Per-layer activation checkpointing (recompute one layer at a time in backward). The CPU
  // engine keeps every layer's activations and ignores it.
  virtual void set_gradient_checkpointing(bool on) = 0;

  // Paged generation (docs/gpu.md, "Generation"): device engines only; the CPU engine throws
  // ENOTSUP naming the device engines. kv_allocate: K and V pools of n_blocks x block_size
  // slots for every layer, in the storage dtype (replaces any pools; contents undefined);
  // kv_release frees them (the training phase gets the memory back).
  virtual void kv_allocate(int64_t n_blocks, int64_t block_size) = 0;
  virtual void kv_release() = 0;
  virtual KvInfo kv_info() const = 0;
  // One step: block copies, the forward of the T new tokens over the paged cache (their K and
  // V written at slot_mapping), logits of the L rows, then one draw per sample row R:
  // tokens[R], logp[R] (the log-prob under the distribution sampled from).
  virtual void paged_step(const PagedInputs& in, const PagedSampling& s, int32_t* tokens, float* logp) = 0;
  // The same step without sampling: the fp32 logits of the L rows, [L, vocab].
  virtual void paged_logits(const PagedInputs& in, float* logits) = 0;

  // ZeRO-1 on the engine's own memory (device engines; zero_shard.h, docs/distributed.md). The
  // CPU engine throws ENOTSUP (lib/dist/zero.ts steps it on the host). zero_init takes over the
  // current weights as the shard's master with zero moments (the engine's own moments are
  // released; its optimizer_step and Adam state calls are refused from then on); zero_step is
  // collective (every rank of the communicator calls it) and blocks on NCCL with the deadline;
  // zero_get/set_shard: host copies of the shard's master weights and moments [size].
  virtual void zero_init(const gpu::ZeroPlan&) { no_zero(); }
  virtual AdamWResult zero_step(gpu::NcclComm&, const gpu::ZeroStepOptions&) { no_zero(); }
  // The overlap of the gradient reductions with the backward pass (zero_shard.h):
  // zero_overlap_next arms the next accumulate (its backward starts each bucket's reduction on
  // `comm` once the bucket's gradients are final); zero_flush starts the buckets not started
  // yet (collective); zero_step then waits for them. Both hold the communicator until the step.
  virtual void zero_overlap_next(std::shared_ptr<gpu::NcclComm>, double, bool) { no_zero(); }
  virtual void zero_flush(std::shared_ptr<gpu::NcclComm>, double) { no_zero(); }
  // Where the last overlapped step started each bucket (zero_shard.h trace(); tests), and its
  // device timeline (timeline_ms(): NaN without events).
  virtual std::vector<int64_t> zero_overlap_trace(double*) const { no_zero(); }
  virtual int64_t zero_shard_size() const { no_zero(); }
  virtual void zero_get_shard(float*, float*, float*) { no_zero(); }
  virtual void zero_set_shard(const float*, const float*, const float*, int64_t) { no_zero(); }

  // Weight-sync buckets packed from the engine's compute weights where they live (device
  // engines): out[byte_offset .. + 2 numel) = the bf16 weights of [offset, offset + numel) of the
  // flat vector, for each entry; `out` (out_bytes) must be device memory for "cuda" and host
  // memory for "emulate" (out_on_device says which it is). The CPU engine throws ENOTSUP.
  struct PackEntry {
    int64_t offset = 0, numel = 0, byte_offset = 0;
  };
  virtual void pack_bf16(const std::vector<PackEntry>&, void*, int64_t, bool) {
    throw Error("packing bf16 weights in the engine's memory runs on the device engines; pack on the host (toBf16)",
                ErrorCode::NotSup);
  }

 private:
  [[noreturn]] static void no_zero() {
    throw Error("ZeRO-1 on the engine's memory runs on the device engines (--device cuda|emulate); the CPU engine "
                "steps its shard on the host (lib/dist/zero.ts)",
                ErrorCode::NotSup);
  }
};

// The CPU engine behind the interface.
std::unique_ptr<PolicyEngine> wrap_cpu_engine(std::unique_ptr<Engine> e);

// The device engine: device "emulate" (HostBackend, every build) or "cuda" (CudaBackend, the
// CUDA build with a device; elsewhere an ENOLIB / ECUDA error naming the cause); storage
// "bf16" or "f32". `dir` a Hugging Face directory, or empty with `random_config` + seed + std.
struct DeviceEngineSpec {
  std::string device = "emulate";
  std::string storage = "bf16";
  bool gradient_checkpointing = false;
  bool reverse_harness = false;  // emulate only: run the harness's blocks and threads in reverse order (tests)
};
std::unique_ptr<PolicyEngine> load_device_engine(const DeviceEngineSpec& s, const std::string& dir);
std::unique_ptr<PolicyEngine> random_device_engine(const DeviceEngineSpec& s, const ModelConfig& c, uint64_t seed,
                                                   float init_std);

}  // namespace model
}  // namespace murphy
