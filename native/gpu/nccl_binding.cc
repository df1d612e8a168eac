// Node-API binding of NCCL (nccl.h): argument checks and conversions only.
//   ncclLoad(candidates: {path, origin}[], install: boolean)
//     -> { ok, path, origin, version, versionText, reason, attempts: {path, origin, error}[] }
//   ncclUniqueId() -> Uint8Array(128)                       (ncclGetUniqueId; needs an installed NCCL)
//   ncclInit(id: Uint8Array(128), nranks, rank, device, timeoutMs) -> Promise<communicator>
//   communicator: { rank, nranks, device,
//     allReduce(send, recv, count, dtype, op, timeoutMs), reduceScatter(send, recv, recvCount, dtype, op, timeoutMs),
//     allGather(send, recv, sendCount, dtype, timeoutMs), broadcast(send | null, recv, count, dtype, root, timeoutMs),
//     close(timeoutMs) -> Promise<void> each;  abort() (synchronous, never blocks) }
//   dtype: 'f32' | 'f64' | 'bf16' | 'u8'; op: 'sum' | 'prod' | 'max' | 'min' | 'avg'. Buffers are arrays of that
//   kind, or of any dtype its bytes (a Uint8Array or u8 device array holding whole elements); 'f64' only as bytes
//   (the addon has no f64 kind). A communicator on a CUDA device takes device arrays; one without a device
//   (-1) host typed arrays, which only a fake library accepts.
// Every call that waits on NCCL runs on a libuv worker thread and returns a Promise.
#include <napi.h>

#include <functional>
#include <memory>

#include "../addon/args.h"
#include "../addon/device_buffer.h"
#include "nccl.h"
#include "nccl_binding.h"
#include "library_binding.h"

