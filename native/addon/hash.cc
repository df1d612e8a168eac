// Bindings of the checkpoint integrity hash (native/cpu/xxh64.cc): argument checks and
// conversion only. Both calls run on a libuv worker thread and return a Promise, so several
// files hash in parallel (one per pool thread) and a hash overlaps the writes of its bytes.
//   xxh64File(path) -> Promise<{ bytes, xxh64 }>
//   xxh64Buffers(chunks: ArrayBufferView[]) -> Promise<string>   (the hash of their concatenation)
#include <napi.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "register.h"
#include "murphy/xxh64.h"

namespace murphy {
namespace addon {
namespace {

class HashTask : public Napi::AsyncWorker {
 public:
  HashTask(Napi::Env env, std::function<void()> run, std::function<Napi::Value(Napi::Env)> done, Napi::Value keep)
      : Napi::AsyncWorker(env, "murphy-hash"), deferred_(Napi::Promise::Deferred::New(env)), run_(std::move(run)), done_(std::move(done)) {
    // The chunks' memory must outlive the worker: a reference keeps their array alive.
    if (keep.IsObject()) keep_ = Napi::Persistent(keep.As<Napi::Object>());
  }
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      run_();
    } catch (...) {
      current_error_parts(message_, code_);
      SetError(message_);
    }
  }
  void OnOK() override { deferred_.Resolve(done_(Env())); }
  void OnError(const Napi::Error&) override { deferred_.Reject(native_error(Env(), message_, code_).Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<void()> run_;
  std::function<Napi::Value(Napi::Env)> done_;
  Napi::ObjectReference keep_;
  std::string message_;
  ErrorCode code_ = ErrorCode::Inval;
};

Napi::Value queue(Napi::Env env, std::function<void()> run, std::function<Napi::Value(Napi::Env)> done, Napi::Value keep) {
  auto* t = new HashTask(env, std::move(run), std::move(done), keep);
  Napi::Promise p = t->promise();
  t->Queue();
  return p;
}

Napi::Value Xxh64File(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsString()) throw Error("xxh64File: 'path' must be a string");
    auto path = std::make_shared<std::string>(info[0].As<Napi::String>().Utf8Value());
    auto out = std::make_shared<std::pair<uint64_t, uint64_t>>(0, 0);  // (hash, bytes)
    return queue(
        info.Env(), [path, out] { out->first = xxh64_file(*path, &out->second); },
        [out](Napi::Env env) -> Napi::Value {
          Napi::Object o = Napi::Object::New(env);
          o.Set("bytes", double(out->second));
          o.Set("xxh64", xxh64_hex(out->first));
          return o;
        },
        info.Env().Undefined());
  });
}

Napi::Value Xxh64Buffers(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsArray()) throw Error("xxh64Buffers: 'chunks' must be an array of typed arrays or Buffers");
    Napi::Array arr = info[0].As<Napi::Array>();
    auto parts = std::make_shared<std::vector<std::pair<const void*, size_t>>>();
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      Napi::Value v = arr.Get(i);
      if (!v.IsTypedArray() && !v.IsDataView()) throw Error("xxh64Buffers: chunk " + std::to_string(i) + " is not a typed array or Buffer");
      if (v.IsTypedArray()) {
        Napi::TypedArray t = v.As<Napi::TypedArray>();
        const auto* base = static_cast<const unsigned char*>(t.ArrayBuffer().Data());
        parts->emplace_back(base + t.ByteOffset(), t.ByteLength());
      } else {
        Napi::DataView d = v.As<Napi::DataView>();
        const auto* base = static_cast<const unsigned char*>(d.ArrayBuffer().Data());
        parts->emplace_back(base + d.ByteOffset(), d.ByteLength());
      }
    }
    auto out = std::make_shared<uint64_t>(0);
    return queue(
        info.Env(),
        [parts, out] {
          Xxh64 s;
          for (const auto& [p, n] : *parts) s.update(p, n);
          *out = s.digest();
        },
        [out](Napi::Env env) -> Napi::Value { return Napi::String::New(env, xxh64_hex(*out)); }, arr);
  });
}

}  // namespace

void register_hash(Napi::Env env, Napi::Object exports) {
  exports.Set("xxh64File", Napi::Function::New(env, Xxh64File));
  exports.Set("xxh64Buffers", Napi::Function::New(env, Xxh64Buffers));
}

}  // namespace addon
}  // namespace murphy
