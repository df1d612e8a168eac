// Opening cuBLASLt at run time (see cublaslt.h). No CUDA needed to compile this file.
#include "cublaslt.h"

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

// Accepts cuBLASLt 12 and 13 (cublasLtGetVersion() = major * 10000 + minor * 100 + patch).
std::string check_version(const CublasLtApi& api, size_t* version) {
  *version = api.GetVersion();
  const size_t major = *version / 10000;
  if (major == 12 || major == 13) return "";
  return "cublasLtGetVersion() reports " + cublaslt_version_text(*version) + " (raw " + std::to_string(*version) +
         "); murphy-native needs cuBLASLt 12 or 13";
}

DlLibrary<CublasLtApi, size_t> g_lib("cuBLASLt", kCublasLtSymbols, kCublasLtSymbolCount, check_version);

}  // namespace

std::string cublaslt_version_text(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

CublasLtFound cublaslt_load(const std::vector<CublasLtCandidate>& candidates, bool install) {
  return g_lib.load(candidates, install);
}

const CublasLtApi* cublaslt() { return g_lib.api(); }

void cublaslt_fail(cublasStatus_t st, const char* expr, const char* file, int line) {
  const CublasLtApi* api = cublaslt();
  std::string name = api && api->GetStatusName ? api->GetStatusName(st) : "status";
  std::string text = api && api->GetStatusString ? api->GetStatusString(st) : "";
  throw Error("cuBLASLt error " + name + " (" + std::to_string(st) + (text.empty() ? "" : ", " + text) + ") in " +
              expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace gpu
}  // namespace murphy
