// Bindings of the policy model (native/model): argument checks and conversion only.
// Every long call runs on a libuv worker thread (Napi::AsyncWorker) and returns a Promise;
// inputs are copied before the call is queued, so the caller may reuse its arrays at once.
// One engine runs one call at a time (a per-engine mutex); calls queue in order.
#include <napi.h>

#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>

#include "args.h"
#include "register.h"
#include "../gpu/engine/cuda_engine.h"
#include "../gpu/engine/policy_engine.h"
#include "../gpu/nccl_binding.h"
#include "murphy/model/model.h"
#include "murphy/model/ops.h"
#include "murphy/xxh64.h"

namespace murphy {
namespace addon {
namespace {

using model::Engine;
using model::PolicyEngine;

template <typename T>
std::vector<T> copy_of(const Buf& b) {
  const T* p = static_cast<const T*>(b.ptr);
  return std::vector<T>(p, p + b.count);
}

Buf host(const Napi::Value& v, const char* name, Kind k, int64_t expect, bool optional = false) {
  Buf b = tensor(v, name, k, expect, optional);
  if (b.present && b.device != Device::Host) throw Error(std::string("'") + name + "' must be a host typed array");
  return b;
}

// { lr, beta1, beta2, eps, weightDecay, maxGradNorm } into the engine's options (AdamWOptions or
// ZeroStepOptions: the same fields).
template <typename O>
void read_adamw(const Napi::Object& h, O& o) {
  o.lr = req_number(h, "lr");
  o.beta1 = req_number(h, "beta1");
  o.beta2 = req_number(h, "beta2");
  o.eps = req_number(h, "eps");
  o.weight_decay = req_number(h, "weightDecay");
  o.max_grad_norm = decltype(o.max_grad_norm)(req_number(h, "maxGradNorm"));
}

// An optimizer step's result: { gradNorm, clipCoef, skipped, step }.
Napi::Object adamw_result(Napi::Env env, const AdamWResult& r, int64_t step) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("gradNorm", r.grad_norm);
  out.Set("clipCoef", r.clip_coef);
  out.Set("skipped", r.skipped);
  out.Set("step", double(step));
  return out;
}

class Task : public Napi::AsyncWorker {
 public:
  using Run = std::function<void()>;
  using Done = std::function<Napi::Value(Napi::Env)>;
  Task(Napi::Env env, Napi::Object keep, std::shared_ptr<std::mutex> mu, Run run, Done done)
      : Napi::AsyncWorker(env, "murphy-model"), deferred_(Napi::Promise::Deferred::New(env)), mu_(std::move(mu)),
        run_(std::move(run)), done_(std::move(done)) {
    if (!keep.IsEmpty()) keep_ = Napi::Persistent(keep);
  }
  Napi::Promise promise() { return deferred_.Promise(); }
  // On the worker thread: no JavaScript here, so a failure keeps its message and code for OnError.
  void Execute() override {
    try {
      std::unique_lock<std::mutex> lk;
      if (mu_) lk = std::unique_lock<std::mutex>(*mu_);
      run_();
    } catch (...) {
      current_error_parts(message_, code_);
      SetError(message_);
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    try {
      deferred_.Resolve(done_(env));
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    } catch (...) {
      deferred_.Reject(current_error(env).Value());
    }
  }
  // The rejection is a MurphyNativeError; lib/native.ts puts the caller's stack on it.
  void OnError(const Napi::Error&) override { deferred_.Reject(native_error(Env(), message_, code_).Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<std::mutex> mu_;
  Run run_;
  Done done_;
  Napi::ObjectReference keep_;
  std::string message_;
  ErrorCode code_ = ErrorCode::Inval;
};

Napi::Value queue(Napi::Env env, Napi::Object keep, std::shared_ptr<std::mutex> mu, Task::Run run, Task::Done done) {
  Task* t = new Task(env, keep, std::move(mu), std::move(run), std::move(done));
  Napi::Promise p = t->promise();
  t->Queue();
  return p;
}

// Runs on the JS thread: one decode step's tokens as typed arrays, to the onStep callback.
void deliver_steps(Napi::Env env, Napi::Function cb, std::vector<model::StepToken>* d) {
  std::unique_ptr<std::vector<model::StepToken>> steps(d);
  if (env == nullptr || cb.IsEmpty()) return;
  const size_t m = steps->size();
  size_t k = 0;
  for (const auto& st : *steps) k += st.top_ids.size();
  Napi::Int32Array sample = Napi::Int32Array::New(env, m), token = Napi::Int32Array::New(env, m);
  Napi::Float32Array logp = Napi::Float32Array::New(env, m);
  Napi::Int32Array top_ids = Napi::Int32Array::New(env, k);
  Napi::Float32Array top_logp = Napi::Float32Array::New(env, k);
  size_t at = 0;
  for (size_t i = 0; i < m; ++i) {
    const model::StepToken& st = (*steps)[i];
    sample[i] = int32_t(st.sample), token[i] = st.token, logp[i] = st.logp;
    for (size_t r = 0; r < st.top_ids.size(); ++r, ++at) top_ids[at] = st.top_ids[r], top_logp[at] = st.top_logp[r];
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("samples", sample);
  o.Set("tokens", token);
  o.Set("logprobs", logp);
  o.Set("topIds", top_ids);
  o.Set("topLogprobs", top_logp);
  cb.Call({o});
}

// Set by markExiting() (lib/native.ts calls it from the main thread's process 'exit' event):
// process.exit() joins the worker threads before it ends the process, with the JS thread no longer
// running callbacks. A generation running then stops at its next decode step (SampleOptions::
// stop_all), and its delivery fence below stops waiting for the JS thread: without both, a
// process.exit() during a streamed generation hung (found in `serve` on a second SIGTERM).
std::atomic<bool> g_exiting{false};

// On the worker thread, after the last decode step: queues a fence behind the step deliveries
// and waits until the JS thread has run it, so every onStep call has happened before the
// promise resolves (the thread-safe function's queue and the worker's completion are separate
// event-loop sources, with no order between them). An environment being torn down still runs
// the fence (with env == nullptr).
void wait_for_deliveries(Napi::ThreadSafeFunction& f) {
  struct Fence {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
  };
  auto fence = std::make_shared<Fence>();
  auto* arg = new std::shared_ptr<Fence>(fence);
  auto signal = [](Napi::Env, Napi::Function, std::shared_ptr<Fence>* a) {
    std::unique_ptr<std::shared_ptr<Fence>> own(a);
    {
      std::lock_guard<std::mutex> lk((*a)->m);
      (*a)->done = true;
    }
    (*a)->cv.notify_all();
  };
  if (f.NonBlockingCall(arg, signal) != napi_ok) {
    delete arg;
    return;
  }
  std::unique_lock<std::mutex> lk(fence->m);
  while (!fence->done && !g_exiting.load(std::memory_order_relaxed))
    fence->cv.wait_for(lk, std::chrono::milliseconds(20));
}

Napi::Value MarkExiting(const Napi::CallbackInfo& info) {
  g_exiting.store(true, std::memory_order_relaxed);
  return info.Env().Undefined();
}

class ModelEngine : public Napi::ObjectWrap<ModelEngine> {
 public:
  static Napi::Function Init(Napi::Env env) {
    Napi::Function f = DefineClass(
        env, "ModelEngine",
        {InstanceMethod("config", &ModelEngine::Config), InstanceMethod("params", &ModelEngine::Params),
         InstanceMethod("getParam", &ModelEngine::GetParam), InstanceMethod("setParam", &ModelEngine::SetParam),
         InstanceMethod("getGrad", &ModelEngine::GetGrad), InstanceMethod("save", &ModelEngine::Save),
         InstanceMethod("getAdamState", &ModelEngine::GetAdamState),
         InstanceMethod("setAdamState", &ModelEngine::SetAdamState),
         InstanceMethod("accumulate", &ModelEngine::Accumulate),
         InstanceMethod("optimizerStep", &ModelEngine::OptimizerStep),
         InstanceMethod("zeroGrad", &ModelEngine::ZeroGrad), InstanceMethod("score", &ModelEngine::Score),
         InstanceMethod("logits", &ModelEngine::Logits), InstanceMethod("makeReference", &ModelEngine::MakeReference),
         InstanceMethod("generate", &ModelEngine::Generate), InstanceMethod("memory", &ModelEngine::Memory),
         InstanceMethod("setBf16", &ModelEngine::SetBf16), InstanceMethod("bf16", &ModelEngine::Bf16),
         InstanceMethod("engine", &ModelEngine::EngineInfo), InstanceMethod("kvAllocate", &ModelEngine::KvAllocate),
         InstanceMethod("kvRelease", &ModelEngine::KvRelease), InstanceMethod("kvInfo", &ModelEngine::KvInfo),
         InstanceMethod("pagedStep", &ModelEngine::PagedStep),
         InstanceMethod("pagedLogits", &ModelEngine::PagedLogits),
         InstanceMethod("zeroInit", &ModelEngine::ZeroInit), InstanceMethod("zeroStep", &ModelEngine::ZeroStep),
         InstanceMethod("zeroOverlapNext", &ModelEngine::ZeroOverlapNext),
         InstanceMethod("zeroFlush", &ModelEngine::ZeroFlush),
         InstanceMethod("zeroOverlapTrace", &ModelEngine::ZeroOverlapTrace),
         InstanceMethod("zeroShard", &ModelEngine::ZeroShard),
         InstanceMethod("zeroSetShard", &ModelEngine::ZeroSetShard),
         InstanceMethod("packBf16", &ModelEngine::PackBf16)});
    addon_data(env).model_engine = Napi::Persistent(f);
    return f;
  }
  explicit ModelEngine(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ModelEngine>(info) {
    if (info.Length() != 1 || !info[0].IsExternal())
      throw Napi::TypeError::New(info.Env(), "ModelEngine is created by loadModel() or randomModel()");
    eng_.reset(info[0].As<Napi::External<PolicyEngine>>().Data());
  }
  static Napi::Object Wrap(Napi::Env env, PolicyEngine* e) {
    return addon_data(env).model_engine.New({Napi::External<PolicyEngine>::New(env, e)});
  }

 private:
  std::unique_ptr<PolicyEngine> eng_;
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();

  // sync calls must not race a running async call
  std::unique_lock<std::mutex> busy_guard() {
    std::unique_lock<std::mutex> lk(*mu_, std::try_to_lock);
    if (!lk.owns_lock()) throw Error("the model engine is busy with another call; await it first", ErrorCode::Busy);
    return lk;
  }

  // The body of a sync call that returns undefined: refused while an async call runs
  // (busy_guard), then f(), any error thrown to JS as one line (guarded).
  template <class F>
  Napi::Value sync_void(const Napi::CallbackInfo& info, F f) {
    return guarded(info, [&]() -> Napi::Value {
      auto lk = busy_guard();
      f();
      return info.Env().Undefined();
    });
  }

  Napi::Value Config(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      const model::ModelConfig& c = eng_->config();
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("modelType", c.model_type);
      o.Set("vocabSize", double(c.vocab));
      o.Set("hiddenSize", double(c.hidden));
      o.Set("intermediateSize", double(c.intermediate));
      o.Set("numLayers", double(c.n_layers));
      o.Set("numHeads", double(c.n_heads));
      o.Set("numKvHeads", double(c.n_kv));
      o.Set("headDim", double(c.head_dim));
      o.Set("maxPositionEmbeddings", double(c.max_pos));
      o.Set("rmsNormEps", c.rms_eps);
      o.Set("ropeTheta", c.rope_theta);
      o.Set("tieWordEmbeddings", c.tie);
      o.Set("dtype", c.dtype == model::FileDType::F32 ? "float32" : c.dtype == model::FileDType::BF16 ? "bfloat16" : "float16");
      return o;
    });
  }

  Napi::Value Params(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      const auto& ps = eng_->layout().params;
      Napi::Array a = Napi::Array::New(info.Env(), ps.size());
      for (size_t i = 0; i < ps.size(); ++i) {
        Napi::Object o = Napi::Object::New(info.Env());
        o.Set("name", ps[i].name);
        Napi::Array sh = Napi::Array::New(info.Env(), ps[i].shape.size());
        for (size_t k = 0; k < ps[i].shape.size(); ++k) sh.Set(uint32_t(k), double(ps[i].shape[k]));
        o.Set("shape", sh);
        o.Set("numel", double(ps[i].numel));
        a.Set(uint32_t(i), o);
      }
      return a;
    });
  }

  const model::ParamInfo& find(const Napi::Value& v) {
    if (!v.IsString()) throw Error("'name' must be a parameter name (a string)");
    std::string n = v.As<Napi::String>().Utf8Value();
    for (const auto& p : eng_->layout().params)
      if (p.name == n) return p;
    throw Error("no parameter named '" + n + "'");
  }

  Napi::Value GetParam(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto lk = busy_guard();
      const model::ParamInfo& p = find(info[0]);
      Napi::Float32Array a = Napi::Float32Array::New(info.Env(), size_t(p.numel));
      eng_->get_param(p, a.Data());
      return a;
    });
  }

