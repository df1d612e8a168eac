// DeviceBuffer: a block of GPU memory owned by a JavaScript object.
#pragma once
#include <napi.h>

#include "args.h"

namespace murphy {
namespace addon {

class DeviceBuffer : public Napi::ObjectWrap<DeviceBuffer> {
 public:
  static Napi::Function Init(Napi::Env env);
  static bool Is(const Napi::Value& v);
  static DeviceBuffer* Unwrap(const Napi::Object& o) { return Napi::ObjectWrap<DeviceBuffer>::Unwrap(o); }

  explicit DeviceBuffer(const Napi::CallbackInfo& info);
  ~DeviceBuffer() override;

  void* ptr() const { return ptr_; }
  size_t count() const { return count_; }
  Kind kind() const { return kind_; }
  bool freed() const { return released_; }

 private:
  Napi::Value Upload(const Napi::CallbackInfo& info);
  Napi::Value Download(const Napi::CallbackInfo& info);
  Napi::Value Free(const Napi::CallbackInfo& info);
  Napi::Value GetLength(const Napi::CallbackInfo& info);
  Napi::Value GetKind(const Napi::CallbackInfo& info);
  Napi::Value GetFreed(const Napi::CallbackInfo& info);
  void release();

  void* ptr_ = nullptr;
  size_t count_ = 0;
  Kind kind_ = Kind::F32;
  bool released_ = false;
};

}  // namespace addon
}  // namespace murphy
