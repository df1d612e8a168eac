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

// The communicator's stream is non-blocking, so it does not wait for the default stream, where
// DeviceArray uploads (cudaMemcpy) run; and a cudaMemcpy from pageable host memory may return
// before its DMA has landed. Each collective therefore first makes its stream wait for the work
// queued on the default stream so far (an event, no host wait).
void nccl_stream_wait_default(cudaStream_t s) {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaError_t st = cudaEventRecord(e, 0);
  if (st == cudaSuccess) st = cudaStreamWaitEvent(reinterpret_cast<::cudaStream_t>(s), e, 0);
  const cudaError_t d = cudaEventDestroy(e);  // released once the wait has passed
  CUDA_CHECK(st);
  CUDA_CHECK(d);
}

void nccl_stream_destroy(cudaStream_t s) noexcept { (void)cudaStreamDestroy(reinterpret_cast<::cudaStream_t>(s)); }

void* nccl_event_record(cudaStream_t s) {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));  // with timing
  const cudaError_t st = cudaEventRecord(e, reinterpret_cast<::cudaStream_t>(s));
  if (st != cudaSuccess) (void)cudaEventDestroy(e);
  CUDA_CHECK(st);
  return e;
}

float nccl_event_elapsed_ms(void* a, void* b) {
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(a)));
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(b)));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b)));
  return ms;
}

void nccl_event_destroy(void* e) noexcept {
  if (e) (void)cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

}  // namespace gpu
}  // namespace murphy
