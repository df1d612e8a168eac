// The PolicyEngine implementations the binding creates: the CPU engine (model::Engine) behind
// the interface, and the device engine over HostBackend ("emulate", f32 or bf16 storage). The
// CUDA engine is created by cuda_engine.cu in the CUDA build; a CPU-only binary says so.
#include <cstring>

#include "../../model/weights.h"
#include "cuda_engine.h"
#include "device_engine.h"
#include "policy_engine.h"

namespace murphy {
namespace model {

namespace {

class CpuPolicyEngine final : public PolicyEngine {
 public:
  explicit CpuPolicyEngine(std::unique_ptr<Engine> e) : e_(std::move(e)) {}
  const ModelConfig& config() const override { return e_->config(); }
  const Layout& layout() const override { return e_->layout(); }
  std::string device() const override { return "cpu"; }
  std::string storage() const override { return "f32"; }
  void get_param(const ParamInfo& p, float* out) override {
    const Engine& e = *e_;  // the const accessor: reading leaves the bf16 copy fresh
    std::memcpy(out, e.weights() + p.offset, size_t(p.numel) * 4);
  }
  void set_param(const ParamInfo& p, const float* in) override {
    std::memcpy(e_->weights() + p.offset, in, size_t(p.numel) * 4);
  }
  void get_grad(const ParamInfo& p, float* out) override {
    if (e_->grads()) std::memcpy(out, e_->grads() + p.offset, size_t(p.numel) * 4);
    else std::memset(out, 0, size_t(p.numel) * 4);
  }
  void get_adam(const ParamInfo& p, float* m, float* v) override {
    std::memcpy(m, e_->adam_m() + p.offset, size_t(p.numel) * 4);
    std::memcpy(v, e_->adam_v() + p.offset, size_t(p.numel) * 4);
  }
  void set_adam(const ParamInfo& p, const float* m, const float* v) override {
    std::memcpy(e_->adam_m() + p.offset, m, size_t(p.numel) * 4);
    std::memcpy(e_->adam_v() + p.offset, v, size_t(p.numel) * 4);
  }
  int64_t step() const override { return e_->step(); }
  void set_step(int64_t s) override { e_->set_step(s); }
  std::vector<model::SavedFile> save(const std::string& dir, FileDType dtype, int64_t max_shard_bytes) override {
    return e_->save(dir, dtype, max_shard_bytes);
  }
  TrainStats accumulate(const TrainInputs& in, const TrainOptions& opt) override { return e_->accumulate(in, opt); }
  AdamWResult optimizer_step(const AdamWOptions& o) override { return e_->optimizer_step(o); }
  void zero_grad() override { e_->zero_grad(); }
  void score(const PackedBatch& b, float temperature, bool reference, float* out) override {
    e_->score(b, temperature, reference, out);
  }
  void logits(const PackedBatch& b, float* out) override { e_->logits(b, out); }
  void make_reference() override { e_->make_reference(); }
  std::vector<GenResult> generate(const std::vector<std::vector<int32_t>>& prompts, const SampleOptions& o) override {
    return e_->generate(prompts, o);
  }
  Engine::Memory memory() const override { return e_->memory(); }
  void set_gradient_checkpointing(bool) override {}
  void set_bf16(const Engine::Bf16Use& u) override { e_->set_bf16(u); }
  Engine::Bf16Use bf16() const override { return e_->bf16(); }
  void kv_allocate(int64_t, int64_t) override { no_paged(); }
  void kv_release() override { no_paged(); }
  KvInfo kv_info() const override { no_paged(); }
  void paged_step(const PagedInputs&, const PagedSampling&, int32_t*, float*) override { no_paged(); }
  void paged_logits(const PagedInputs&, float*) override { no_paged(); }

 private:
  [[noreturn]] static void no_paged() {
    throw Error(
        "paged generation (kvAllocate / pagedStep / pagedLogits) runs on the device engine only; load the model with "
        "--device emulate|cuda (PolicyModel { device: 'emulate' | 'cuda' }), or use generate() on the CPU engine",
        ErrorCode::NotSup);
  }
  std::unique_ptr<Engine> e_;
};

void check_spec(const DeviceEngineSpec& s) {
  if (s.device != "emulate" && s.device != "cuda")
    throw Error("device engine: device must be 'emulate' or 'cuda' (got '" + s.device + "')");
  if (s.storage != "bf16" && s.storage != "f32")
    throw Error("device engine: storage dtype must be 'bf16' or 'f32' (got '" + s.storage + "')");
}

// Weights in host fp32 -> the engine of the spec.
std::unique_ptr<PolicyEngine> make_device(const DeviceEngineSpec& s, const ModelConfig& c, const float* w) {
  check_spec(s);
  if (s.device == "cuda") return gpu::make_cuda_engine(s, c, w);
  auto be = std::unique_ptr<gpu::HostBackend>(
      new gpu::HostBackend(s.reverse_harness ? gpu::Order::Reverse : gpu::Order::Forward));
  if (s.storage == "f32")
    return std::unique_ptr<PolicyEngine>(new gpu::DeviceEngine<gpu::HostBackend, float>(std::move(be), c, w, s.gradient_checkpointing));
  return std::unique_ptr<PolicyEngine>(
      new gpu::DeviceEngine<gpu::HostBackend, uint16_t>(std::move(be), c, w, s.gradient_checkpointing));
}

}  // namespace

std::unique_ptr<PolicyEngine> wrap_cpu_engine(std::unique_ptr<Engine> e) {
  return std::unique_ptr<PolicyEngine>(new CpuPolicyEngine(std::move(e)));
}

std::unique_ptr<PolicyEngine> load_device_engine(const DeviceEngineSpec& s, const std::string& dir) {
  check_spec(s);
  if (s.device == "cuda") gpu::check_cuda_engine_available();  // before reading gigabytes
  const std::string cfg_path = dir + "/config.json";
  const ModelConfig c = parse_config(read_file_text(cfg_path), cfg_path);
  const Layout L = make_layout(c);
  std::vector<float> w;
  checked_resize(w, L.total, "the host copy of the weights (load)");
  load_weights(dir, L, c, w.data());
  return make_device(s, c, w.data());
}

std::unique_ptr<PolicyEngine> random_device_engine(const DeviceEngineSpec& s, const ModelConfig& c, uint64_t seed,
                                                   float init_std) {
  check_spec(s);
  if (s.device == "cuda") gpu::check_cuda_engine_available();
  // The CPU engine's initialisation, so a device engine and a CPU engine of one seed agree.
  std::unique_ptr<Engine> e = Engine::random(c, seed, init_std);
  return make_device(s, c, e->weights());
}

}  // namespace model
}  // namespace murphy
