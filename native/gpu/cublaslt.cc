// Opening cuBLASLt at run time (see cublaslt.h). No CUDA needed to compile this file.
#include "cublaslt.h"

#include <dlfcn.h>

#include <mutex>

#include "murphy/common.h"

namespace murphy {
namespace gpu {

const char* const kCublasLtSymbols[] = {
    "cublasLtGetVersion",
    "cublasLtGetStatusName",
    "cublasLtGetStatusString",
    "cublasLtCreate",
    "cublasLtDestroy",
    "cublasLtMatmulDescCreate",
    "cublasLtMatmulDescDestroy",
    "cublasLtMatmulDescSetAttribute",
    "cublasLtMatrixLayoutCreate",
    "cublasLtMatrixLayoutDestroy",
    "cublasLtMatrixLayoutSetAttribute",
    "cublasLtMatmulPreferenceCreate",
    "cublasLtMatmulPreferenceDestroy",
    "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatmulAlgoGetHeuristic",
    "cublasLtMatmul",
};
const size_t kCublasLtSymbolCount = sizeof(kCublasLtSymbols) / sizeof(kCublasLtSymbols[0]);
static_assert(sizeof(kCublasLtSymbols) / sizeof(kCublasLtSymbols[0]) * sizeof(void*) == sizeof(CublasLtApi),
              "kCublasLtSymbols must name every CublasLtApi field, in order");

namespace {

std::mutex g_mu;
bool g_installed = false;
CublasLtApi g_api{};
CublasLtFound g_found;

std::string dl_error(const char* fallback) {
  const char* e = dlerror();
  return e ? std::string(e) : std::string(fallback);
}

// Opens one candidate; on success fills api/path/version and returns the handle.
void* try_open(const CublasLtCandidate& c, CublasLtApi* api, std::string* path, size_t* version, std::string* err) {
  (void)dlerror();
  void* h = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *err = "dlopen failed: " + dl_error("unknown error");
    return nullptr;
  }
  void** slots = reinterpret_cast<void**>(api);
  for (size_t i = 0; i < kCublasLtSymbolCount; ++i) {
    (void)dlerror();
    void* s = dlsym(h, kCublasLtSymbols[i]);
    if (!s) {
      *err = std::string("not a usable cuBLASLt: entry point ") + kCublasLtSymbols[i] + " is missing";
      dlclose(h);
      return nullptr;
    }
    slots[i] = s;
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(api->GetVersion), &info) != 0 && info.dli_fname) *path = info.dli_fname;
  else *path = c.path;
  *version = api->GetVersion();
  const size_t major = *version / 10000;
  if (major != 12 && major != 13) {
    *err = "cublasLtGetVersion() reports " + cublaslt_version_text(*version) +
           " (raw " + std::to_string(*version) + "); murphy-native needs cuBLASLt 12 or 13";
    dlclose(h);
    return nullptr;
  }
  return h;
}

}  // namespace

std::string cublaslt_version_text(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

CublasLtFound cublaslt_load(const std::vector<CublasLtCandidate>& candidates, bool install) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_installed) return g_found;
  CublasLtFound r;
  for (const CublasLtCandidate& c : candidates) {
    CublasLtApi api{};
    std::string path, err;
    size_t version = 0;
    void* h = try_open(c, &api, &path, &version, &err);
    r.attempts.push_back(CublasLtAttempt{c, err});
    if (!h) continue;
    r.ok = true;
    r.path = path;
    r.origin = c.origin;
    r.version = version;
    if (install) {
      g_api = api;
      g_installed = true;
      g_found = r;
    } else {
      dlclose(h);
    }
    return r;
  }
  if (candidates.empty()) {
    r.reason = "cuBLASLt not found: no place to look";
  } else {
    r.reason = "cuBLASLt not found: ";
    for (size_t i = 0; i < r.attempts.size(); ++i) {
      const CublasLtAttempt& a = r.attempts[i];
      if (i) r.reason += "; ";
      r.reason += a.candidate.path + " (" + a.candidate.origin + "): " + a.error;
    }
  }
  return r;
}

const CublasLtApi* cublaslt() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_installed ? &g_api : nullptr;
}

void cublaslt_fail(cublasStatus_t st, const char* expr, const char* file, int line) {
  const CublasLtApi* api = cublaslt();
  std::string name = api && api->GetStatusName ? api->GetStatusName(st) : "status";
  std::string text = api && api->GetStatusString ? api->GetStatusString(st) : "";
  throw Error("cuBLASLt error " + name + " (" + std::to_string(st) + (text.empty() ? "" : ", " + text) + ") in " +
              expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace gpu
}  // namespace murphy
