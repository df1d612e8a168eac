// The reference-path switch shared by the model's op families (murphy/model/ops.h).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "murphy/model/ops.h"

namespace murphy {
namespace model {

namespace {
std::atomic<int> g_reference{-1};
}

bool use_reference_ops() {
  int v = g_reference.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("MURPHY_REFERENCE_OPS");
    v = (e && std::strcmp(e, "1") == 0) ? 1 : 0;
    g_reference.store(v);
  }
  return v == 1;
}

void set_reference_ops(bool on) { g_reference.store(on ? 1 : 0); }

}  // namespace model
}  // namespace murphy
