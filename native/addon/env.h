// Per-environment state of the addon. Node loads the addon once per environment (the main
// thread and every worker thread); each gets its own AddonData through
// Napi::Env::SetInstanceData, freed with the environment, so no constructor or class
// reference is shared across threads (as better-sqlite3 keeps its per-environment state).
#pragma once
#include <napi.h>

#include <string>

#include "murphy/common.h"

namespace murphy {
namespace addon {

struct AddonData {
  Napi::FunctionReference model_engine;   // ModelEngine's constructor
  Napi::FunctionReference device_buffer;  // DeviceBuffer's constructor
  Napi::FunctionReference error_class;    // MurphyNativeError, handed over by setErrorClass
};

// Creates this environment's AddonData (once, in Init).
AddonData& init_addon_data(Napi::Env env);
AddonData& addon_data(Napi::Env env);

// A MurphyNativeError(message, code) of this environment; a plain Error with `code` set
// when no class was handed over (the binary loaded without lib/native.ts).
Napi::Error native_error(Napi::Env env, const std::string& message, ErrorCode code);

// setErrorClass(MurphyNativeError): called by lib/native.ts right after loading.
Napi::Value SetErrorClass(const Napi::CallbackInfo& info);

}  // namespace addon
}  // namespace murphy