  Napi::Value SetParam(const Napi::CallbackInfo& info) {
    return sync_void(info, [&] {
      const model::ParamInfo& p = find(info[0]);
      Buf b = host(info[1], "values", Kind::F32, p.numel);
      eng_->set_param(p, static_cast<const float*>(b.ptr));
    });
  }

  // getAdamState(name) -> { m, v, step }: copies of one parameter's AdamW moments
  Napi::Value GetAdamState(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto lk = busy_guard();
      const model::ParamInfo& p = find(info[0]);
      Napi::Float32Array m = Napi::Float32Array::New(info.Env(), size_t(p.numel));
      Napi::Float32Array v = Napi::Float32Array::New(info.Env(), size_t(p.numel));
      eng_->get_adam(p, m.Data(), v.Data());
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("m", m);
      o.Set("v", v);
      o.Set("step", double(eng_->step()));
      return o;
    });
  }

  // setAdamState(name, m, v, step): restores one parameter's moments and the step count
  Napi::Value SetAdamState(const Napi::CallbackInfo& info) {
    return sync_void(info, [&] {
      const model::ParamInfo& p = find(info[0]);
      Buf m = host(info[1], "m", Kind::F32, p.numel);
      Buf v = host(info[2], "v", Kind::F32, p.numel);
      const int64_t step = to_int(info[3], "step", 0, int64_t(1) << 50);
      eng_->set_adam(p, static_cast<const float*>(m.ptr), static_cast<const float*>(v.ptr));
      eng_->set_step(step);
    });
  }

  Napi::Value GetGrad(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto lk = busy_guard();
      const model::ParamInfo& p = find(info[0]);
      Napi::Float32Array a = Napi::Float32Array::New(info.Env(), size_t(p.numel));
      eng_->get_grad(p, a.Data());
      return a;
    });
  }

  // save(dir, dtype: 'float32' | 'bfloat16' | 'float16', maxShardBytes)
  //   -> Promise<{ file, bytes, xxh64 }[]>: each file written, hashed as it was written
  Napi::Value Save(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsString()) throw Error("save: 'dir' must be a string");
      std::string dir = info[0].As<Napi::String>().Utf8Value();
      std::string dt = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
      model::FileDType d;
      if (dt == "float32") d = model::FileDType::F32;
      else if (dt == "bfloat16") d = model::FileDType::BF16;
      else if (dt == "float16") d = model::FileDType::F16;
      else throw Error("save: 'dtype' must be 'float32', 'bfloat16' or 'float16'");
      int64_t shard = to_int(info[2], "maxShardBytes", 0, int64_t(1) << 50);
      PolicyEngine* e = eng_.get();
      auto saved = std::make_shared<std::vector<model::SavedFile>>();
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_, [=]() { *saved = e->save(dir, d, shard); },
                   [saved](Napi::Env env) -> Napi::Value {
                     Napi::Array a = Napi::Array::New(env, saved->size());
                     for (size_t i = 0; i < saved->size(); ++i) {
                       const model::SavedFile& f = (*saved)[i];
                       Napi::Object o = Napi::Object::New(env);
                       o.Set("file", f.name);
                       o.Set("bytes", double(f.bytes));
                       o.Set("xxh64", xxh64_hex(f.xxh64));
                       a.Set(uint32_t(i), o);
                     }
                     return a;
                   });
    });
  }

  struct BatchCopy {
    std::vector<int32_t> tokens, positions;
    std::vector<int64_t> offsets;
    model::PackedBatch view() {
      model::PackedBatch b;
      b.T = int64_t(tokens.size());
      b.tokens = tokens.data();
      b.positions = positions.data();
      b.seq_offsets = offsets.data();
      b.n_seqs = int64_t(offsets.size()) - 1;
      return b;
    }
  };

  static std::shared_ptr<BatchCopy> batch_of(const Napi::Object& o) {
    auto bc = std::make_shared<BatchCopy>();
    Buf tok = host(o.Get("tokens"), "tokens", Kind::I32, -1);
    const int64_t T = int64_t(tok.count);
    Buf pos = host(o.Get("positions"), "positions", Kind::I32, T);
    Buf off = host(o.Get("seqOffsets"), "seqOffsets", Kind::I32, -1);
    if (off.count < 2) throw Error("'seqOffsets' must hold at least two entries: [0, nTokens]");
    bc->tokens = copy_of<int32_t>(tok);
    bc->positions = copy_of<int32_t>(pos);
    const int32_t* po = static_cast<const int32_t*>(off.ptr);
    bc->offsets.assign(po, po + off.count);
    return bc;
  }

  // accumulate({ tokens, positions, seqOffsets, mask?, advantages?, oldLogp?, refLogp? },
  //            { crossEntropy, temperature, chunkTokens, keepLogitsMb, gradScale, ...the resolved GRPO options })
  //   (no oldLogp: the engine's own log-probs of this pass, detached: on-policy, every ratio 1)
  //   -> Promise<stats>; every option required (lib/native/options.ts resolves them)
  Napi::Value Accumulate(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsObject() || !info[1].IsObject()) throw Error("accumulate(batch, options): pass two objects");
      Napi::Object bo = info[0].As<Napi::Object>(), oo = info[1].As<Napi::Object>();
      auto bc = batch_of(bo);
      const int64_t T = int64_t(bc->tokens.size());
      struct In {
        std::vector<uint8_t> mask;
        std::vector<float> adv, old, ref;
        bool has_mask = false, has_ref = false;
        model::TrainStats st;
      };
      auto in = std::make_shared<In>();
      Buf mask = host(bo.Get("mask"), "mask", Kind::U8, T, true);
      Buf adv = host(bo.Get("advantages"), "advantages", Kind::F32, T, true);
      Buf old = host(bo.Get("oldLogp"), "oldLogp", Kind::F32, T, true);
      Buf ref = host(bo.Get("refLogp"), "refLogp", Kind::F32, T, true);
      if (mask.present) in->mask = copy_of<uint8_t>(mask), in->has_mask = true;
      if (adv.present) in->adv = copy_of<float>(adv);
      if (old.present) in->old = copy_of<float>(old);
      if (ref.present) in->ref = copy_of<float>(ref), in->has_ref = true;
      model::TrainOptions opt;
      opt.cross_entropy = req_bool(oo, "crossEntropy");
      if (!opt.cross_entropy && !adv.present)
        throw Error("accumulate: 'advantages' are required for the GRPO loss (or set crossEntropy)");
      opt.temperature = float(req_number(oo, "temperature"));
      read_grpo_options(oo, opt.loss);
      opt.chunk_tokens = req_int(oo, "chunkTokens", 1, std::numeric_limits<int32_t>::max());
      opt.keep_logits_bytes = req_int(oo, "keepLogitsMb", 0, int64_t(1) << 30) << 20;
      opt.grad_scale = float(req_number(oo, "gradScale"));
      PolicyEngine* e = eng_.get();
      return queue(
          info.Env(), info.This().As<Napi::Object>(), mu_,
          [=]() {
            model::TrainInputs ti;
            ti.batch = bc->view();
            ti.mask = in->has_mask ? in->mask.data() : nullptr;
            ti.advantages = in->adv.empty() ? nullptr : in->adv.data();
            ti.old_logp = in->old.empty() ? nullptr : in->old.data();
            ti.ref_logp = in->has_ref ? in->ref.data() : nullptr;
            in->st = e->accumulate(ti, opt);
          },
          [=](Napi::Env env) -> Napi::Value {
            Napi::Object r = Napi::Object::New(env);
            r.Set("loss", in->st.loss);
            r.Set("nTokens", double(in->st.n_tokens));
            r.Set("nActive", double(in->st.n_active));
            r.Set("meanLogp", in->st.mean_logp);
            r.Set("clipLowFrac", in->st.grpo.clip_low_frac);
            r.Set("clipHighFrac", in->st.grpo.clip_high_frac);
            r.Set("dualClipFrac", in->st.grpo.dual_clip_frac);
            r.Set("meanRatio", in->st.grpo.mean_ratio);
            r.Set("meanKl", in->st.grpo.mean_kl);
            return r;
          });
    });
  }

  Napi::Value OptimizerStep(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsObject()) throw Error("optimizerStep: pass the hyper-parameters object");
      Napi::Object h = info[0].As<Napi::Object>();
      model::AdamWOptions o;
      read_adamw(h, o);
      auto r = std::make_shared<AdamWResult>();
      PolicyEngine* e = eng_.get();
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_, [=]() { *r = e->optimizer_step(o); },
                   [=](Napi::Env env) -> Napi::Value { return adamw_result(env, *r, e->step()); });
    });
  }

  // setBf16({ generate, forward }): which calls use the bf16 copy of the weights (docs/model.md)
  Napi::Value SetBf16(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsObject()) throw Error("setBf16: pass { generate: boolean, forward: boolean }");
      auto lk = busy_guard();
      Napi::Object o = info[0].As<Napi::Object>();
      model::Engine::Bf16Use u;
      u.generate = req_bool(o, "generate");
      u.forward = req_bool(o, "forward");
      eng_->set_bf16(u);
      return info.Env().Undefined();
    });
  }

  Napi::Value Bf16(const Napi::CallbackInfo& info) {
    Napi::Object r = Napi::Object::New(info.Env());
    r.Set("generate", eng_->bf16().generate);
    r.Set("forward", eng_->bf16().forward);
    return r;
  }

  Napi::Value ZeroGrad(const Napi::CallbackInfo& info) {
    return sync_void(info, [&] {
      eng_->zero_grad();
    });
  }

  // score({ tokens, positions, seqOffsets }, temperature, reference) -> Promise<Float32Array>
  Napi::Value Score(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsObject()) throw Error("score: pass the batch object");
      auto bc = batch_of(info[0].As<Napi::Object>());
      const float temp = float(to_number(info[1], "temperature"));  // resolved (> 0) in lib/native.ts
      if (!info[2].IsBoolean()) throw Error("score: 'reference' must be true or false");
      const bool ref = info[2].As<Napi::Boolean>().Value();
      auto out = std::make_shared<std::vector<float>>(bc->tokens.size());
      PolicyEngine* e = eng_.get();
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_,
                   [=]() { e->score(bc->view(), temp, ref, out->data()); },
                   [=](Napi::Env env) -> Napi::Value {
                     Napi::Float32Array a = Napi::Float32Array::New(env, out->size());
                     std::memcpy(a.Data(), out->data(), out->size() * 4);
                     return a;
                   });
    });
  }

  Napi::Value Logits(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsObject()) throw Error("logits: pass the batch object");
      auto bc = batch_of(info[0].As<Napi::Object>());
      auto out = std::make_shared<std::vector<float>>();
      PolicyEngine* e = eng_.get();
      const int64_t n = int64_t(bc->tokens.size()) * e->config().vocab;
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_,
                   [=]() {
                     model::checked_resize(*out, n, "the logits");
                     e->logits(bc->view(), out->data());
                   },
                   [=](Napi::Env env) -> Napi::Value {
                     Napi::Float32Array a = Napi::Float32Array::New(env, out->size());
                     std::memcpy(a.Data(), out->data(), out->size() * 4);
                     return a;
                   });
    });
  }

  Napi::Value MakeReference(const Napi::CallbackInfo& info) {
    return sync_void(info, [&] {
      eng_->make_reference();
    });
  }

  // generate(prompts: Int32Array[], { temperature, topP, topK, minP, maxNewTokens, n, seed, seeds, stopIds,
  //           topLogprobs, cancel, onStep }: every option required, seeds null or one per prompt)
  // cancel: null or an Int32Array over a SharedArrayBuffer, one flag per sample (prompts x n), set
  // by the caller (Atomics.store) while the call runs; onStep: null or a function called on the JS
  // thread with { samples, tokens, logprobs, topIds, topLogprobs } (typed arrays) per decode step.
  Napi::Value Generate(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsArray() || !info[1].IsObject()) throw Error("generate(prompts, options): prompts must be an array");
      Napi::Array arr = info[0].As<Napi::Array>();
      auto prompts = std::make_shared<std::vector<std::vector<int32_t>>>();
      for (uint32_t i = 0; i < arr.Length(); ++i) {
        std::string nm = "prompts[" + std::to_string(i) + "]";
        prompts->push_back(copy_of<int32_t>(host(arr.Get(i), nm.c_str(), Kind::I32, -1)));
        for (int32_t t : prompts->back())
          if (t < 0 || int64_t(t) >= eng_->config().vocab)
            throw Error(nm + ": token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                        std::to_string(eng_->config().vocab) + ")");
      }
      Napi::Object o = info[1].As<Napi::Object>();
      model::SampleOptions so;
      so.temperature = float(req_number(o, "temperature"));
      so.top_p = float(req_number(o, "topP"));
      so.top_k = req_int(o, "topK", 0, std::numeric_limits<int32_t>::max());
      so.min_p = float(req_number(o, "minP"));
      so.max_new_tokens = req_int(o, "maxNewTokens", 1, int64_t(1) << 24);
      so.n = req_int(o, "n", 1, 1 << 16);
      so.seed = uint64_t(req_int(o, "seed", 0, (int64_t(1) << 53) - 1));
      Napi::Value sv = o.Get("seeds");  // null: prompt p samples with seed + p
      if (sv.IsArray()) {
        Napi::Array sa = sv.As<Napi::Array>();
        if (sa.Length() != arr.Length())
          throw Error("generate: 'seeds' has " + std::to_string(sa.Length()) + " entries but there are " +
                      std::to_string(arr.Length()) + " prompts (one seed per prompt)");
        for (uint32_t i = 0; i < sa.Length(); ++i)
          so.seeds.push_back(uint64_t(to_int(sa.Get(i), "seeds[]", 0, (int64_t(1) << 53) - 1)));
      } else if (!sv.IsNull()) {
        throw Error("generate: 'seeds' must be null or an array of integers, one per prompt");
      }
      Napi::Value st = o.Get("stopIds");
      if (!st.IsArray()) throw Error("generate: 'stopIds' must be an array of token ids");
      {
        Napi::Array sa = st.As<Napi::Array>();
        for (uint32_t i = 0; i < sa.Length(); ++i) so.stop_ids.push_back(int32_t(to_number(sa.Get(i), "stopIds[]")));
      }
      so.top_logprobs = req_int(o, "topLogprobs", 0, eng_->config().vocab);
      so.release_heap = req_bool(o, "releaseHeap");
      so.logprobs = req_bool(o, "logprobs");
      // the flags stay referenced (and so alive) until the task is deleted on this thread
      std::shared_ptr<Napi::Reference<Napi::Value>> cancel_ref;
      Napi::Value cv = o.Get("cancel");
      if (!cv.IsNull()) {
        // a SharedArrayBuffer view: read directly (args.h's tensor() takes plain ArrayBuffers only)
        napi_typedarray_type type;
        size_t length = 0;
        void* data = nullptr;
        if (!cv.IsTypedArray() || napi_get_typedarray_info(info.Env(), cv, &type, &length, &data, nullptr, nullptr) != napi_ok ||
            type != napi_int32_array)
          throw Error("generate: 'cancel' must be an Int32Array over a SharedArrayBuffer");
        if (int64_t(length) != int64_t(arr.Length()) * so.n)
          throw Error("generate: 'cancel' has " + std::to_string(length) + " flags but there are " +
                      std::to_string(int64_t(arr.Length()) * so.n) + " samples (prompts x n)");
        so.cancel = static_cast<const int32_t*>(data);
        cancel_ref = std::make_shared<Napi::Reference<Napi::Value>>(Napi::Persistent(cv));
      }
      so.stop_all = &g_exiting;
      std::shared_ptr<Napi::ThreadSafeFunction> step_fn;
      Napi::Value os = o.Get("onStep");
      if (os.IsFunction()) {
        step_fn = std::make_shared<Napi::ThreadSafeFunction>(
            Napi::ThreadSafeFunction::New(info.Env(), os.As<Napi::Function>(), "murphy-generate-step", 0, 1));
        so.on_step = [step_fn](const std::vector<model::StepToken>& steps) {
          auto* d = new std::vector<model::StepToken>(steps);
          if (step_fn->NonBlockingCall(d, deliver_steps) != napi_ok) delete d;
        };
      } else if (!os.IsNull()) {
        throw Error("generate: 'onStep' must be null or a function");
      }
      auto res = std::make_shared<std::vector<model::GenResult>>();
      PolicyEngine* e = eng_.get();
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_,
                   [=]() {
                     (void)cancel_ref;
                     struct Release {
                       std::shared_ptr<Napi::ThreadSafeFunction> f;
                       ~Release() { if (f) f->Release(); }
                     } release{step_fn};
                     *res = e->generate(*prompts, so);
                     if (step_fn) wait_for_deliveries(*step_fn);
                   },
                   [=](Napi::Env env) -> Napi::Value {
                     Napi::Array out = Napi::Array::New(env, res->size());
                     for (size_t i = 0; i < res->size(); ++i) {
                       const model::GenResult& g = (*res)[i];
                       Napi::Object r = Napi::Object::New(env);
                       Napi::Int32Array t = Napi::Int32Array::New(env, g.tokens.size());
                       std::memcpy(t.Data(), g.tokens.data(), g.tokens.size() * 4);
                       Napi::Float32Array l = Napi::Float32Array::New(env, g.logp.size());
                       std::memcpy(l.Data(), g.logp.data(), g.logp.size() * 4);
                       r.Set("tokens", t);
                       r.Set("logprobs", l);
                       if (so.top_logprobs > 0) {
                         Napi::Int32Array ti = Napi::Int32Array::New(env, g.top_ids.size());
                         std::memcpy(ti.Data(), g.top_ids.data(), g.top_ids.size() * 4);
                         Napi::Float32Array tl = Napi::Float32Array::New(env, g.top_logp.size());
                         std::memcpy(tl.Data(), g.top_logp.data(), g.top_logp.size() * 4);
                         r.Set("topIds", ti);
                         r.Set("topLogprobs", tl);
                       }
                       r.Set("finishReason", g.finish);
                       out.Set(uint32_t(i), r);
                     }
                     return out;
                   });
    });
  }

  // ---- paged generation (device engines; the CPU engine throws ENOTSUP)

  // kvAllocate(blocks, blockSize): K and V pools for every layer (replaces any)
  Napi::Value KvAllocate(const Napi::CallbackInfo& info) {
    return sync_void(info, [&] {
      eng_->kv_allocate(to_int(info[0], "blocks", 1, int64_t(1) << 40), to_int(info[1], "blockSize", 1, 1 << 20));
    });
  }

  Napi::Value KvRelease(const Napi::CallbackInfo& info) {
    return sync_void(info, [&] {
      eng_->kv_release();
    });
  }

  // kvInfo() -> { blocks, blockSize, bytesPerToken, freeBytes: number | null }
  Napi::Value KvInfo(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto lk = busy_guard();
      const model::KvInfo k = eng_->kv_info();
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("blocks", double(k.blocks));
      o.Set("blockSize", double(k.block_size));
      o.Set("bytesPerToken", double(k.bytes_per_token));
      o.Set("freeBytes", k.free_bytes < 0 ? info.Env().Null() : Napi::Number::New(info.Env(), double(k.free_bytes)));
      return o;
    });
  }

  // A step's PlanArrays (lengths checked in lib/native.ts), copied; values are checked by the engine.
  struct PagedCopy {
    std::vector<int32_t> ids, pos, slots, qsl, lens, tables, logits_idx, rows, sidx, copies;
    int64_t max_blocks = 0;
    std::vector<float> temp, top_p, min_p;
    std::vector<int32_t> top_k, seed, step;
    model::PagedInputs view() const {
      model::PagedInputs in;
      in.T = int64_t(ids.size()), in.n_seqs = int64_t(lens.size()), in.max_blocks = max_blocks;
      in.n_logits = int64_t(logits_idx.size()), in.n_samples = int64_t(rows.size()), in.n_copies = int64_t(copies.size() / 2);
      in.input_ids = ids.data(), in.positions = pos.data(), in.slot_mapping = slots.data(), in.query_start_loc = qsl.data();
      in.seq_lens = lens.data(), in.block_tables = tables.data(), in.logits_indices = logits_idx.data();
      in.sample_rows = rows.data(), in.sample_indices = sidx.data(), in.copies = copies.data();
      return in;
    }
    model::PagedSampling sampling() const {
      model::PagedSampling s;
      s.temperature = temp.data(), s.top_p = top_p.data(), s.top_k = top_k.data(), s.min_p = min_p.data();
      s.seed = reinterpret_cast<const uint32_t*>(seed.data()), s.step = step.data();
      return s;
    }
  };

  static std::shared_ptr<PagedCopy> paged_of(const Napi::Value& v) {
    if (!v.IsObject()) throw Error("pass the step's PlanArrays object");
    Napi::Object o = v.As<Napi::Object>();
    auto c = std::make_shared<PagedCopy>();
    auto i32 = [&](const char* name, int64_t n) { return copy_of<int32_t>(host(o.Get(name), name, Kind::I32, n)); };
    c->ids = i32("inputIds", -1);
    const int64_t T = int64_t(c->ids.size());
    c->pos = i32("positions", T), c->slots = i32("slotMapping", T);
    c->lens = i32("seqLens", -1);
    const int64_t S = int64_t(c->lens.size());
    c->qsl = i32("queryStartLoc", S + 1);
    c->max_blocks = to_int(o.Get("maxBlocks"), "maxBlocks", 1, int64_t(1) << 30);
    c->tables = i32("blockTables", S * c->max_blocks);
    c->logits_idx = i32("logitsIndices", -1);
    c->rows = i32("sampleRows", -1);
    c->sidx = i32("sampleIndices", int64_t(c->rows.size()));
    c->copies = i32("copies", -1);
    if (c->copies.size() % 2) throw Error("'copies' must hold (src, dst) pairs");
    return c;
  }

  // pagedStep(arrays, { temperature, topP, minP: Float32Array, topK, seed (uint32 bits), step: Int32Array })
  //   -> Promise<{ tokens: Int32Array, logprobs: Float32Array }>, one entry per sample row
  Napi::Value PagedStep(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto c = paged_of(info[0]);
      if (!info[1].IsObject()) throw Error("pagedStep(arrays, sampling): pass the sampling object");
      Napi::Object so = info[1].As<Napi::Object>();
      const int64_t R = int64_t(c->rows.size());
      c->temp = copy_of<float>(host(so.Get("temperature"), "temperature", Kind::F32, R));
      c->top_p = copy_of<float>(host(so.Get("topP"), "topP", Kind::F32, R));
      c->min_p = copy_of<float>(host(so.Get("minP"), "minP", Kind::F32, R));
      c->top_k = copy_of<int32_t>(host(so.Get("topK"), "topK", Kind::I32, R));
      c->seed = copy_of<int32_t>(host(so.Get("seed"), "seed", Kind::I32, R));
      c->step = copy_of<int32_t>(host(so.Get("step"), "step", Kind::I32, R));
      auto tok = std::make_shared<std::vector<int32_t>>(size_t(R));
      auto lp = std::make_shared<std::vector<float>>(size_t(R));
      PolicyEngine* e = eng_.get();
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_,
                   [=]() { e->paged_step(c->view(), c->sampling(), tok->data(), lp->data()); },
                   [=](Napi::Env env) -> Napi::Value {
                     Napi::Object r = Napi::Object::New(env);
                     Napi::Int32Array t = Napi::Int32Array::New(env, tok->size());
                     if (!tok->empty()) std::memcpy(t.Data(), tok->data(), tok->size() * 4);
                     Napi::Float32Array l = Napi::Float32Array::New(env, lp->size());
                     if (!lp->empty()) std::memcpy(l.Data(), lp->data(), lp->size() * 4);
                     r.Set("tokens", t);
                     r.Set("logprobs", l);
                     return r;
                   });
    });
  }

  // pagedLogits(arrays) -> Promise<Float32Array> [L x vocab]
  Napi::Value PagedLogits(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto c = paged_of(info[0]);
      auto out = std::make_shared<std::vector<float>>();
      PolicyEngine* e = eng_.get();
      const int64_t n = int64_t(c->logits_idx.size()) * e->config().vocab;
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_,
                   [=]() {
                     model::checked_resize(*out, n, "the logits");
                     e->paged_logits(c->view(), out->data());
                   },
                   [=](Napi::Env env) -> Napi::Value {
                     Napi::Float32Array a = Napi::Float32Array::New(env, out->size());
                     if (!out->empty()) std::memcpy(a.Data(), out->data(), out->size() * 4);
                     return a;
                   });
    });
  }

  // ---- ZeRO-1 on the engine's memory (device engines; policy_engine.h, zero_shard.h)

  static std::vector<int64_t> bounds_of(const Napi::Object& o, const char* key) {
    const Napi::Value v = o.Get(key);
    if (!v.IsArray()) throw Error(std::string("zeroInit: '") + key + "' must be an array of integers");
    Napi::Array a = v.As<Napi::Array>();
    std::vector<int64_t> out;
    for (uint32_t i = 0; i < a.Length(); ++i) out.push_back(to_int(a.Get(i), key, 0, int64_t(1) << 50));
    return out;
  }

  // zeroInit({ rank, worldSize, shards: number[] (worldSize + 1 bounds), buckets: number[] (bounds) })
  Napi::Value ZeroInit(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsObject()) throw Error("zeroInit: pass the plan { rank, worldSize, shards, buckets }");
      Napi::Object o = info[0].As<Napi::Object>();
      gpu::ZeroPlan p;
      p.world = int(req_int(o, "worldSize", 1, 1 << 20));
      p.rank = int(req_int(o, "rank", 0, p.world - 1));
      p.shards = bounds_of(o, "shards");
      p.buckets = bounds_of(o, "buckets");
      auto lk = busy_guard();
      eng_->zero_init(p);
      return info.Env().Undefined();
    });
  }

  // zeroStep(communicator, { lr, beta1, beta2, eps, weightDecay, maxGradNorm }, timeoutMs)
  //   -> Promise<{ gradNorm, clipCoef, skipped, step }>  (collective; waits on NCCL off the JS thread)
  Napi::Value ZeroStep(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      std::shared_ptr<gpu::NcclComm> comm = gpu::nccl_comm_of(info[0], "zeroStep");
      if (!info[1].IsObject()) throw Error("zeroStep: pass the hyper-parameters object");
      Napi::Object h = info[1].As<Napi::Object>();
      gpu::ZeroStepOptions o;
      read_adamw(h, o);
      o.timeout_ms = to_number(info[2], "timeoutMs");
      if (!(o.timeout_ms > 0)) throw Error("zeroStep: timeoutMs must be > 0");
      auto r = std::make_shared<AdamWResult>();
      PolicyEngine* e = eng_.get();
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_, [=]() { *r = e->zero_step(*comm, o); },
                   [=](Napi::Env env) -> Napi::Value { return adamw_result(env, *r, e->step()); });
    });
  }

  // zeroOverlapNext(communicator, timeoutMs, timeline): the next accumulate's backward starts
  // each bucket's gradient reduction on the communicator once its gradients are final
  // (zero_shard.h); timeline: CUDA timing events for zeroOverlapTrace
  Napi::Value ZeroOverlapNext(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      std::shared_ptr<gpu::NcclComm> comm = gpu::nccl_comm_of(info[0], "zeroOverlapNext");
      const double ms = to_number(info[1], "timeoutMs");
      if (!info[2].IsBoolean()) throw Error("zeroOverlapNext: timeline must be a boolean");
      const bool timeline = info[2].As<Napi::Boolean>().Value();
      auto lk = busy_guard();
      eng_->zero_overlap_next(comm, ms, timeline);
      return info.Env().Undefined();
    });
  }

  // zeroFlush(communicator, timeoutMs) -> Promise<void>: starts the buckets' reductions not
  // started yet (collective; zeroStep waits for them)
  Napi::Value ZeroFlush(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      std::shared_ptr<gpu::NcclComm> comm = gpu::nccl_comm_of(info[0], "zeroFlush");
      const double ms = to_number(info[1], "timeoutMs");
      if (!(ms > 0)) throw Error("zeroFlush: timeoutMs must be > 0");
      PolicyEngine* e = eng_.get();
      return queue(info.Env(), info.This().As<Napi::Object>(), mu_, [=]() { e->zero_flush(comm, ms); },
                   [](Napi::Env env) -> Napi::Value { return env.Undefined(); });
    });
  }

  // zeroOverlapTrace() -> { starts: number[], timelineMs: number | null }: where the last
  // overlapped step started each bucket, and (CUDA, armed with timeline) the milliseconds from
  // its first reduction's start to the end of its backward on the device (tests)
  Napi::Value ZeroOverlapTrace(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto lk = busy_guard();
      double ms = 0;
      const std::vector<int64_t> t = eng_->zero_overlap_trace(&ms);
      Napi::Array a = Napi::Array::New(info.Env(), t.size());
      for (size_t i = 0; i < t.size(); ++i) a.Set(uint32_t(i), double(t[i]));
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("starts", a);
      o.Set("timelineMs", std::isnan(ms) ? info.Env().Null() : Napi::Number::New(info.Env(), ms));
      return o;
    });
  }

  // zeroShard() -> { master, m, v: Float32Array (the shard's), step }
  Napi::Value ZeroShard(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto lk = busy_guard();
      const size_t n = size_t(eng_->zero_shard_size());
      Napi::Float32Array master = Napi::Float32Array::New(info.Env(), n), m = Napi::Float32Array::New(info.Env(), n),
                         v = Napi::Float32Array::New(info.Env(), n);
      eng_->zero_get_shard(master.Data(), m.Data(), v.Data());
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("master", master);
      o.Set("m", m);
      o.Set("v", v);
      o.Set("step", double(eng_->step()));
      return o;
    });
  }

  // zeroSetShard(master, m, v, step): the shard's master weights and moments, and the step count
  Napi::Value ZeroSetShard(const Napi::CallbackInfo& info) {
    return sync_void(info, [&] {
      const int64_t n = eng_->zero_shard_size();
      Buf master = host(info[0], "master", Kind::F32, n), m = host(info[1], "m", Kind::F32, n),
          v = host(info[2], "v", Kind::F32, n);
      const int64_t step = to_int(info[3], "step", 0, int64_t(1) << 50);
      eng_->zero_set_shard(static_cast<const float*>(master.ptr), static_cast<const float*>(m.ptr),
                           static_cast<const float*>(v.ptr), step);
    });
  }

  // packBf16([{ name, offset }], out: Uint8Array (emulate) | u8 DeviceArray (cuda)): each parameter's
  // bf16 weights at its byte offset of `out` (a weight-sync bucket)
  Napi::Value PackBf16(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      if (!info[0].IsArray()) throw Error("packBf16(entries, out): entries must be an array of { name, offset }");
      Napi::Array a = info[0].As<Napi::Array>();
      std::vector<PolicyEngine::PackEntry> es;
      for (uint32_t i = 0; i < a.Length(); ++i) {
        if (!a.Get(i).IsObject()) throw Error("packBf16: entries must be objects { name, offset }");
        Napi::Object o = a.Get(i).As<Napi::Object>();
        const model::ParamInfo& p = find(o.Get("name"));
        PolicyEngine::PackEntry e;
        e.offset = p.offset, e.numel = p.numel, e.byte_offset = req_int(o, "offset", 0, int64_t(1) << 50);
        es.push_back(e);
      }
      Buf out = tensor(info[1], "out", Kind::U8, -1);
      auto lk = busy_guard();
      eng_->pack_bf16(es, out.ptr, int64_t(out.count), out.device != Device::Host);
      return info.Env().Undefined();
    });
  }

  // engine() -> { device: 'cpu' | 'emulate' | 'cuda', storage: 'f32' | 'bf16' }
  Napi::Value EngineInfo(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("device", eng_->device());
      o.Set("storage", eng_->storage());
      return o;
    });
  }

  Napi::Value Memory(const Napi::CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      Engine::Memory m = eng_->memory();
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("weights", double(m.weights));
      o.Set("grads", double(m.grads));
      o.Set("optimizer", double(m.optimizer));
      o.Set("reference", double(m.reference));
      o.Set("activationsPeak", double(m.activations_peak));
      o.Set("matmulCache", double(m.matmul_cache));
      return o;
    });
  }
};

