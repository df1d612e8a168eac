// Device memory for the GPU runs of harness cases (cuda_ops.cu, cuda_decode_cases.cu): owned
// allocations, uploads in the storage type, downloads widened to f32. CUDA build only.
#pragma once
#include <memory>
#include <vector>

#include "harness_io.h"
#include "murphy/device.h"

namespace murphy {
namespace gpu {

using DevMem = std::unique_ptr<void, void (*)(void*)>;

inline DevMem dev_alloc(size_t bytes) { return DevMem(cuda_alloc(bytes), [](void* p) { cuda_free(p); }); }

template <typename T>
DevMem up(const std::vector<float>& v) {
  const std::vector<T> h = to_storage<T>(v);
  DevMem d = dev_alloc(h.size() * sizeof(T));
  cuda_upload(d.get(), h.data(), h.size() * sizeof(T));
  return d;
}

template <typename T>
DevMem up_raw(const std::vector<T>& h) {
  DevMem d = dev_alloc(h.size() * sizeof(T));
  cuda_upload(d.get(), h.data(), h.size() * sizeof(T));
  return d;
}

template <typename T>
std::vector<float> down(const DevMem& d, size_t n) {
  cuda_synchronize();
  std::vector<T> h(n);
  cuda_download(h.data(), d.get(), n * sizeof(T));
  return widen(h);
}

template <typename T>
T* P(const DevMem& d) { return static_cast<T*>(d.get()); }

}  // namespace gpu
}  // namespace murphy
