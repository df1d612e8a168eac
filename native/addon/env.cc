#include "env.h"

namespace murphy {
namespace addon {

AddonData& init_addon_data(Napi::Env env) {
  AddonData* d = new AddonData();
  env.SetInstanceData<AddonData>(d);  // deleted when the environment is torn down
  return *d;
}

AddonData& addon_data(Napi::Env env) {
  AddonData* d = env.GetInstanceData<AddonData>();
  if (d == nullptr) throw Error("murphy-native: the addon was not initialised in this environment");
  return *d;
}

Napi::Error native_error(Napi::Env env, const std::string& message, ErrorCode code) {
  AddonData* d = env.GetInstanceData<AddonData>();
  const char* name = error_code_name(code);
  if (d != nullptr && !d->error_class.IsEmpty()) {
    Napi::Object e = d->error_class.New({Napi::String::New(env, message), Napi::String::New(env, name)});
    return Napi::Error(env, e);
  }
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, name));
  return e;
}

Napi::Value SetErrorClass(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsFunction()) throw Napi::TypeError::New(env, "setErrorClass: pass the MurphyNativeError class");
  AddonData& d = addon_data(env);
  d.error_class = Napi::Persistent(info[0].As<Napi::Function>());
  return env.Undefined();
}

}  // namespace addon
}  // namespace murphy
