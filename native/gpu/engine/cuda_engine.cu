// CudaBackend: the device engine on a GPU (CUDA build). Memory is cudaMalloc'd (an allocation
// that fails is a one-line ENOMEM naming what was being allocated); uploads and downloads go
// through one pinned staging buffer in 64 MiB pieces; kernels are the harness-form structs
// launched by launch_phased; GEMMs are cuBLASLt (linear_lt: bf16 operands, fp32 accumulation;
// linear_lt_f32 in the f32 mode); log-probs, GRPO loss and AdamW are native/cuda's kernels.
// Everything runs on the legacy default stream, in order; every CUDA call is checked.
//
// Attention: the flash-style kernels of native/gpu/attention.h (attention_forward_cuda /
// attention_backward_cuda, the batch's tile table uploaded once per batch) when the tree has
// them (MURPHY_ENGINE_ATTN_KERNELS, host_backend.h); else the packed attention runs on the
// host: q, k, v are downloaded, HostBackend's attention (the CPU op) runs, and its output
// uploaded. Correct, and slow at scale: docs/gpu.md says so.
//
// Written and compiled without a GPU; not yet run on one (docs/gpu.md).
#include <cstring>
#include <vector>

#include "../../cuda/check.cuh"
#include "../cublaslt.h"
#include "../decode_kernels_cuda.h"
#include "../kernels/launch.cuh"
#include "../lt_gemm.h"
#include "cuda_engine.h"
#include "device_engine.h"
#include "murphy/device.h"

namespace murphy {
namespace gpu {

namespace {

class CudaBackend {
 public:
  static const char* name() { return "cuda"; }
  static constexpr size_t kStageBytes = size_t(64) << 20;

  CudaBackend() { CUDA_CHECK(cudaMallocHost(&stage_, kStageBytes)); }
  ~CudaBackend() {
    if (stage_) (void)cudaFreeHost(stage_);
#ifdef MURPHY_ENGINE_ATTN_KERNELS
    cuda_free(tiles_);
    cuda_free(ws_);
#endif
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  void* alloc(size_t bytes, const char* what) {
    try {
      return cuda_alloc(bytes ? bytes : 1);
    } catch (const Error& e) {
      throw Error(std::string("out of device memory allocating ") + what + ": " + e.what() +
                      "; lower --micro-batch-tokens or turn on --gradient-checkpointing (`murphy-native memory-plan` shows the sizes)",
                  ErrorCode::NoMem);
    }
  }
  void free(void* p) noexcept { cuda_free(p); }
  // free device memory now (cudaMemGetInfo), for sizing the KV pools
  int64_t free_bytes() const {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return int64_t(free_b);
  }
  void upload(void* dst, const void* src, size_t bytes) {
    for (size_t o = 0; o < bytes; o += kStageBytes) {
      const size_t n = bytes - o < kStageBytes ? bytes - o : kStageBytes;
      std::memcpy(stage_, static_cast<const char*>(src) + o, n);
      CUDA_CHECK(cudaMemcpy(static_cast<char*>(dst) + o, stage_, n, cudaMemcpyHostToDevice));
    }
  }
  void download(void* dst, const void* src, size_t bytes) {
    for (size_t o = 0; o < bytes; o += kStageBytes) {
      const size_t n = bytes - o < kStageBytes ? bytes - o : kStageBytes;
      CUDA_CHECK(cudaMemcpy(stage_, static_cast<const char*>(src) + o, n, cudaMemcpyDeviceToHost));
      std::memcpy(static_cast<char*>(dst) + o, stage_, n);
    }
  }
  void copy(void* dst, const void* src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr));
  }
  void zero(void* dst, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, nullptr));
  }

  template <class K>
  void launch(const K& k) {
    launch_phased(k, kEngineBlock, nullptr);
  }