// The engine options of loadModel / randomModel: undefined or { device: 'cpu' | 'emulate' | 'cuda',
// storage: 'bf16' | 'f32', gradientCheckpointing: boolean } (lib/model resolves the defaults).
struct EngineChoice {
  bool cpu = true;
  model::DeviceEngineSpec spec;
};
EngineChoice engine_choice(const Napi::Value& v) {
  EngineChoice c;
  if (v.IsUndefined() || v.IsNull()) return c;
  if (!v.IsObject()) throw Error("engine options must be an object { device, storage, gradientCheckpointing }");
  Napi::Object o = v.As<Napi::Object>();
  const Napi::Value d = o.Get("device"), s = o.Get("storage"), g = o.Get("gradientCheckpointing");
  if (!d.IsString()) throw Error("engine options: 'device' must be 'cpu', 'emulate' or 'cuda'");
  const std::string dev = d.As<Napi::String>().Utf8Value();
  if (dev == "cpu") return c;
  if (dev != "emulate" && dev != "cuda") throw Error("engine options: 'device' must be 'cpu', 'emulate' or 'cuda' (got '" + dev + "')");
  c.cpu = false;
  c.spec.device = dev;
  if (!s.IsString()) throw Error("engine options: 'storage' must be 'bf16' or 'f32'");
  c.spec.storage = s.As<Napi::String>().Utf8Value();
  if (!g.IsBoolean()) throw Error("engine options: 'gradientCheckpointing' must be true or false");
  c.spec.gradient_checkpointing = g.As<Napi::Boolean>().Value();
  const Napi::Value r = o.Get("reverseHarness");  // optional, tests: emulate's harness order
  if (!r.IsUndefined() && !r.IsBoolean()) throw Error("engine options: 'reverseHarness' must be true or false");
  c.spec.reverse_harness = r.IsBoolean() && r.As<Napi::Boolean>().Value();
  return c;
}

