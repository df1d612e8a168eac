// The NCCL communicator behind a JavaScript communicator object (nccl_binding.cc's ncclInit):
// other bindings (the model's zeroStep, native/addon/model.cc) take the object and reach its
// NcclComm through a hidden, non-enumerable property holding the shared pointer.
#pragma once
#include <napi.h>

#include <memory>

#include "nccl.h"

namespace murphy {
namespace gpu {

// The communicator of `v`, or an Error naming `what` when v is not one.
std::shared_ptr<NcclComm> nccl_comm_of(const Napi::Value& v, const char* what);

}  // namespace gpu
}  // namespace murphy
