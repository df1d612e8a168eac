// Device memory and device queries, implemented in native/cuda/device.cu (CUDA build only).
// In a CPU-only build these are absent and the addon reports "built without CUDA".
#pragma once
#include <string>
#include <vector>
#include "common.h"

namespace murphy {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  uint64_t total_memory = 0;
  uint64_t free_memory = 0;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
};

struct CudaStatus {
  bool available = false;          // at least one usable device
  std::string reason;              // why not, e.g. "no CUDA device: CUDA driver version is insufficient ..."
  int runtime_version = 0;         // cudaRuntimeGetVersion
  int driver_version = 0;          // cudaDriverGetVersion (0 when no driver)
  std::vector<CudaDeviceInfo> devices;
};

#ifdef MURPHY_WITH_CUDA
CudaStatus cuda_status();                       // never throws
void* cuda_alloc(size_t bytes);                 // throws Error naming the size and the free memory
void cuda_free(void* p) noexcept;
void cuda_upload(void* dst, const void* src, size_t bytes);
void cuda_download(void* dst, const void* src, size_t bytes);
void cuda_memset0(void* dst, size_t bytes);
void cuda_synchronize();
#endif

}  // namespace murphy
