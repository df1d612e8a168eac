// The harness cases (harness_ops.h) run on the GPU: inputs uploaded in the storage type, the
// CUDA launcher of the kernel (model_kernels.cu) or linear_lt (lt_gemm.cu) on the default
// stream, outputs downloaded. For `npm run test:gpu`, which compares them with the CPU ops and
// with the harness run of the same kernel code. CUDA build only; not yet run on a GPU.
#include "../cuda/check.cuh"
#include "cuda_case_io.h"
#include "harness_decode.h"
#include "lt_gemm.h"
#include "model_kernels_cuda.h"
#include "murphy/device.h"
#include "murphy/model/ops.h"

namespace murphy {
namespace gpu {

namespace {

template <typename T>
std::map<std::string, std::vector<float>> run_typed(const HarnessCase& c) {
  std::map<std::string, std::vector<float>> o;
  const cudaStream_t s = nullptr;
  if (c.op == "rmsnorm_forward") {
    const size_t rn = size_t(c.rows * c.n);
    DevMem x = up<T>(input(c, "x", c.rows * c.n)), w = up<T>(input(c, "w", c.n));
    DevMem y = dev_alloc(rn * sizeof(T)), rstd = dev_alloc(size_t(c.rows) * 4);
    rmsnorm_forward_cuda(P<T>(x), P<T>(w), P<T>(y), P<float>(rstd), c.rows, c.n, c.eps, s);
    o["y"] = down<T>(y, rn);
    o["rstd"] = down<float>(rstd, size_t(c.rows));
  } else if (c.op == "rmsnorm_backward") {
    const size_t rn = size_t(c.rows * c.n);
    DevMem x = up<T>(input(c, "x", c.rows * c.n)), w = up<T>(input(c, "w", c.n)), dy = up<T>(input(c, "dy", c.rows * c.n));
    DevMem rstd = up<float>(input(c, "rstd", c.rows));
    DevMem dx = dev_alloc(rn * sizeof(T)), dw = dev_alloc(size_t(c.n) * 4);
    cuda_memset0(dw.get(), size_t(c.n) * 4);
    rmsnorm_backward_input_cuda(P<T>(dy), P<T>(x), P<T>(w), P<float>(rstd), P<T>(dx), c.rows, c.n, s);
    rmsnorm_backward_weight_cuda(P<T>(dy), P<T>(x), P<float>(rstd), P<float>(dw), c.rows, c.n, s);
    o["dx"] = down<T>(dx, rn);
    o["dw"] = down<float>(dw, size_t(c.n));
  } else if (c.op == "residual_rmsnorm_forward" || c.op == "rmsnorm_residual_forward") {
    const bool pre = c.op == "residual_rmsnorm_forward";
    const size_t rn = size_t(c.rows * c.n);
    DevMem x = up<T>(input(c, "x", c.rows * c.n)), b = up<T>(input(c, pre ? "d" : "a", c.rows * c.n)), w = up<T>(input(c, "w", c.n));
    DevMem h = dev_alloc(rn * sizeof(T)), y = dev_alloc(rn * sizeof(T)), rstd = dev_alloc(size_t(c.rows) * 4);
    if (pre) residual_rmsnorm_forward_cuda(P<T>(x), P<T>(b), P<T>(w), P<T>(h), P<T>(y), P<float>(rstd), c.rows, c.n, c.eps, s);
    else rmsnorm_residual_forward_cuda(P<T>(b), P<T>(w), P<T>(x), P<T>(h), P<float>(rstd), c.rows, c.n, c.eps, s);
    o["h"] = down<T>(h, rn);
    o["rstd"] = down<float>(rstd, size_t(c.rows));
    if (pre) o["y"] = down<T>(y, rn);
  } else if (c.op == "rope_forward" || c.op == "rope_backward") {
    const int64_t h = c.head_dim / 2, n = c.tokens * c.heads * c.head_dim;
    std::vector<float> cos_t(size_t(c.max_pos * h)), sin_t(size_t(c.max_pos * h));
    model::rope_table_init(cos_t.data(), sin_t.data(), c.max_pos, c.head_dim, c.theta);
    DevMem x = up<T>(input(c, "x", n)), pos = up_raw(c.ints), ct = up_raw(cos_t), stt = up_raw(sin_t);
    rope_cuda(P<T>(x), P<int32_t>(pos), P<float>(ct), P<float>(stt), c.tokens, c.heads, c.head_dim, c.op == "rope_backward", s);
    o["x"] = down<T>(x, size_t(n));
  } else if (c.op == "swiglu_forward" || c.op == "swiglu_backward") {
    DevMem g = up<T>(input(c, "g", c.n)), u = up<T>(input(c, "u", c.n));
    if (c.op == "swiglu_forward") {
      DevMem a = dev_alloc(size_t(c.n) * sizeof(T));
      swiglu_forward_cuda(P<T>(g), P<T>(u), P<T>(a), c.n, s);
      o["act"] = down<T>(a, size_t(c.n));
    } else {
      DevMem da = up<T>(input(c, "da", c.n)), dg = dev_alloc(size_t(c.n) * sizeof(T)), du = dev_alloc(size_t(c.n) * sizeof(T));
      swiglu_backward_cuda(P<T>(da), P<T>(g), P<T>(u), P<T>(dg), P<T>(du), c.n, s);
      o["dg"] = down<T>(dg, size_t(c.n));
      o["du"] = down<T>(du, size_t(c.n));
    }
  } else if (c.op == "embedding_forward") {
    DevMem table = up<T>(input(c, "table", c.vocab * c.dim)), ids = up_raw(c.ints);
    DevMem y = dev_alloc(size_t(c.tokens * c.dim) * sizeof(T));
    embedding_gather_cuda(P<T>(table), P<int32_t>(ids), P<T>(y), c.tokens, c.dim, s);
    o["y"] = down<T>(y, size_t(c.tokens * c.dim));
  } else if (c.op == "embedding_backward") {
    DevMem dy = up<T>(input(c, "dy", c.tokens * c.dim)), ids = up_raw(c.ints);
    const size_t vd = size_t(c.vocab * c.dim);
    DevMem dt = dev_alloc(vd * 4);
    cuda_memset0(dt.get(), vd * 4);
    embedding_scatter_cuda(P<T>(dy), P<int32_t>(ids), P<float>(dt), c.tokens, c.dim, s);
    o["dtable"] = down<float>(dt, vd);
  } else {
    throw Error("kernelCuda: op '" + c.op + "' has no CUDA runner");
  }
  return o;
}

// cuBLASLt: bf16 inputs, fp32 output (initial contents given, for accumulation).
std::map<std::string, std::vector<float>> run_lt(const HarnessCase& c) {
  const int64_t M = c.rows, N = c.n, K = c.dim;
  LinearProduct which;
  const char *f, *g, *out;
  int64_t fl, gl, ol;
  if (c.op == "lt_linear_forward") which = LinearProduct::Forward, f = "x", g = "w", out = "y", fl = M * K, gl = N * K, ol = M * N;
  else if (c.op == "lt_linear_backward_input") which = LinearProduct::BackwardInput, f = "dy", g = "w", out = "dx", fl = M * N, gl = N * K, ol = M * K;
  else which = LinearProduct::BackwardWeight, f = "dy", g = "x", out = "dw", fl = M * N, gl = M * K, ol = N * K;
  DevMem a = up<uint16_t>(input(c, f, fl)), b = up<uint16_t>(input(c, g, gl)), y = up<float>(input(c, out, ol));
  linear_lt(which, P<uint16_t>(a), P<uint16_t>(b), y.get(), LtOut::F32, M, N, K, c.accumulate, nullptr);
  return {{"out", down<float>(y, size_t(ol))}};
}

}  // namespace

// The caller runs run_harness_case(c) first: it checks the case (sizes, ids, positions).
std::map<std::string, std::vector<float>> run_cuda_case(const HarnessCase& c) {
  if (c.op.rfind("lt_linear_", 0) == 0) return run_lt(c);
  if (is_decode_op(c.op)) return run_cuda_decode_case(c);
  return c.bf16 ? run_typed<uint16_t>(c) : run_typed<float>(c);
}

}  // namespace gpu
}  // namespace murphy
