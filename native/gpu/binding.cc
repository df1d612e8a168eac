// Node-API binding of the GPU engine's host-side pieces (checks and conversions only).
//   cublasLtLoad(candidates: {path, origin}[], install: boolean)
//     -> { ok, path, origin, version, versionText, reason, attempts: {path, origin, error}[] }
#include <napi.h>

#include "../addon/args.h"
#include "cublaslt.h"

namespace murphy {
namespace gpu {

namespace {

Napi::Value CublasLtLoad(const Napi::CallbackInfo& info) {
  return addon::guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsArray() || !info[1].IsBoolean())
      throw Error("cublasLtLoad(candidates, install): expected an array of {path, origin} and a boolean");
    Napi::Array arr = info[0].As<Napi::Array>();
    std::vector<CublasLtCandidate> cands;
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      Napi::Value v = arr.Get(i);
      if (!v.IsObject()) throw Error("cublasLtLoad: candidate " + std::to_string(i) + " is not an object");
      Napi::Object o = v.As<Napi::Object>();
      if (!o.Get("path").IsString() || !o.Get("origin").IsString())
        throw Error("cublasLtLoad: candidate " + std::to_string(i) + " needs string fields path and origin");
      cands.push_back(CublasLtCandidate{o.Get("path").As<Napi::String>(), o.Get("origin").As<Napi::String>()});
    }
    CublasLtFound f = cublaslt_load(cands, info[1].As<Napi::Boolean>());
    Napi::Object r = Napi::Object::New(env);
    r.Set("ok", f.ok);
    r.Set("path", f.path);
    r.Set("origin", f.origin);
    r.Set("version", double(f.version));
    r.Set("versionText", f.ok ? cublaslt_version_text(f.version) : std::string());
    r.Set("reason", f.reason);
    Napi::Array at = Napi::Array::New(env, f.attempts.size());
    for (size_t i = 0; i < f.attempts.size(); ++i) {
      Napi::Object a = Napi::Object::New(env);
      a.Set("path", f.attempts[i].candidate.path);
      a.Set("origin", f.attempts[i].candidate.origin);
      a.Set("error", f.attempts[i].error);
      at.Set(uint32_t(i), a);
    }
    r.Set("attempts", at);
    return r;
  });
}

}  // namespace

void register_gpu(Napi::Env env, Napi::Object exports) {
  exports.Set("cublasLtLoad", Napi::Function::New(env, CublasLtLoad));
}

}  // namespace gpu
}  // namespace murphy