  template <typename T>
  void linear(LinearProduct which, const T* first, const T* second, void* out, bool out_f32, int64_t M, int64_t N,
              int64_t K, bool accumulate) {
    if constexpr (sizeof(T) == 4) {
      linear_lt_f32(which, first, second, static_cast<float*>(out), M, N, K, accumulate, nullptr);
    } else {
      linear_lt(which, first, second, out, out_f32 ? LtOut::F32 : LtOut::BF16, M, N, K, accumulate, nullptr);
    }
  }

#ifdef MURPHY_ENGINE_ATTN_KERNELS
  template <typename T>
  void attention_forward(const AttnBatch& s, const T* q, const T* k, const T* v, T* out, float* lse) {
    const AttnPlan& p = plans_.get(s);
    attention_forward_cuda<T>(p, device_plan(p), q, k, v, out, lse, nullptr);
  }
  template <typename T>
  void attention_backward(const AttnBatch& s, const T* q, const T* k, const T* v, const T* out, const float* lse,
                          const T* dout, T* dq, T* dk, T* dv) {
    const AttnPlan& p = plans_.get(s);
    const AttnDevicePlan d = device_plan(p);
    if (ws_floats_ < p.workspace_floats()) {
      cuda_free(ws_);
      ws_ = nullptr, ws_floats_ = 0;
      ws_ = static_cast<float*>(alloc(p.workspace_floats() * 4, "the attention workspace"));
      ws_floats_ = p.workspace_floats();
    }
    attention_backward_cuda<T>(p, d, q, k, v, out, lse, dout, dq, dk, dv, ws_, nullptr);
  }
#else
  // Host attention (see the file comment): download, HostBackend's attention, upload.
  template <typename T>
  void attention_forward(const AttnBatch& s, const T* q, const T* k, const T* v, T* out, float* lse) {
    const int64_t nq = s.T * s.n_heads * s.head_dim, nk = s.T * s.n_kv * s.head_dim, nl = s.T * s.n_heads;
    std::vector<T> hq(static_cast<size_t>(nq)), hk(static_cast<size_t>(nk)), hv(static_cast<size_t>(nk)), ho(static_cast<size_t>(nq));
    std::vector<float> hl(static_cast<size_t>(nl));
    download(hq.data(), q, hq.size() * sizeof(T));
    download(hk.data(), k, hk.size() * sizeof(T));
    download(hv.data(), v, hv.size() * sizeof(T));
    host_.attention_forward(s, hq.data(), hk.data(), hv.data(), ho.data(), hl.data());
    upload(out, ho.data(), ho.size() * sizeof(T));
    upload(lse, hl.data(), hl.size() * 4);
  }
  template <typename T>
  void attention_backward(const AttnBatch& s, const T* q, const T* k, const T* v, const T* out, const float* lse,
                          const T* dout, T* dq, T* dk, T* dv) {
    const int64_t nq = s.T * s.n_heads * s.head_dim, nk = s.T * s.n_kv * s.head_dim, nl = s.T * s.n_heads;
    std::vector<T> hq(static_cast<size_t>(nq)), hk(static_cast<size_t>(nk)), hv(static_cast<size_t>(nk)), ho(static_cast<size_t>(nq)), hd(static_cast<size_t>(nq)), gq(static_cast<size_t>(nq)),
        gk(static_cast<size_t>(nk)), gv(static_cast<size_t>(nk));
    std::vector<float> hl(static_cast<size_t>(nl));
    download(hq.data(), q, hq.size() * sizeof(T));
    download(hk.data(), k, hk.size() * sizeof(T));
    download(hv.data(), v, hv.size() * sizeof(T));
    download(ho.data(), out, ho.size() * sizeof(T));
    download(hd.data(), dout, hd.size() * sizeof(T));
    download(hl.data(), lse, hl.size() * 4);
    host_.attention_backward(s, hq.data(), hk.data(), hv.data(), ho.data(), hl.data(), hd.data(), gq.data(), gk.data(),
                             gv.data());
    upload(dq, gq.data(), gq.size() * sizeof(T));
    upload(dk, gk.data(), gk.size() * sizeof(T));
    upload(dv, gv.data(), gv.size() * sizeof(T));
  }

#endif

  // paged generation's decode kernels (decode_kernels.cu's launchers, checked there)
  template <typename T>
  void kv_append(const T* k, const T* v, const int64_t* slot, T* k_pool, T* v_pool, int64_t n_new, int64_t row) {
    kv_append_cuda(k, v, slot, k_pool, v_pool, n_new, row, nullptr);
  }
  template <typename T>
  void paged_attention(const T* q, const T* k_pool, const T* v_pool, const int32_t* table, const int32_t* seq,
                       const int32_t* pos, float* workspace, T* out, float* lse, const PagedAttentionShape& a) {
    paged_attention_cuda(q, k_pool, v_pool, table, seq, pos, workspace, out, lse, a, nullptr);
  }
  void sample(const float* logits, const float* temperature, const float* top_p, const float* min_p,
              const int32_t* top_k, const uint64_t* stream, const int64_t* step, int32_t* token, float* logp,
              int64_t rows, int64_t V) {
    sample_cuda(logits, temperature, top_p, min_p, top_k, stream, step, token, logp, rows, V, nullptr);
  }

