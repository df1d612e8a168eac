// Node-API binding of the GPU engine's host-side pieces (checks and conversions only).
//   cublasLtLoad(candidates: {path, origin}[], install: boolean)
//     -> { ok, path, origin, version, versionText, reason, attempts: {path, origin, error}[] }
//   kernelCuda(case) -> the same on the GPU, plus the harness run (CUDA build only)
//   kernelHarness({ op, dtype: 'f32'|'bf16', order: 'forward'|'reverse', block, sizes..., inputs: {name: Float32Array},
//                   ints?: Int32Array, params?: {name: number}, intInputs?: {name: Int32Array} })
//                   -> { kernel: {name: Float32Array}, reference: {name: Float32Array} }
#include <napi.h>

#include "../addon/args.h"
#include "../addon/register.h"
#include "cublaslt.h"
#include "library_binding.h"
#include "harness_ops.h"

namespace murphy {
namespace gpu {

namespace {

Napi::Value CublasLtLoad(const Napi::CallbackInfo& info) {
  return addon::guarded(info, [&]() -> Napi::Value {
    const auto f = cublaslt_load(library_candidates(info, "cublasLtLoad"), info[1].As<Napi::Boolean>());
    return library_report(info.Env(), f, cublaslt_version_text(f.version));
  });
}

double num(const Napi::Object& o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return fallback;
  if (!v.IsNumber()) throw Error(std::string("kernelHarness: '") + key + "' must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

Napi::Object to_js(Napi::Env env, const std::map<std::string, std::vector<float>>& m) {
  Napi::Object o = Napi::Object::New(env);
  for (const auto& kv : m) {
    Napi::Float32Array a = Napi::Float32Array::New(env, kv.second.size());
    std::copy(kv.second.begin(), kv.second.end(), a.Data());
    o.Set(kv.first, a);
  }
  return o;
}

HarnessCase parse_case(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsObject()) throw Error("kernelHarness(case): expected an object");
  Napi::Object o = info[0].As<Napi::Object>();
  HarnessCase c;
  if (!o.Get("op").IsString()) throw Error("kernelHarness: 'op' must be a string");
  c.op = o.Get("op").As<Napi::String>();
  const std::string dtype = o.Get("dtype").IsString() ? std::string(o.Get("dtype").As<Napi::String>()) : "f32";
  if (dtype != "f32" && dtype != "bf16") throw Error("kernelHarness: dtype must be 'f32' or 'bf16'");
  c.bf16 = dtype == "bf16";
  const std::string order = o.Get("order").IsString() ? std::string(o.Get("order").As<Napi::String>()) : "forward";
  if (order != "forward" && order != "reverse") throw Error("kernelHarness: order must be 'forward' or 'reverse'");
  c.order = order == "forward" ? Order::Forward : Order::Reverse;
  c.block = int(num(o, "block", 256));
  c.rows = int64_t(num(o, "rows", 0));
  c.n = int64_t(num(o, "n", 0));
  c.tokens = int64_t(num(o, "tokens", 0));
  c.heads = int64_t(num(o, "heads", 0));
  c.head_dim = int64_t(num(o, "headDim", 0));
  c.max_pos = int64_t(num(o, "maxPos", 0));
  c.theta = num(o, "theta", 10000.0);
  c.vocab = int64_t(num(o, "vocab", 0));
  c.dim = int64_t(num(o, "dim", 0));
  c.eps = float(num(o, "eps", 1e-6));
  c.kv_heads = int64_t(num(o, "kvHeads", 0));
  c.scale = float(num(o, "scale", 1.0));
  if (o.Get("fault").IsString()) c.fault = o.Get("fault").As<Napi::String>();
  c.accumulate = o.Get("accumulate").IsBoolean() && o.Get("accumulate").As<Napi::Boolean>().Value();
  if (o.Get("inputs").IsObject()) {
    Napi::Object in = o.Get("inputs").As<Napi::Object>();
    Napi::Array names = in.GetPropertyNames();
    for (uint32_t i = 0; i < names.Length(); ++i) {
      const std::string name = names.Get(i).As<Napi::String>();
      Napi::Value v = in.Get(name);
      if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
        throw Error("kernelHarness: input '" + name + "' must be a Float32Array");
      Napi::Float32Array a = v.As<Napi::Float32Array>();
      c.in[name] = std::vector<float>(a.Data(), a.Data() + a.ElementLength());
    }
  }
  if (o.Get("params").IsObject()) {
    Napi::Object in = o.Get("params").As<Napi::Object>();
    Napi::Array names = in.GetPropertyNames();
    for (uint32_t i = 0; i < names.Length(); ++i) {
      const std::string name = names.Get(i).As<Napi::String>();
      if (!in.Get(name).IsNumber()) throw Error("kernelHarness: param '" + name + "' must be a number");
      c.params[name] = in.Get(name).As<Napi::Number>().DoubleValue();
    }
  }
  if (o.Get("intInputs").IsObject()) {
    Napi::Object in = o.Get("intInputs").As<Napi::Object>();
    Napi::Array names = in.GetPropertyNames();
    for (uint32_t i = 0; i < names.Length(); ++i) {
      const std::string name = names.Get(i).As<Napi::String>();
      Napi::Value v = in.Get(name);
      if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        throw Error("kernelHarness: int input '" + name + "' must be an Int32Array");
      Napi::Int32Array a = v.As<Napi::Int32Array>();
      c.int_in[name] = std::vector<int32_t>(a.Data(), a.Data() + a.ElementLength());
    }
  }
  if (o.Get("ints").IsTypedArray()) {
    Napi::TypedArray t = o.Get("ints").As<Napi::TypedArray>();
    if (t.TypedArrayType() != napi_int32_array) throw Error("kernelHarness: 'ints' must be an Int32Array");
    Napi::Int32Array a = t.As<Napi::Int32Array>();
    c.ints.assign(a.Data(), a.Data() + a.ElementLength());
  }
  return c;
}

Napi::Value KernelHarness(const Napi::CallbackInfo& info) {
  return addon::guarded(info, [&]() -> Napi::Value {
    HarnessCase c = parse_case(info);
    HarnessOut r = run_harness_case(c);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("kernel", to_js(info.Env(), r.kernel));
    out.Set("reference", to_js(info.Env(), r.reference));
    return out;
  });
}

// kernelCuda(case) -> { kernel: the CUDA kernel's outputs, reference: the CPU op's, harness: the
// same kernel code run by the CPU harness }. CUDA build only.
Napi::Value KernelCuda(const Napi::CallbackInfo& info) {
  return addon::guarded(info, [&]() -> Napi::Value {
#ifdef MURPHY_WITH_CUDA
    HarnessCase c = parse_case(info);
    c.run_plan = c.op.rfind("lt_linear_", 0) != 0;  // the GEMM reference is the CPU op alone
    HarnessOut h = run_harness_case(c);  // checks the case first
    std::map<std::string, std::vector<float>> k = run_cuda_case(c);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("kernel", to_js(info.Env(), k));
    out.Set("reference", to_js(info.Env(), h.reference));
    out.Set("harness", to_js(info.Env(), h.kernel));
    return out;
#else
    (void)info;
    throw Error("kernelCuda: this binary was built without CUDA (npm run build:cuda)");
#endif
  });
}

}  // namespace

void register_gpu(Napi::Env env, Napi::Object exports) {
  exports.Set("cublasLtLoad", Napi::Function::New(env, CublasLtLoad));
  exports.Set("kernelHarness", Napi::Function::New(env, KernelHarness));
  exports.Set("kernelCuda", Napi::Function::New(env, KernelCuda));
}

}  // namespace gpu
}  // namespace murphy
