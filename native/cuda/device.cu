// Device memory, device queries and the scratch-buffer pool (CUDA build only).
//
// cuda_status() never throws: on a machine without a GPU or driver,
// cudaGetDeviceCount fails (error 35, "CUDA driver version is insufficient for CUDA
// runtime version") and that is reported as "no CUDA device: <text>". The CUDA runtime
// is linked statically, so the addon loads the same way with or without a driver.
#include <mutex>
#include <string>
#include <vector>

#include "check.cuh"
#include "murphy/device.h"

namespace murphy {

static std::string err_text(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

CudaStatus cuda_status() {
  CudaStatus st;
  try {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) st.runtime_version = v;
    v = 0;
    if (cudaDriverGetVersion(&v) == cudaSuccess) st.driver_version = v;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      st.reason = "no CUDA device: " + err_text(e);
      return st;
    }
    if (count <= 0) {
      st.reason = "no CUDA device: cudaGetDeviceCount found 0 devices";
      return st;
    }
    int current = 0;
    bool have_current = cudaGetDevice(&current) == cudaSuccess;
    std::string problems;
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      e = cudaGetDeviceProperties(&p, i);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        problems += "device " + std::to_string(i) + ": " + err_text(e) + "; ";
        continue;
      }
      CudaDeviceInfo d;
      d.index = i;
      d.name = p.name;
      d.total_memory = p.totalGlobalMem;
      d.cc_major = p.major;
      d.cc_minor = p.minor;
      d.multiprocessors = p.multiProcessorCount;
      size_t fr = 0, tot = 0;
      if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        d.free_memory = fr;
      } else {
        cudaError_t e2 = cudaGetLastError();
        problems += "device " + std::to_string(i) + ": " + err_text(e2) + "; ";
        continue;  // a device we cannot create a context on is not usable
      }
      st.devices.push_back(std::move(d));
    }
    if (have_current) (void)cudaSetDevice(current);
    (void)cudaGetLastError();
    st.available = !st.devices.empty();
    if (!st.available) st.reason = "no CUDA device: " + (problems.empty() ? std::string("none usable") : problems);
  } catch (...) {
    st.available = false;
    st.devices.clear();
    if (st.reason.empty()) st.reason = "no CUDA device: unexpected failure while querying devices";
  }
  return st;
}

void* cuda_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;  // a distinct, valid pointer even for empty arrays
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    size_t fr = 0, tot = 0;
    std::string mem;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess)
      mem = "; " + std::to_string(fr) + " of " + std::to_string(tot) + " bytes free on the device";
    (void)cudaGetLastError();
    throw Error("cuda_alloc: cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + err_text(e) + mem,
                e == cudaErrorMemoryAllocation ? ErrorCode::NoMem : ErrorCode::Cuda);
  }
  return p;
}

void cuda_free(void* p) noexcept {
  if (!p) return;
  (void)cudaFree(p);
  (void)cudaGetLastError();
}

void cuda_upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void cuda_download(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void cuda_memset0(void* dst, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemset(dst, 0, bytes));
  cudadetail::sync_check("cuda_memset0");
}

void cuda_synchronize() { cudadetail::sync_check("cuda_synchronize"); }

namespace cudadetail {

namespace {
struct PoolEntry {
  void* ptr;
  size_t size;
  int device;
  bool busy;
};
std::mutex g_pool_mu;
std::vector<PoolEntry>& pool() {
  static auto* p = new std::vector<PoolEntry>();  // never destroyed: no cudaFree at exit
  return *p;
}
}  // namespace

Scratch::Scratch(size_t bytes) {
  if (bytes == 0) bytes = 16;
  bytes = (bytes + 255) & ~size_t(255);
  CUDA_CHECK(cudaGetDevice(&device_));
  {
    std::lock_guard<std::mutex> lk(g_pool_mu);
    PoolEntry* best = nullptr;
    for (auto& e : pool())
      if (!e.busy && e.device == device_ && e.size >= bytes && (!best || e.size < best->size)) best = &e;
    if (best) {
      best->busy = true;
      ptr_ = best->ptr;
      size_ = best->size;
      return;
    }
  }
  ptr_ = cuda_alloc(bytes);
  size_ = bytes;
  std::lock_guard<std::mutex> lk(g_pool_mu);
  pool().push_back(PoolEntry{ptr_, size_, device_, true});
}

Scratch::~Scratch() {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  auto& p = pool();
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].ptr == ptr_) {
      // Keep small buffers for reuse; give large ones back to the device.
      if (p[i].size > (size_t(64) << 20)) {
        cuda_free(ptr_);
        p.erase(p.begin() + i);
      } else {
        p[i].busy = false;
      }
      return;
    }
  }
}

int sm_count() {
  static std::mutex mu;
  static std::vector<int> cache;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lk(mu);
  if (dev >= int(cache.size())) cache.resize(dev + 1, 0);
  if (cache[dev] == 0) {
    int n = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    cache[dev] = n > 0 ? n : 1;
  }
  return cache[dev];
}

}  // namespace cudadetail
}  // namespace murphy
