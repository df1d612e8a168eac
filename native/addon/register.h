// The binding files' registration functions, called by the module entry (addon.cc).
#pragma once
#include <napi.h>

namespace murphy {
namespace addon {

void register_kernels(Napi::Env env, Napi::Object exports);  // kernels.cc
void register_model(Napi::Env env, Napi::Object exports);    // model.cc
void register_gemm(Napi::Env env, Napi::Object exports);     // gemm.cc
void register_hash(Napi::Env env, Napi::Object exports);     // hash.cc

}  // namespace addon

namespace gpu {
void register_gpu(Napi::Env env, Napi::Object exports);  // native/gpu/binding.cc
void register_nccl(Napi::Env env, Napi::Object exports);  // native/gpu/nccl_binding.cc
}  // namespace gpu
}  // namespace murphy
