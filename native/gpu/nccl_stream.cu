// The CUDA side of an NCCL communicator (nccl.h): its device and stream. Every call checked.
#include "../cuda/check.cuh"
#include "nccl.h"

namespace murphy {
namespace gpu {

void nccl_set_device(int device) { CUDA_CHECK(cudaSetDevice(device)); }

cudaStream_t nccl_stream_create(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  ::cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return reinterpret_cast<cudaStream_t>(s);
}

bool nccl_stream_done(cudaStream_t s) {
  const cudaError_t e = cudaStreamQuery(reinterpret_cast<::cudaStream_t>(s));
  if (e == cudaErrorNotReady) return false;
  CUDA_CHECK(e);
  return true;
}

void nccl_stream_destroy(cudaStream_t s) noexcept { (void)cudaStreamDestroy(reinterpret_cast<::cudaStream_t>(s)); }

}  // namespace gpu
}  // namespace murphy
