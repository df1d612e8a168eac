// Binding of the CPU matrix product (native/model/matmul.cc) for tests and benchmarks:
// argument checks and conversion only.
#include <napi.h>

#include "../model/gemm.h"
#include "args.h"
#include "register.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace addon {
namespace {

constexpr int64_t kMaxDim = int64_t(1) << 31;

model::GemmPath parse_path(const std::string& s) { return model::parse_gemm_path(s, "linearProduct: 'path'"); }

// Restores this thread's forced path when the call ends (also on error).
struct PathScope {
  model::GemmPath saved;
  explicit PathScope(model::GemmPath p) : saved(model::gemm_forced_path()) { model::set_gemm_path(p); }
  ~PathScope() { model::set_gemm_path(saved); }
};

// linearProduct(product, a, b, out, m, n, k, accumulate, path, repeat) -> the path's name.
//   forward:        out[m,n] (+)= a[m,k] b[n,k]^T     (b: Float32Array, or Uint16Array bf16 bits)
//   backwardInput:  out[m,k] (+)= a[m,n] b[n,k]
//   backwardWeight: out[n,k]  += a[m,n]^T b[m,k]
// repeat (1 to kMaxRepeat): the product runs that many times back to back, the checks once (a
// benchmark's timing of the product as the model calls it, from C++, without this call's cost).
// Positional arguments, as the other kernels take them: an options object cost ~1.5 us a call in
// property lookups (each key a C string internalised anew), most of a 1 x 256 x 768 product's
// call overhead (docs/kernels.md, "What a JS call of a product costs"). lib/native.ts checks
// every argument first and names the problem; these checks keep the memory safe for any caller.
constexpr int64_t kMaxRepeat = 1000000;

enum class Product { Forward, BackwardInput, BackwardWeight };

Product parse_product(const Napi::Value& v) {
  const std::string p = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (p == "forward") return Product::Forward;
  if (p == "backwardInput") return Product::BackwardInput;
  if (p == "backwardWeight") return Product::BackwardWeight;
  throw Error("linearProduct: 'product' must be 'forward', 'backwardInput' or 'backwardWeight'; got '" + p + "'");
}

Napi::Value LinearProduct(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const Product product = parse_product(info[0]);
    const int64_t M = to_int(info[4], "m", 0, kMaxDim), N = to_int(info[5], "n", 0, kMaxDim), K = to_int(info[6], "k", 0, kMaxDim);
    if (!info[7].IsBoolean()) throw Error("linearProduct: 'accumulate' must be true or false");
    const bool acc = info[7].As<Napi::Boolean>().Value();
    if (!info[8].IsString()) throw Error("linearProduct: 'path' must be a string");
    const model::GemmPath path = parse_path(info[8].As<Napi::String>().Utf8Value());
    const int64_t repeat = to_int(info[9], "repeat", 1, kMaxRepeat);
    const Napi::Value bv = info[2];
    const bool bf16 = bv.IsTypedArray() && bv.As<Napi::TypedArray>().TypedArrayType() == napi_uint16_array;
    if (bf16 && product != Product::Forward)
      throw Error("linearProduct: bf16 weights (a Uint16Array 'b') are supported by the 'forward' product only");
    Buf a, b, out;
    switch (product) {
      case Product::Forward:
        a = tensor(info[1], "a", Kind::F32, M * K);
        b = tensor(bv, "b", bf16 ? Kind::BF16 : Kind::F32, N * K);
        out = tensor(info[3], "out", Kind::F32, M * N);
        break;
      case Product::BackwardInput:
        a = tensor(info[1], "a", Kind::F32, M * N);
        b = tensor(bv, "b", Kind::F32, N * K);
        out = tensor(info[3], "out", Kind::F32, M * K);
        break;
      case Product::BackwardWeight:
        if (!acc) throw Error("linearProduct: 'backwardWeight' always accumulates; pass accumulate: true");
        a = tensor(info[1], "a", Kind::F32, M * N);
        b = tensor(bv, "b", Kind::F32, M * K);
        out = tensor(info[3], "out", Kind::F32, N * K);
        break;
    }
    if (same_device({&a, &b, &out}, "linearProduct") != Device::Host)
      throw Error("linearProduct: host typed arrays only (the CPU matrix product)");
    PathScope scope(path);
    const float* A = static_cast<const float*>(a.ptr);
    float* C = static_cast<float*>(out.ptr);
    for (int64_t r = 0; r < repeat; ++r) {
      if (product == Product::Forward && bf16)
        model::linear_forward_bf16(A, static_cast<const uint16_t*>(b.ptr), C, M, N, K, acc);
      else if (product == Product::Forward)
        model::linear_forward(A, static_cast<const float*>(b.ptr), C, M, N, K, acc);
      else if (product == Product::BackwardInput)
        model::linear_backward_input(A, static_cast<const float*>(b.ptr), C, M, N, K, acc);
      else
        model::linear_backward_weight(A, static_cast<const float*>(b.ptr), C, M, N, K);
    }
    return Napi::String::New(info.Env(), model::gemm_path_name(model::gemm_path()));
  });
}

// gemmInfo() -> { best, paths, call }: the path 'auto' takes on this CPU, the ones it can run, and
// how linearProduct takes its arguments ('positional'; binaries before 2026-12-07 have no `call`
// and take one options object: bench/gemm-vs-binary.ts calls either).
Napi::Value GemmInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object r = Napi::Object::New(env);
  const model::GemmPath best = model::gemm_best_path();
  r.Set("best", model::gemm_path_name(best));
  Napi::Array paths = Napi::Array::New(env);
  uint32_t n = 0;
  for (model::GemmPath p : {model::GemmPath::AmxBf16, model::GemmPath::Avx512Bf16, model::GemmPath::Avx512, model::GemmPath::Avx2, model::GemmPath::Baseline})
    if (model::gemm_path_available(p)) paths.Set(n++, Napi::String::New(env, model::gemm_path_name(p)));
  r.Set("paths", paths);
  r.Set("call", "positional");
  return r;
}

// addressMod64(typedArray) -> the address of its first element modulo 64, in bytes: benchmarks
// use it to place their operands on 64-byte boundaries, as the model's weights are (a zmm load
// that straddles two cache lines costs two).
Napi::Value AddressMod64(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsTypedArray()) throw Error("addressMod64: pass a typed array");
    Napi::TypedArray t = info[0].As<Napi::TypedArray>();
    const auto addr = reinterpret_cast<uintptr_t>(static_cast<const char*>(t.ArrayBuffer().Data()) + t.ByteOffset());
    return Napi::Number::New(info.Env(), double(addr % 64));
  });
}

}  // namespace

void register_gemm(Napi::Env env, Napi::Object exports) {
  exports.Set("linearProduct", Napi::Function::New(env, LinearProduct));
  exports.Set("gemmInfo", Napi::Function::New(env, GemmInfo));
  exports.Set("addressMod64", Napi::Function::New(env, AddressMod64));
}

}  // namespace addon
}  // namespace murphy
