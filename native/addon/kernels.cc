// Bindings of the four kernel families: argument checks and conversion only.
#include <napi.h>

#include <limits>

#include "args.h"
#include "register.h"
#include "murphy/dispatch.h"

namespace murphy {
namespace addon {
namespace {

constexpr int64_t kMaxRows = int64_t(1) << 40;
constexpr int64_t kMaxVocab = std::numeric_limits<int32_t>::max();

DType parse_dtype(const Napi::Value& v) {
  std::string d = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (d == "f32") return DType::F32;
  if (d == "bf16") return DType::BF16;
  throw Error("'dtype' must be 'f32' or 'bf16'");
}

Kind kind_of(DType d) { return d == DType::F32 ? Kind::F32 : Kind::BF16; }

int64_t checked_elems(int64_t rows, int64_t vocab) {
  if (rows > 0 && vocab > std::numeric_limits<int64_t>::max() / rows)
    throw Error("nRows * vocab overflows 64 bits");
  return rows * vocab;
}

// The arguments both log-prob bindings share, read into a (either args struct): dtype (1),
// nRows (3), vocab (4), temperature (5), then logits (0: nRows x vocab of dtype) and targets
// (2: nRows int32). Returns the two buffers for the same-device check.
struct LogprobOperands {
  Buf logits, targets;
};

template <class Args>
LogprobOperands logprob_operands(const Napi::CallbackInfo& info, Args& a) {
  a.dtype = parse_dtype(info[1]);
  a.n_rows = to_int(info[3], "nRows", 0, kMaxRows);
  a.vocab = to_int(info[4], "vocab", 1, kMaxVocab);
  a.temperature = float(to_number(info[5], "temperature"));
  const int64_t nv = checked_elems(a.n_rows, a.vocab);
  LogprobOperands o{tensor(info[0], "logits", kind_of(a.dtype), nv), tensor(info[2], "targets", Kind::I32, a.n_rows)};
  a.logits = o.logits.ptr;
  a.targets = static_cast<const int32_t*>(o.targets.ptr);
  return o;
}

// logprobForward(logits, dtype, targets, nRows, vocab, temperature, logpOut, lseOut, entropyOut?)
Napi::Value LogprobForward(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    LogprobForwardArgs a;
    LogprobOperands x = logprob_operands(info, a);
    Buf logp = tensor(info[6], "logp", Kind::F32, a.n_rows);
    Buf lse = tensor(info[7], "lse", Kind::F32, a.n_rows);
    Buf ent = tensor(info[8], "entropy", Kind::F32, a.n_rows, true);
    Device d = same_device({&x.logits, &x.targets, &logp, &lse, &ent}, "logprobForward");
    a.logp = static_cast<float*>(logp.ptr);
    a.lse = static_cast<float*>(lse.ptr);
    a.entropy = ent.present ? static_cast<float*>(ent.ptr) : nullptr;
    logprob_forward(a, d);
    return info.Env().Undefined();
  });
}

// logprobBackward(logits, dtype, targets, nRows, vocab, temperature, lse, gradLogp, gradLogitsOut)
Napi::Value LogprobBackward(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    LogprobBackwardArgs a;
    LogprobOperands x = logprob_operands(info, a);
    Buf lse = tensor(info[6], "lse", Kind::F32, a.n_rows);
    Buf g = tensor(info[7], "gradLogp", Kind::F32, a.n_rows);
    Buf out = tensor(info[8], "gradLogits", kind_of(a.dtype), a.n_rows * a.vocab);  // no overflow: checked above
    Device d = same_device({&x.logits, &x.targets, &lse, &g, &out}, "logprobBackward");
    a.lse = static_cast<const float*>(lse.ptr);
    a.grad_logp = static_cast<const float*>(g.ptr);
    a.grad_logits = out.ptr;
    logprob_backward(a, d);
    return info.Env().Undefined();
  });
}