  void logprob_forward(const LogprobForwardArgs& a) { logprob_forward_cuda(a); }
  void logprob_backward(const LogprobBackwardArgs& a) { logprob_backward_cuda(a); }
  GrpoLossStats grpo_loss(const GrpoLossArgs& a) { return grpo_loss_cuda(a); }
  AdamWResult adamw(const AdamWArgs& a) { return adamw_cuda(a); }

 private:
  void* stage_ = nullptr;
#ifdef MURPHY_ENGINE_ATTN_KERNELS
  // the batch's tile table on the device, uploaded when the plan changes
  AttnDevicePlan device_plan(const AttnPlan& p) {
    if (uploaded_ != plans_.version()) {
      const size_t n = attention_plan_ints(p);
      if (tiles_ints_ < n) {
        cuda_free(tiles_);
        tiles_ = nullptr, tiles_ints_ = 0;
        tiles_ = static_cast<int32_t*>(alloc(n * 4, "the attention tile table"));
        tiles_ints_ = n;
      }
      dplan_ = attention_upload_plan(p, tiles_, tiles_ints_, nullptr);
      uploaded_ = plans_.version();
    }
    return dplan_;
  }
  AttnPlanCache plans_;
  AttnDevicePlan dplan_;
  uint64_t uploaded_ = 0;
  int32_t* tiles_ = nullptr;
  size_t tiles_ints_ = 0;
  float* ws_ = nullptr;
  size_t ws_floats_ = 0;
#else
  HostBackend host_;
#endif
};

}  // namespace

void check_cuda_engine_available() {
  const CudaStatus st = cuda_status();
  if (!st.available) throw Error("device 'cuda': " + st.reason + "; or use device 'cpu'", ErrorCode::Cuda);
  if (!cublaslt())
    throw Error(
        "device 'cuda': cuBLASLt is not loaded (`murphy-native doctor` says where it looked); install the nvidia-cublas "
        "Python wheel or set MURPHY_CUBLASLT, or use device 'cpu'",
        ErrorCode::NoLib);
}

std::unique_ptr<model::PolicyEngine> make_cuda_engine(const model::DeviceEngineSpec& s, const model::ModelConfig& c,
                                                      const float* w_host) {
  check_cuda_engine_available();
  std::unique_ptr<CudaBackend> be(new CudaBackend());
  if (s.storage == "f32")
    return std::unique_ptr<model::PolicyEngine>(
        new DeviceEngine<CudaBackend, float>(std::move(be), c, w_host, s.gradient_checkpointing));
  return std::unique_ptr<model::PolicyEngine>(
      new DeviceEngine<CudaBackend, uint16_t>(std::move(be), c, w_host, s.gradient_checkpointing));
}

double lt_gemm_tflops(int64_t m, int64_t n, int64_t k, int iters) {
  check_cuda_engine_available();
  if (m <= 0 || n <= 0 || k <= 0 || iters <= 0) throw Error("lt_gemm_tflops: sizes and iterations must be positive");
  struct Mem {
    void* p = nullptr;
    ~Mem() { cuda_free(p); }
  } a, b, c;
  a.p = cuda_alloc(size_t(m * k) * 2), b.p = cuda_alloc(size_t(n * k) * 2), c.p = cuda_alloc(size_t(m * n) * 4);
  CUDA_CHECK(cudaMemset(a.p, 0x3c, size_t(m * k) * 2));  // bf16 0x3c3c = 0.0115: finite, nonzero
  CUDA_CHECK(cudaMemset(b.p, 0x3c, size_t(n * k) * 2));
  auto run = [&]() {
    linear_lt(LinearProduct::Forward, static_cast<const uint16_t*>(a.p), static_cast<const uint16_t*>(b.p), c.p,
              LtOut::F32, m, n, k, false, nullptr);
  };
  run(), run();
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  float ms = 0.0f;
  try {
    CUDA_CHECK(cudaEventRecord(e0, nullptr));
    for (int i = 0; i < iters; ++i) run();
    CUDA_CHECK(cudaEventRecord(e1, nullptr));
    CUDA_CHECK(cudaEventSynchronize(e1));
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  } catch (...) {
    (void)cudaEventDestroy(e0), (void)cudaEventDestroy(e1);
    throw;
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  return 2.0 * double(m) * double(n) * double(k) * iters / (double(ms) * 1e-3) / 1e12;
}

}  // namespace gpu
}  // namespace murphy
