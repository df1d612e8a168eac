// Turning JavaScript arguments into kernel arguments: checks only, no math.
#pragma once
#include <napi.h>

#include <string>

#include "murphy/common.h"

namespace murphy {
namespace addon {

// Element kinds a tensor argument can have. bf16 travels as Uint16Array.
enum class Kind { F32, BF16, I32, U8, I64 };
const char* kind_name(Kind k);
size_t kind_size(Kind k);

// A resolved tensor argument: host memory of a TypedArray, or a DeviceBuffer.
struct Buf {
  void* ptr = nullptr;
  size_t count = 0;  // elements
  Kind kind = Kind::F32;
  Device device = Device::Host;
  bool present = false;
};

// Resolves `v` as a tensor named `name` of kind `kind` (for F32/BF16 logits pass
// the kind chosen by dtype). Throws murphy::Error naming the argument when it is
// missing, detached, freed, of the wrong type, or when `expect` (>= 0) disagrees
// with its element count. `optional`: undefined/null gives present = false.
Buf tensor(const Napi::Value& v, const char* name, Kind kind, int64_t expect, bool optional = false);

// All present buffers must live on one device; returns it.
Device same_device(std::initializer_list<const Buf*> bufs, const char* op);

// Reads an integer/number option with range checks.
int64_t to_int(const Napi::Value& v, const char* name, int64_t lo, int64_t hi);
double to_number(const Napi::Value& v, const char* name);
double opt_number(const Napi::Object& o, const char* key, double fallback);

// Runs fn, turning C++ exceptions into JavaScript errors.
template <typename F>
Napi::Value guarded(const Napi::CallbackInfo& info, F&& fn) {
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(info.Env(), std::string("murphy-native: ") + e.what());
  }
}

}  // namespace addon
}  // namespace murphy
