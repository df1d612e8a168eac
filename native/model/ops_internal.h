// Shared by the model's op files: the dispatch macro and the reference-path switch.
#pragma once
#include "murphy/common.h"

namespace murphy {
namespace model {


[[noreturn]] void model_no_cuda();

// One dispatch point per op: the CPU function for host memory; a CUDA backend plugs in here.
#define MURPHY_MODEL_DISPATCH(cpu_call)  \
  if (d != Device::Host) model_no_cuda(); \
  return cpu_call;

}  // namespace model
}  // namespace murphy