// grpoLoss({ logp, oldLogp, refLogp?, advantages, mask?, seqOffsets, gradLogp?, tokenLoss?,
//            ...the resolved GRPO options (read_grpo_options) }) -> stats
Napi::Value GrpoLoss(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsObject()) throw Error("grpoLoss: pass one options object");
    Napi::Object o = info[0].As<Napi::Object>();
    Buf logp = tensor(o.Get("logp"), "logp", Kind::F32, -1);
    const int64_t n = int64_t(logp.count);
    Buf old = tensor(o.Get("oldLogp"), "oldLogp", Kind::F32, n);
    Buf ref = tensor(o.Get("refLogp"), "refLogp", Kind::F32, n, true);
    Buf adv = tensor(o.Get("advantages"), "advantages", Kind::F32, n);
    Buf mask = tensor(o.Get("mask"), "mask", Kind::U8, n, true);
    Buf offs = tensor(o.Get("seqOffsets"), "seqOffsets", Kind::I64, -1);
    Buf grad = tensor(o.Get("gradLogp"), "gradLogp", Kind::F32, n, true);
    Buf tok = tensor(o.Get("tokenLoss"), "tokenLoss", Kind::F32, n, true);
    Device d = same_device({&logp, &old, &ref, &adv, &mask, &offs, &grad, &tok}, "grpoLoss");
    if (offs.count < 2) throw Error("'seqOffsets' must hold at least two entries: [0, nTokens]");
    GrpoLossArgs a;
    a.n_tokens = n;
    a.logp = static_cast<const float*>(logp.ptr);
    a.old_logp = static_cast<const float*>(old.ptr);
    a.ref_logp = ref.present ? static_cast<const float*>(ref.ptr) : nullptr;
    a.advantages = static_cast<const float*>(adv.ptr);
    a.mask = mask.present ? static_cast<const uint8_t*>(mask.ptr) : nullptr;
    a.seq_offsets = static_cast<const int64_t*>(offs.ptr);
    a.n_seqs = int64_t(offs.count) - 1;
    read_grpo_options(o, a);
    a.grad_logp = grad.present ? static_cast<float*>(grad.ptr) : nullptr;
    a.token_loss = tok.present ? static_cast<float*>(tok.ptr) : nullptr;
    GrpoLossStats st = grpo_loss(a, d);
    Napi::Env env = info.Env();
    Napi::Object r = Napi::Object::New(env);
    r.Set("loss", st.loss);
    r.Set("clipLowFrac", st.clip_low_frac);
    r.Set("clipHighFrac", st.clip_high_frac);
    r.Set("dualClipFrac", st.dual_clip_frac);
    r.Set("meanRatio", st.mean_ratio);
    r.Set("meanKl", st.mean_kl);
    r.Set("nActive", double(st.n_active));
    return r;
  });
}