namespace murphy {
namespace gpu {

namespace {

using addon::Buf;
using addon::Kind;

// A call on a worker thread, settled as a Promise; `keep` holds the JS objects it reads.
class NcclTask : public Napi::AsyncWorker {
 public:
  using Run = std::function<void()>;
  using Done = std::function<Napi::Value(Napi::Env)>;
  NcclTask(Napi::Env env, std::vector<Napi::Value> keep, Run run, Done done)
      : Napi::AsyncWorker(env, "murphy-nccl"), deferred_(Napi::Promise::Deferred::New(env)), run_(std::move(run)),
        done_(std::move(done)) {
    for (const Napi::Value& v : keep)
      if (v.IsObject()) keep_.push_back(Napi::Persistent(v.As<Napi::Object>()));
  }
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      run_();
    } catch (...) {
      addon::current_error_parts(message_, code_);
      SetError(message_);
    }
  }
  void OnOK() override {
    try {
      deferred_.Resolve(done_ ? done_(Env()) : Env().Undefined());
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    }
  }
  void OnError(const Napi::Error&) override { deferred_.Reject(addon::native_error(Env(), message_, code_).Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Run run_;
  Done done_;
  std::vector<Napi::ObjectReference> keep_;
  std::string message_;
  ErrorCode code_ = ErrorCode::Inval;
};

Napi::Value queue(Napi::Env env, std::vector<Napi::Value> keep, NcclTask::Run run, NcclTask::Done done = nullptr) {
  NcclTask* t = new NcclTask(env, std::move(keep), std::move(run), std::move(done));
  Napi::Promise p = t->promise();
  t->Queue();
  return p;
}

struct TypeArg {
  int nccl;
  Kind kind;          // the typed kind of its arrays
  size_t bytes;       // bytes per element
  bool bytes_only;    // no typed kind: only as bytes (f64)
  const char* name;
};
TypeArg dtype_arg(const Napi::Value& v) {
  const std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (s == "f32") return {ncclFloat32, Kind::F32, 4, false, "f32"};
  if (s == "f64") return {ncclFloat64, Kind::U8, 8, true, "f64"};
  if (s == "bf16") return {ncclBfloat16, Kind::BF16, 2, false, "bf16"};
  if (s == "u8") return {ncclUint8, Kind::U8, 1, false, "u8"};
  throw Error("NCCL: dtype must be 'f32', 'f64', 'bf16' or 'u8'");
}
int op_arg(const Napi::Value& v) {
  const std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (s == "sum") return ncclSum;
  if (s == "prod") return ncclProd;
  if (s == "max") return ncclMax;
  if (s == "min") return ncclMin;
  if (s == "avg") return ncclAvg;
  throw Error("NCCL: op must be 'sum', 'prod', 'max', 'min' or 'avg'");
}
bool is_bytes(const Napi::Value& v) {
  if (v.IsTypedArray()) return v.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array;
  return addon::DeviceBuffer::Is(v) && addon::DeviceBuffer::Unwrap(v.As<Napi::Object>())->kind() == Kind::U8;
}
// A buffer of at least `need` elements of t: an array of t's kind, or t's bytes (whole elements). It must live
// where the communicator works: device arrays on a CUDA device, host typed arrays without one (device -1).
Buf buffer(const Napi::Value& v, const char* name, const TypeArg& t, size_t need, const NcclComm& c) {
  const bool bytes = t.bytes_only || (t.bytes > 1 && is_bytes(v));
  if (t.bytes_only && !is_bytes(v) && !v.IsNull() && !v.IsUndefined())
    throw Error(std::string("'") + name + "': dtype '" + t.name + "' takes the bytes of its array (a Uint8Array view of a " +
                "Float64Array, or a u8 device array)");
  Buf b = addon::tensor(v, name, bytes ? Kind::U8 : t.kind, -1);
  if (bytes && b.count % t.bytes != 0)
    throw Error(std::string("'") + name + "' holds " + std::to_string(b.count) + " bytes, not a whole number of " + t.name +
                " elements (" + std::to_string(t.bytes) + " bytes each)");
  const size_t have = bytes ? b.count / t.bytes : b.count;
  if (have < need)
    throw Error(std::string("'") + name + "' has " + std::to_string(have) + " elements; the call needs " +
                std::to_string(need));
  if (c.device() >= 0 && b.device == Device::Host)
    throw Error(std::string("'") + name + "' is a host array, but this communicator is on CUDA device " +
                std::to_string(c.device()) + "; pass device arrays (DeviceArray)");
  if (c.device() < 0 && b.device != Device::Host)
    throw Error(std::string("'") + name + "' is a device array, but this communicator has no device (-1); pass host arrays");
  return b;
}
size_t count_arg(const Napi::Value& v, const char* name) { return size_t(addon::to_int(v, name, 0, int64_t(1) << 50)); }
double timeout_arg(const Napi::Value& v) {
  const double t = addon::to_number(v, "timeoutMs");
  if (!(t > 0)) throw Error("NCCL: timeoutMs must be > 0");
  return t;
}

Napi::Value NcclLoad(const Napi::CallbackInfo& info) {
  return addon::guarded(info, [&]() -> Napi::Value {
    const auto f = nccl_load(library_candidates(info, "ncclLoad"), info[1].As<Napi::Boolean>());
    return library_report(info.Env(), f, nccl_version_text(f.version));
  });
}

Napi::Value NcclUniqueIdJs(const Napi::CallbackInfo& info) {
  return addon::guarded(info, [&]() -> Napi::Value {
    const auto id = nccl_unique_id();
    Napi::Uint8Array a = Napi::Uint8Array::New(info.Env(), id.size());
    std::copy(id.begin(), id.end(), a.Data());
    return a;
  });
}

using CommPtr = std::shared_ptr<NcclComm>;
constexpr const char* kHandle = "__murphyNcclComm";

// The communicator as a plain object whose methods hold the shared NcclComm (dropped: aborted).
Napi::Object comm_object(Napi::Env env, CommPtr c) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("rank", c->rank());
  o.Set("nranks", c->nranks());
  o.Set("device", c->device());
  // the handle other bindings reach the communicator through (nccl_binding.h)
  o.DefineProperty(Napi::PropertyDescriptor::Value(
      kHandle, Napi::External<CommPtr>::New(env, new CommPtr(c), [](Napi::Env, CommPtr* p) { delete p; }), napi_default));
  auto method = [&](const char* name, std::function<Napi::Value(const Napi::CallbackInfo&)> fn) {
    o.Set(name, Napi::Function::New(env, [fn](const Napi::CallbackInfo& info) -> Napi::Value {
            return addon::guarded(info, [&]() -> Napi::Value { return fn(info); });
          }, name));
  };
  method("allReduce", [c](const Napi::CallbackInfo& info) {
    const TypeArg t = dtype_arg(info[3]);
    const size_t n = count_arg(info[2], "count");
    Buf s = buffer(info[0], "send", t, n, *c), r = buffer(info[1], "recv", t, n, *c);
    const int op = op_arg(info[4]);
    const double ms = timeout_arg(info[5]);
    return queue(info.Env(), {info[0], info[1]}, [=]() { c->all_reduce(s.ptr, r.ptr, n, t.nccl, op, ms); });
  });
  method("reduceScatter", [c](const Napi::CallbackInfo& info) {
    const TypeArg t = dtype_arg(info[3]);
    const size_t n = count_arg(info[2], "recvCount");
    Buf s = buffer(info[0], "send", t, n * size_t(c->nranks()), *c), r = buffer(info[1], "recv", t, n, *c);
    const int op = op_arg(info[4]);
    const double ms = timeout_arg(info[5]);
    return queue(info.Env(), {info[0], info[1]}, [=]() { c->reduce_scatter(s.ptr, r.ptr, n, t.nccl, op, ms); });
  });
  method("allGather", [c](const Napi::CallbackInfo& info) {
    const TypeArg t = dtype_arg(info[3]);
    const size_t n = count_arg(info[2], "sendCount");
    Buf s = buffer(info[0], "send", t, n, *c), r = buffer(info[1], "recv", t, n * size_t(c->nranks()), *c);
    const double ms = timeout_arg(info[4]);
    return queue(info.Env(), {info[0], info[1]}, [=]() { c->all_gather(s.ptr, r.ptr, n, t.nccl, ms); });
  });
  method("broadcast", [c](const Napi::CallbackInfo& info) {
    const TypeArg t = dtype_arg(info[3]);
    const size_t n = count_arg(info[2], "count");
    const int root = int(addon::to_int(info[4], "root", 0, c->nranks() - 1));
    // send is read on the root only (NCCL's convention); elsewhere it may be null
    Buf s;
    if (!(info[0].IsNull() || info[0].IsUndefined())) s = buffer(info[0], "send", t, n, *c);
    else if (root == c->rank()) throw Error("NCCL broadcast: the root needs a send buffer");
    Buf r = buffer(info[1], "recv", t, n, *c);
    const double ms = timeout_arg(info[5]);
    const void* sp = s.present ? s.ptr : r.ptr;
    return queue(info.Env(), {info[0], info[1]}, [=]() { c->broadcast(sp, r.ptr, n, t.nccl, root, ms); });
  });
  method("close", [c](const Napi::CallbackInfo& info) {
    const double ms = timeout_arg(info[0]);
    return queue(info.Env(), {}, [=]() { c->close(ms); });
  });
  method("abort", [c](const Napi::CallbackInfo& info) -> Napi::Value {
    c->abort();
    return info.Env().Undefined();
  });
  return o;
}

Napi::Value NcclInit(const Napi::CallbackInfo& info) {
  return addon::guarded(info, [&]() -> Napi::Value {
    if (info.Length() < 5 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
      throw Error("ncclInit(id, nranks, rank, device, timeoutMs): id must be a Uint8Array of 128 bytes");
    Napi::Uint8Array a = info[0].As<Napi::Uint8Array>();
    if (a.ElementLength() != kNcclUniqueIdBytes)
      throw Error("ncclInit: the unique id has " + std::to_string(a.ElementLength()) + " bytes, NCCL's has 128");
    std::array<uint8_t, kNcclUniqueIdBytes> id{};
    std::copy(a.Data(), a.Data() + kNcclUniqueIdBytes, id.begin());
    const int nranks = int(addon::to_int(info[1], "nranks", 1, 1 << 20));
    const int rank = int(addon::to_int(info[2], "rank", 0, nranks - 1));
    const int device = int(addon::to_int(info[3], "device", -1, 1 << 16));
    const double ms = timeout_arg(info[4]);
    auto out = std::make_shared<CommPtr>();
    return queue(info.Env(), {}, [=]() { *out = CommPtr(NcclComm::init(id, nranks, rank, device, ms)); },
                 [out](Napi::Env env) -> Napi::Value { return comm_object(env, *out); });
  });
}

}  // namespace

std::shared_ptr<NcclComm> nccl_comm_of(const Napi::Value& v, const char* what) {
  Napi::Value h = v.IsObject() ? v.As<Napi::Object>().Get(kHandle) : Napi::Value();
  if (h.IsEmpty() || !h.IsExternal())
    throw Error(std::string(what) + ": pass an NCCL communicator (the object ncclInit resolves to)");
  return *h.As<Napi::External<CommPtr>>().Data();
}

void register_nccl(Napi::Env env, Napi::Object exports) {
  exports.Set("ncclLoad", Napi::Function::New(env, NcclLoad));
  exports.Set("ncclUniqueId", Napi::Function::New(env, NcclUniqueIdJs));
  exports.Set("ncclInit", Napi::Function::New(env, NcclInit));
}

}  // namespace gpu
}  // namespace murphy
