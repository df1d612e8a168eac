// Opening a shared library at run time and resolving a table of entry points (dlopen/dlsym),
// shared by the loaders of cuBLASLt (cublaslt.cc) and NCCL (nccl.cc). No CUDA needed.
#pragma once
#include <cstddef>
#include <string>

namespace murphy {
namespace gpu {

// dlopen(path, RTLD_NOW | RTLD_LOCAL), then dlsym of names[0..n) into slots[0..n).
// Returns the handle, or nullptr with *err set to one line: "dlopen failed: <loader's reason>"
// or "not a usable <what>: entry point <name> is missing" (the library is closed again).
void* dl_open_entry_points(const std::string& path, const char* const* names, size_t n, void** slots, const char* what,
                           std::string* err);

// The file a resolved symbol lives in (dladdr), or `fallback` when the loader cannot say.
std::string dl_file_of(void* symbol, const std::string& fallback);

}  // namespace gpu
}  // namespace murphy
