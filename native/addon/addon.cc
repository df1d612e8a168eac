// Module entry: registers the kernel bindings, DeviceBuffer and the build/system info.
#include <napi.h>

#include <thread>

#include "../cpu/simd.h"
#include "../cpu/threads.h"
#include "args.h"
#include "device_buffer.h"
#include "register.h"
#include "murphy/device.h"
#include "murphy/dispatch.h"

namespace murphy {
namespace addon {

namespace {

Napi::Value BuildInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("cuda", built_with_cuda());
  o.Set("napiVersion", NAPI_VERSION);
#if defined(__VERSION__)
  o.Set("compiler", __VERSION__);
#endif
  return o;
}

Napi::Value CpuInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("threads", num_threads());
  o.Set("hardwareConcurrency", double(std::thread::hardware_concurrency()));
  o.Set("simd", cpu_simd_level());
  o.Set("avx512bf16", cpu_has_avx512_bf16());
  o.Set("amxBf16", cpu_has_amx_bf16());
  return o;
}

Napi::Value SetNumThreads(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    set_num_threads(int(to_int(info[0], "threads", 1, 4096)));
    return info.Env().Undefined();
  });
}

Napi::Value CudaStatusInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  Napi::Array devs = Napi::Array::New(env);
#ifdef MURPHY_WITH_CUDA
  CudaStatus st = cuda_status();
  o.Set("built", true);
  o.Set("available", st.available);
  o.Set("reason", st.reason);
  o.Set("runtimeVersion", st.runtime_version);
  o.Set("driverVersion", st.driver_version);
  for (size_t i = 0; i < st.devices.size(); ++i) {
    const CudaDeviceInfo& d = st.devices[i];
    Napi::Object x = Napi::Object::New(env);
    x.Set("index", d.index);
    x.Set("name", d.name);
    x.Set("totalMemory", double(d.total_memory));
    x.Set("freeMemory", double(d.free_memory));
    x.Set("computeCapability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
    x.Set("multiprocessors", d.multiprocessors);
    devs.Set(uint32_t(i), x);
  }
#else
  o.Set("built", false);
  o.Set("available", false);
  o.Set("reason", "no CUDA device: this binary was built without CUDA (npm run build:cuda builds one with it)");
  o.Set("runtimeVersion", 0);
  o.Set("driverVersion", 0);
#endif
  o.Set("devices", devs);
  return o;
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  init_addon_data(env);
  exports.Set("setErrorClass", Napi::Function::New(env, SetErrorClass));
  register_kernels(env, exports);
  register_model(env, exports);
  register_gemm(env, exports);
  register_hash(env, exports);
  gpu::register_gpu(env, exports);
  gpu::register_nccl(env, exports);
  exports.Set("DeviceBuffer", DeviceBuffer::Init(env));
  exports.Set("buildInfo", Napi::Function::New(env, BuildInfo));
  exports.Set("cpuInfo", Napi::Function::New(env, CpuInfo));
  exports.Set("setNumThreads", Napi::Function::New(env, SetNumThreads));
  exports.Set("cudaStatus", Napi::Function::New(env, CudaStatusInfo));
  return exports;
}

}  // namespace addon
}  // namespace murphy

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return murphy::addon::Init(env, exports); }
NODE_API_MODULE(murphy_native, InitModule)
