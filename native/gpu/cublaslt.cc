// Opening cuBLASLt at run time (see cublaslt.h). No CUDA needed to compile this file.
#include "cublaslt.h"

#include <dlfcn.h>

#include <mutex>

#include "dl_library.h"
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

// Opens one candidate; on success fills api/path/version and returns the handle.
void* try_open(const CublasLtCandidate& c, CublasLtApi* api, std::string* path, size_t* version, std::string* err) {
  void* h = dl_open_entry_points(c.path, kCublasLtSymbols, kCublasLtSymbolCount, reinterpret_cast<void**>(api),
                                 "cuBLASLt", err);
  if (!h) return nullptr;
  *path = dl_file_of(reinterpret_cast<void*>(api->GetVersion), c.path);
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
