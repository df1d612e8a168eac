// Node-API conversions shared by the bindings of the run-time library loaders (cuBLASLt in
// binding.cc, NCCL in nccl_binding.cc): the candidate list in, the loader's report out.
// Checks and conversions only.
#pragma once
#include <napi.h>

#include <string>
#include <vector>

#include "dl_library.h"
#include "murphy/common.h"

namespace murphy {
namespace gpu {

// The arguments (candidates: {path, origin}[], install: boolean) of the JS function `call`;
// returns the candidates (install is info[1]).
inline std::vector<DlCandidate> library_candidates(const Napi::CallbackInfo& info, const std::string& call) {
  if (info.Length() < 2 || !info[0].IsArray() || !info[1].IsBoolean())
    throw Error(call + "(candidates, install): expected an array of {path, origin} and a boolean");
  Napi::Array arr = info[0].As<Napi::Array>();
  std::vector<DlCandidate> cands;
  for (uint32_t i = 0; i < arr.Length(); ++i) {
    Napi::Value v = arr.Get(i);
    if (!v.IsObject()) throw Error(call + ": candidate " + std::to_string(i) + " is not an object");
    Napi::Object o = v.As<Napi::Object>();
    if (!o.Get("path").IsString() || !o.Get("origin").IsString())
      throw Error(call + ": candidate " + std::to_string(i) + " needs string fields path and origin");
    cands.push_back(DlCandidate{o.Get("path").As<Napi::String>(), o.Get("origin").As<Napi::String>()});
  }
  return cands;
}

// { ok, path, origin, version, versionText, reason, attempts: {path, origin, error}[] }
template <class Version>
Napi::Object library_report(Napi::Env env, const DlFound<Version>& f, const std::string& version_text) {
  Napi::Object r = Napi::Object::New(env);
  r.Set("ok", f.ok);
  r.Set("path", f.path);
  r.Set("origin", f.origin);
  r.Set("version", double(f.version));
  r.Set("versionText", f.ok ? version_text : std::string());
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
}

}  // namespace gpu
}  // namespace murphy