// loadModel(dir, engine?) -> Promise<ModelEngine>
Napi::Value LoadModel(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsString()) throw Error("loadModel: 'dir' must be a string");
    std::string dir = info[0].As<Napi::String>().Utf8Value();
    const EngineChoice ch = engine_choice(info[1]);
    auto holder = std::make_shared<std::unique_ptr<PolicyEngine>>();
    return queue(info.Env(), Napi::Object(), nullptr,
                 [=]() {
                   *holder = ch.cpu ? model::wrap_cpu_engine(Engine::load(dir)) : model::load_device_engine(ch.spec, dir);
                 },
                 [=](Napi::Env env) -> Napi::Value { return ModelEngine::Wrap(env, holder->release()); });
  });
}

// randomModel(configJson, seed, initStd, engine?) -> Promise<ModelEngine>
Napi::Value RandomModel(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsString()) throw Error("randomModel: 'configJson' must be a string");
    model::ModelConfig c = model::parse_config(info[0].As<Napi::String>().Utf8Value(), "config");
    uint64_t seed = uint64_t(to_int(info[1], "seed", 0, int64_t(1) << 53));
    float std_ = float(to_number(info[2], "initStd"));
    const EngineChoice ch = engine_choice(info[3]);
    auto holder = std::make_shared<std::unique_ptr<PolicyEngine>>();
    return queue(info.Env(), Napi::Object(), nullptr,
                 [=]() {
                   *holder = ch.cpu ? model::wrap_cpu_engine(Engine::random(c, seed, std_))
                                    : model::random_device_engine(ch.spec, c, seed, std_);
                 },
                 [=](Napi::Env env) -> Napi::Value { return ModelEngine::Wrap(env, holder->release()); });
  });
}

