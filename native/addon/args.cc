#include "args.h"

#include <cmath>

#include "device_buffer.h"

namespace murphy {
namespace addon {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::F32: return "Float32Array (f32)";
    case Kind::BF16: return "Uint16Array (bf16 bits)";
    case Kind::I32: return "Int32Array";
    case Kind::U8: return "Uint8Array";
    case Kind::I64: return "BigInt64Array";
  }
  return "?";
}

size_t kind_size(Kind k) {
  switch (k) {
    case Kind::F32: case Kind::I32: return 4;
    case Kind::BF16: return 2;
    case Kind::U8: return 1;
    case Kind::I64: return 8;
  }
  return 1;
}

static bool matches(napi_typedarray_type t, Kind k) {
  switch (k) {
    case Kind::F32: return t == napi_float32_array;
    case Kind::BF16: return t == napi_uint16_array;
    case Kind::I32: return t == napi_int32_array;
    case Kind::U8: return t == napi_uint8_array;
    case Kind::I64: return t == napi_bigint64_array;
  }
  return false;
}

static std::string s(const char* name) { return std::string("'") + name + "'"; }

Buf tensor(const Napi::Value& v, const char* name, Kind kind, int64_t expect, bool optional) {
  Buf b;
  if (v.IsUndefined() || v.IsNull()) {
    if (optional) return b;
    throw Error(s(name) + " is required: pass a " + kind_name(kind));
  }
  if (v.IsTypedArray()) {
    // One napi_get_typedarray_info call for the type, length, data and buffer (node-addon-api's
    // TypedArray accessors make one call each: five a tensor, ~0.1 us of a small product's call).
    napi_env env = v.Env();
    napi_typedarray_type type;
    size_t length = 0, offset = 0;
    void* data = nullptr;
    napi_value buffer;
    bool detached = false;
    if (napi_get_typedarray_info(env, v, &type, &length, &data, &buffer, &offset) != napi_ok ||
        napi_is_detached_arraybuffer(env, buffer, &detached) != napi_ok)
      throw Error(s(name) + ": cannot read the typed array (napi_get_typedarray_info failed)");
    if (detached)
      throw Error(s(name) + " is a detached buffer (it was transferred or its ArrayBuffer was detached); pass a live array");
    if (!matches(type, kind))
      throw Error(s(name) + " must be a " + kind_name(kind));
    b.ptr = data;  // (napi_get_typedarray_info's data already includes the byte offset)
    b.count = length;
    b.device = Device::Host;
  } else if (DeviceBuffer::Is(v)) {
    DeviceBuffer* d = DeviceBuffer::Unwrap(v.As<Napi::Object>());
    if (d->freed()) throw Error(s(name) + " is a device array that was already freed");
    if (d->kind() != kind)
      throw Error(s(name) + " is a device array of " + kind_name(d->kind()) + " but must hold " + kind_name(kind));
    b.ptr = d->ptr();
    b.count = d->count();
    b.device = Device::Cuda;
  } else {
    throw Error(s(name) + " must be a " + kind_name(kind) + " or a device array of that kind");
  }
  b.kind = kind;
  b.present = true;
  if (expect >= 0 && b.count != size_t(expect))
    throw Error(s(name) + " has " + std::to_string(b.count) + " elements but " + std::to_string(expect) +
                " are needed");
  return b;
}

Device same_device(std::initializer_list<const Buf*> bufs, const char* op) {
  bool any = false;
  Device d = Device::Host;
  for (const Buf* b : bufs) {
    if (!b->present) continue;
    if (!any) {
      d = b->device;
      any = true;
    } else if (b->device != d) {
      throw Error(std::string(op) +
                  ": all arrays of one call must live in the same place (all host typed arrays or all device arrays)");
    }
  }
  return d;
}

double to_number(const Napi::Value& v, const char* name) {
  if (!v.IsNumber()) throw Error(s(name) + " must be a number");
  double x = v.As<Napi::Number>().DoubleValue();
  if (std::isnan(x)) throw Error(s(name) + " is NaN");
  return x;
}

int64_t to_int(const Napi::Value& v, const char* name, int64_t lo, int64_t hi) {
  double x = to_number(v, name);
  if (x != std::floor(x) || x < double(lo) || x > double(hi))
    throw Error(s(name) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                std::to_string(x));
  return int64_t(x);
}

static Napi::Value required(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull())
    throw Error(s(key) + " is missing from the resolved options (lib/native/options.ts fills in every field)");
  return v;
}

double req_number(const Napi::Object& o, const char* key) { return to_number(required(o, key), key); }

int64_t req_int(const Napi::Object& o, const char* key, int64_t lo, int64_t hi) {
  return to_int(required(o, key), key, lo, hi);
}

bool req_bool(const Napi::Object& o, const char* key) {
  Napi::Value v = required(o, key);
  if (!v.IsBoolean()) throw Error(s(key) + " must be true or false");
  return v.As<Napi::Boolean>().Value();
}

std::string req_string(const Napi::Object& o, const char* key) {
  Napi::Value v = required(o, key);
  if (!v.IsString()) throw Error(s(key) + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

void read_grpo_options(const Napi::Object& o, GrpoLossArgs& a) {
  a.eps_low = float(req_number(o, "epsLow"));
  a.eps_high = float(req_number(o, "epsHigh"));
  a.dual_clip = float(req_number(o, "dualClip"));
  a.beta = float(req_number(o, "beta"));
  a.norm_length = float(req_number(o, "normLength"));
  const std::string lt = req_string(o, "lossType");
  if (lt == "dapo") a.agg = LossAgg::TokenMean;
  else if (lt == "grpo") a.agg = LossAgg::SeqMean;
  else if (lt == "dr_grpo") a.agg = LossAgg::ConstNorm;
  else throw Error("'lossType' must be 'dapo' (token mean), 'grpo' (sequence mean) or 'dr_grpo' (constant normaliser)");
}

void current_error_parts(std::string& message, ErrorCode& code) {
  try {
    throw;
  } catch (const Error& e) {
    message = e.what(), code = e.code;
  } catch (const std::bad_alloc&) {
    message = "out of memory", code = ErrorCode::NoMem;
  } catch (const std::exception& e) {
    message = e.what(), code = ErrorCode::Inval;
  } catch (...) {
    message = "unknown native error", code = ErrorCode::Inval;
  }
}

Napi::Error current_error(Napi::Env env) {
  std::string message;
  ErrorCode code = ErrorCode::Inval;
  current_error_parts(message, code);
  return native_error(env, message, code);
}

}  // namespace addon
}  // namespace murphy