// adamw([{ param, grad, m, v, paramBf16?, decay }], { lr, beta1, beta2, eps, weightDecay, step,
//        maxGradNorm, stochasticRounding, seed }: every option required) -> { gradNorm, clipCoef, skipped }
Napi::Value AdamW(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsArray()) throw Error("adamw: the first argument must be an array of tensors");
    if (!info[1].IsObject()) throw Error("adamw: the second argument must be the hyper-parameters object");
    Napi::Array arr = info[0].As<Napi::Array>();
    Napi::Object h = info[1].As<Napi::Object>();
    std::vector<AdamWTensor> ts(arr.Length());
    std::vector<Buf> all;
    all.reserve(ts.size() * 5);
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      Napi::Value e = arr.Get(i);
      if (!e.IsObject()) throw Error("adamw: tensors[" + std::to_string(i) + "] must be an object");
      Napi::Object t = e.As<Napi::Object>();
      const std::string at = "tensors[" + std::to_string(i) + "].";
      Buf p = tensor(t.Get("param"), (at + "param").c_str(), Kind::F32, -1);
      const int64_t n = int64_t(p.count);
      Napi::Value gv = t.Get("grad");
      const bool g_bf16 = gv.IsTypedArray() ? gv.As<Napi::TypedArray>().TypedArrayType() == napi_uint16_array
                                            : (gv.IsObject() && gv.As<Napi::Object>().Get("kind").IsString() &&
                                               gv.As<Napi::Object>().Get("kind").As<Napi::String>().Utf8Value() == "bf16");
      Buf g = tensor(gv, (at + "grad").c_str(), g_bf16 ? Kind::BF16 : Kind::F32, n);
      Buf m = tensor(t.Get("m"), (at + "m").c_str(), Kind::F32, n);
      Buf v = tensor(t.Get("v"), (at + "v").c_str(), Kind::F32, n);
      Buf pb = tensor(t.Get("paramBf16"), (at + "paramBf16").c_str(), Kind::BF16, n, true);
      all.insert(all.end(), {p, g, m, v, pb});
      AdamWTensor& x = ts[i];
      x.param = static_cast<float*>(p.ptr);
      x.grad = g.ptr;
      x.grad_dtype = g_bf16 ? DType::BF16 : DType::F32;
      x.m = static_cast<float*>(m.ptr);
      x.v = static_cast<float*>(v.ptr);
      x.param_bf16 = pb.present ? static_cast<uint16_t*>(pb.ptr) : nullptr;
      x.numel = n;
      x.decay = req_bool(t, "decay");
    }
    Device d = Device::Host;
    for (size_t i = 0; i < all.size(); ++i) {
      if (!all[i].present) continue;
      if (all[i].device != all[0].device)
        throw Error("adamw: all arrays must live in the same place (all host typed arrays or all device arrays)");
      d = all[i].device;
    }
    AdamWArgs a;
    a.tensors = ts.data();
    a.n_tensors = int64_t(ts.size());
    a.lr = req_number(h, "lr");
    a.beta1 = req_number(h, "beta1");
    a.beta2 = req_number(h, "beta2");
    a.eps = req_number(h, "eps");
    a.weight_decay = req_number(h, "weightDecay");
    a.step = req_int(h, "step", 1, int64_t(1) << 50);
    a.max_grad_norm = float(req_number(h, "maxGradNorm"));
    a.stochastic_rounding = req_bool(h, "stochasticRounding");
    a.seed = uint64_t(req_int(h, "seed", 0, (int64_t(1) << 53) - 1));
    AdamWResult r = adamw(a, d);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("gradNorm", r.grad_norm);
    out.Set("clipCoef", r.clip_coef);
    out.Set("skipped", r.skipped);
    return out;
  });
}

// The shared body of f32ToBf16, bf16ToF32 and copy: source (kind `from`, any length) and
// destination (kind `to`, the same length) in one place, then run(src, dst, count, device).
// Returns the destination.
template <class Run>
Napi::Value ElementwiseInto(const Napi::CallbackInfo& info, const char* op, Kind from, Kind to, Run run) {
  return guarded(info, [&]() -> Napi::Value {
    Buf src = tensor(info[0], "source", from, -1);
    Buf dst = tensor(info[1], "destination", to, int64_t(src.count));
    Device d = same_device({&src, &dst}, op);
    run(src.ptr, dst.ptr, int64_t(src.count), d);
    return info[1];
  });
}

Napi::Value F32ToBf16(const Napi::CallbackInfo& info) {
  return ElementwiseInto(info, "toBf16", Kind::F32, Kind::BF16, [](void* s, void* t, int64_t n, Device d) {
    f32_to_bf16(static_cast<const float*>(s), static_cast<uint16_t*>(t), n, d);
  });
}

Napi::Value Bf16ToF32(const Napi::CallbackInfo& info) {
  return ElementwiseInto(info, "fromBf16", Kind::BF16, Kind::F32, [](void* s, void* t, int64_t n, Device d) {
    bf16_to_f32(static_cast<const uint16_t*>(s), static_cast<float*>(t), n, d);
  });
}

// copy(src, dst): byte copy between two arrays of one kind and length (f32 arrays).
Napi::Value Copy(const Napi::CallbackInfo& info) {
  return ElementwiseInto(info, "copy", Kind::F32, Kind::F32, [](void* s, void* t, int64_t n, Device d) {
    copy(s, t, n * 4, d);
  });
}

}  // namespace

void register_kernels(Napi::Env env, Napi::Object exports) {
  exports.Set("logprobForward", Napi::Function::New(env, LogprobForward));
  exports.Set("logprobBackward", Napi::Function::New(env, LogprobBackward));
  exports.Set("grpoLoss", Napi::Function::New(env, GrpoLoss));
  exports.Set("adamw", Napi::Function::New(env, AdamW));
  exports.Set("f32ToBf16", Napi::Function::New(env, F32ToBf16));
  exports.Set("bf16ToF32", Napi::Function::New(env, Bf16ToF32));
  exports.Set("copy", Napi::Function::New(env, Copy));
}

}  // namespace addon
}  // namespace murphy