// parseModelConfig(json) -> the normalized config (throws naming the field)
Napi::Value ParseModelConfig(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsString()) throw Error("parseModelConfig: pass the JSON text");
    if (!info[1].IsString()) throw Error("parseModelConfig: pass the name of the file the text came from");
    const std::string where = info[1].As<Napi::String>().Utf8Value();
    model::parse_config(info[0].As<Napi::String>().Utf8Value(), where);
    return Napi::Boolean::New(info.Env(), true);
  });
}

// deviceGemmTflops(m, n, k, iters) -> the bf16 cuBLASLt GEMM rate on device 0 (CUDA build with a device)
Napi::Value DeviceGemmTflops(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const int64_t lim = int64_t(1) << 20;
    const double t = gpu::lt_gemm_tflops(to_int(info[0], "m", 1, lim), to_int(info[1], "n", 1, lim),
                                         to_int(info[2], "k", 1, lim), int(to_int(info[3], "iters", 1, 10000)));
    return Napi::Number::New(info.Env(), t);
  });
}

Napi::Value SetReferenceOps(const Napi::CallbackInfo& info) {
  model::set_reference_ops(info[0].ToBoolean().Value());
  return info.Env().Undefined();
}

}  // namespace

void register_model(Napi::Env env, Napi::Object exports) {
  exports.Set("ModelEngine", ModelEngine::Init(env));
  exports.Set("loadModel", Napi::Function::New(env, LoadModel));
  exports.Set("randomModel", Napi::Function::New(env, RandomModel));
  exports.Set("parseModelConfig", Napi::Function::New(env, ParseModelConfig));
  exports.Set("setReferenceOps", Napi::Function::New(env, SetReferenceOps));
  exports.Set("markExiting", Napi::Function::New(env, MarkExiting));
  exports.Set("deviceGemmTflops", Napi::Function::New(env, DeviceGemmTflops));
}

}  // namespace addon
}  // namespace murphy
