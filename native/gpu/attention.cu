// The attention kernels (kernels/attention.h) on the GPU: the plan's tile table uploaded to
// the device, then launch_phased for each kernel (kAttnBlock threads, shared memory from the
// plan, <= 48 KiB). The same structs run on the CPU in the tests (attention.cc). CUDA build
// only; written and compiled without a GPU: not yet run on one (docs/gpu.md).
#include "../cuda/check.cuh"
#include "attention.h"
#include "kernels/attention.h"
#include "kernels/launch.cuh"

namespace murphy {
namespace gpu {

size_t attention_plan_ints(const AttnPlan& p) { return p.tiles.size(); }

AttnDevicePlan attention_upload_plan(const AttnPlan& p, int32_t* dev_buffer, size_t dev_buffer_ints, cudaStream_t s) {
  const size_t n = attention_plan_ints(p);
  if (dev_buffer_ints < n)
    throw Error("attention_upload_plan: the device buffer holds " + std::to_string(dev_buffer_ints) + " ints, the plan needs " +
                std::to_string(n) + " (attention_plan_ints)");
  // From pageable host memory: the copy is staged before cudaMemcpyAsync returns, so the plan
  // may be destroyed afterwards; the kernels on `s` see the table in stream order.
  if (n > 0) CUDA_CHECK(cudaMemcpyAsync(dev_buffer, p.tiles.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, s));
  return AttnDevicePlan{dev_buffer, p.n_tiles()};
}

namespace {

void check_device_plan(const AttnPlan& p, const AttnDevicePlan& d) {
  if (d.n_tiles != p.n_tiles() || (d.n_tiles > 0 && d.tiles == nullptr))
    throw Error("attention: the device plan does not match the plan (upload it with attention_upload_plan)");
}

}  // namespace

template <typename T>
void attention_forward_cuda(const AttnPlan& p, const AttnDevicePlan& d, const T* q, const T* k, const T* v, T* o,
                            float* lse, cudaStream_t s) {
  check_device_plan(p, d);
  const AttnShape& sh = p.shape;
  launch_phased(AttnForward<T>{q, k, v, o, lse, d.tiles, d.n_tiles, sh.n_heads, sh.n_kv, sh.head_dim, sh.scale, p.tile,
                               int32_t(p.fault)},
                kAttnBlock, s);
}

template <typename T>
void attention_backward_cuda(const AttnPlan& p, const AttnDevicePlan& d, const T* q, const T* k, const T* v,
                             const T* o, const float* lse, const T* dout, T* dq, T* dk, T* dv, float* ws,
                             cudaStream_t s) {
  check_device_plan(p, d);
  const AttnShape& sh = p.shape;
  launch_phased(AttnBackwardDelta<T>{o, dout, ws, sh.tokens * sh.n_heads, sh.head_dim, kAttnBlock}, kAttnBlock, s);
  launch_phased(AttnBackwardDq<T>{q, k, v, dout, lse, ws, dq, d.tiles, d.n_tiles, sh.n_heads, sh.n_kv, sh.head_dim,
                                  sh.scale, p.tile, int32_t(p.fault)},
                kAttnBlock, s);
  launch_phased(AttnBackwardDkDv<T>{q, k, v, dout, lse, ws, dk, dv, d.tiles, d.n_tiles, sh.n_heads, sh.n_kv,
                                    sh.head_dim, sh.scale, p.tile, p.chunk, int32_t(p.fault)},
                kAttnBlock, s);
}

#define MURPHY_ATTN_CUDA(T)                                                                                      \
  template void attention_forward_cuda<T>(const AttnPlan&, const AttnDevicePlan&, const T*, const T*, const T*, T*, \
                                          float*, cudaStream_t);                                                 \
  template void attention_backward_cuda<T>(const AttnPlan&, const AttnDevicePlan&, const T*, const T*, const T*,  \
                                           const T*, const float*, const T*, T*, T*, T*, float*, cudaStream_t);
MURPHY_ATTN_CUDA(float)
MURPHY_ATTN_CUDA(uint16_t)
#undef MURPHY_ATTN_CUDA

}  // namespace gpu
}  // namespace murphy
