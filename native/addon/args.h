// Turning JavaScript arguments into kernel arguments: checks only, no math.
#pragma once
#include <napi.h>

#include <new>
#include <string>

#include "env.h"
#include "murphy/common.h"
#include "murphy/grpo_loss.h"

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

// Reads an integer/number argument with range checks (sizes and counts).
int64_t to_int(const Napi::Value& v, const char* name, int64_t lo, int64_t hi);
double to_number(const Napi::Value& v, const char* name);

// Fields of a resolved options object (lib/native/options.ts fills in every default and
// checks every range): each is required; a missing one is an error, never a default.
double req_number(const Napi::Object& o, const char* key);
int64_t req_int(const Napi::Object& o, const char* key, int64_t lo, int64_t hi);
bool req_bool(const Napi::Object& o, const char* key);
std::string req_string(const Napi::Object& o, const char* key);

// The one converter of the GRPO loss options (epsLow, epsHigh, dualClip, beta, lossType,
// normLength) for the kernel binding and the model binding alike; tensor fields untouched.
void read_grpo_options(const Napi::Object& o, GrpoLossArgs& a);

// The C++ exception in flight as a MurphyNativeError (code from murphy::Error, ENOMEM for
// bad_alloc). Call inside a catch block.
Napi::Error current_error(Napi::Env env);
// For worker threads, which cannot touch JavaScript: the message and code to report later.
void current_error_parts(std::string& message, ErrorCode& code);

// Runs fn, turning C++ exceptions into MurphyNativeErrors.
template <typename F>
Napi::Value guarded(const Napi::CallbackInfo& info, F&& fn) {
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw current_error(info.Env());
  }
}

}  // namespace addon
}  // namespace murphy
