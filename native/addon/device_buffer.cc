#include "device_buffer.h"

#include "murphy/device.h"

namespace murphy {
namespace addon {
namespace {

Kind parse_kind(const Napi::Value& v) {
  std::string k = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (k == "f32") return Kind::F32;
  if (k == "bf16") return Kind::BF16;
  if (k == "i32") return Kind::I32;
  if (k == "u8") return Kind::U8;
  if (k == "i64") return Kind::I64;
  throw Error("DeviceBuffer: kind must be one of 'f32', 'bf16', 'i32', 'u8', 'i64'");
}
}  // namespace

Napi::Function DeviceBuffer::Init(Napi::Env env) {
  Napi::Function f = DefineClass(env, "DeviceBuffer",
                                 {InstanceMethod("upload", &DeviceBuffer::Upload),
                                  InstanceMethod("download", &DeviceBuffer::Download),
                                  InstanceMethod("free", &DeviceBuffer::Free),
                                  InstanceAccessor("length", &DeviceBuffer::GetLength, nullptr),
                                  InstanceAccessor("kind", &DeviceBuffer::GetKind, nullptr),
                                  InstanceAccessor("freed", &DeviceBuffer::GetFreed, nullptr)});
  addon_data(env).device_buffer = Napi::Persistent(f);
  return f;
}

bool DeviceBuffer::Is(const Napi::Value& v) {
  if (!v.IsObject()) return false;
  const AddonData& d = addon_data(v.Env());
  return !d.device_buffer.IsEmpty() && v.As<Napi::Object>().InstanceOf(d.device_buffer.Value());
}

// new DeviceBuffer(kind, length): zero-filled device memory for `length` elements.
DeviceBuffer::DeviceBuffer(const Napi::CallbackInfo& info) : Napi::ObjectWrap<DeviceBuffer>(info) {
  try {
    kind_ = parse_kind(info[0]);
    count_ = size_t(to_int(info[1], "length", 0, int64_t(1) << 50));
#ifdef MURPHY_WITH_CUDA
    if (count_ > 0) {
      ptr_ = cuda_alloc(count_ * kind_size(kind_));
      cuda_memset0(ptr_, count_ * kind_size(kind_));
    }
#else
    throw Error(
        "DeviceBuffer: this murphy-native binary was built without CUDA; build it with `npm run build:cuda` "
        "or install a CUDA-enabled prebuild",
        ErrorCode::NoLib);
#endif
  } catch (...) {
    throw current_error(info.Env());
  }
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
#ifdef MURPHY_WITH_CUDA
  if (ptr_) cuda_free(ptr_);
#endif
  ptr_ = nullptr;
  released_ = true;
}

Napi::Value DeviceBuffer::Upload(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Buf src = tensor(info[0], "source", kind_, int64_t(count_));
    if (src.device != Device::Host) throw Error("upload: the source must be a host typed array");
#ifdef MURPHY_WITH_CUDA
    if (freed()) throw Error("upload: this device array was freed");
    if (count_) cuda_upload(ptr_, src.ptr, count_ * kind_size(kind_));
#endif
    return info.This();
  });
}

Napi::Value DeviceBuffer::Download(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Buf dst = tensor(info[0], "destination", kind_, int64_t(count_));
    if (dst.device != Device::Host) throw Error("download: the destination must be a host typed array");
#ifdef MURPHY_WITH_CUDA
    if (freed()) throw Error("download: this device array was freed");
    if (count_) cuda_download(dst.ptr, ptr_, count_ * kind_size(kind_));
#endif
    return info[0];
  });
}

Napi::Value DeviceBuffer::Free(const Napi::CallbackInfo& info) {
  release();
  return info.Env().Undefined();
}

Napi::Value DeviceBuffer::GetLength(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), double(count_));
}

Napi::Value DeviceBuffer::GetKind(const Napi::CallbackInfo& info) {
  static const char* names[] = {"f32", "bf16", "i32", "u8", "i64"};
  return Napi::String::New(info.Env(), names[int(kind_)]);
}

Napi::Value DeviceBuffer::GetFreed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), freed());
}

}  // namespace addon
}  // namespace murphy
