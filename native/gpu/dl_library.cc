// See dl_library.h.
#include "dl_library.h"

#include <dlfcn.h>

namespace murphy {
namespace gpu {

void* dl_open_entry_points(const std::string& path, const char* const* names, size_t n, void** slots, const char* what,
                           std::string* err) {
  (void)dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *err = std::string("dlopen failed: ") + (e ? e : "unknown error");
    return nullptr;
  }
  for (size_t i = 0; i < n; ++i) {
    (void)dlerror();
    void* s = dlsym(h, names[i]);
    if (!s) {
      *err = std::string("not a usable ") + what + ": entry point " + names[i] + " is missing";
      dlclose(h);
      return nullptr;
    }
    slots[i] = s;
  }
  return h;
}

void dl_close(void* handle) { dlclose(handle); }

std::string dl_not_found_reason(const char* what, const std::vector<DlAttempt>& attempts) {
  if (attempts.empty()) return std::string(what) + " not found: no place to look";
  std::string reason = std::string(what) + " not found: ";
  for (size_t i = 0; i < attempts.size(); ++i) {
    if (i) reason += "; ";
    reason += attempts[i].candidate.path + " (" + attempts[i].candidate.origin + "): " + attempts[i].error;
  }
  return reason;
}

std::string dl_file_of(void* symbol, const std::string& fallback) {
  Dl_info info{};
  if (symbol && dladdr(symbol, &info) != 0 && info.dli_fname) return info.dli_fname;
  return fallback;
}

}  // namespace gpu
}  // namespace murphy
