// The decode harness cases (harness_decode.h) run on the GPU through the launchers of
// decode_kernels.cu: inputs uploaded in the storage type, outputs downloaded. For
// `npm run test:gpu` (test/gpu/decode.test.ts), which compares them with the CPU spec and the
// harness run of the same code. CUDA build only; not yet run on a GPU.
#include "cuda_case_io.h"
#include "decode_kernels_cuda.h"
#include "harness_decode.h"

namespace murphy {
namespace gpu {

namespace {

template <typename T>
std::map<std::string, std::vector<float>> run_typed(const HarnessCase& c) {
  std::map<std::string, std::vector<float>> o;
  const cudaStream_t s = nullptr;
  if (c.params.count("fault") && c.params.at("fault") != 0.0) throw Error("kernelCuda(" + c.op + "): fault variants run in the harness only");
  if (c.op == "kv_append") {
    const KvAppendCase a = kv_append_case(c);
    const int64_t row = a.G * a.D;
    DevMem k = up<T>(input(c, "k", a.n_new * row)), v = up<T>(input(c, "v", a.n_new * row));
    DevMem kp = up<T>(input(c, "kPool", a.slots * row)), vp = up<T>(input(c, "vPool", a.slots * row)), slot = up_raw(a.slot);
    kv_append_cuda(P<T>(k), P<T>(v), P<int64_t>(slot), P<T>(kp), P<T>(vp), a.n_new, row, s);
    o["kPool"] = down<T>(kp, size_t(a.slots * row));
    o["vPool"] = down<T>(vp, size_t(a.slots * row));
  } else if (c.op == "paged_attention") {
    const PagedAttentionCase a = paged_attention_case(c);
    const int64_t pool = a.n_blocks * a.block_size * a.G * a.D;
    const PagedAttentionShape sh{a.n_new, a.H, a.G, a.D, a.block_size, a.max_blocks, a.partition, a.n_parts, a.scale};
    DevMem q = up<T>(input(c, "q", a.n_new * a.H * a.D)), kp = up<T>(input(c, "kPool", pool)), vp = up<T>(input(c, "vPool", pool));
    DevMem table = up_raw(a.table), seq = up_raw(a.seq), pos = up_raw(a.pos);
    DevMem ws = dev_alloc(size_t(paged_attention_workspace_floats(sh)) * 4);
    DevMem out = dev_alloc(size_t(a.n_new * a.H * a.D) * sizeof(T)), lse = dev_alloc(size_t(a.n_new * a.H) * 4);
    paged_attention_cuda(P<T>(q), P<T>(kp), P<T>(vp), P<int32_t>(table), P<int32_t>(seq), P<int32_t>(pos), P<float>(ws), P<T>(out),
                         P<float>(lse), sh, s);
    o["out"] = down<T>(out, size_t(a.n_new * a.H * a.D));
    o["lse"] = down<float>(lse, size_t(a.n_new * a.H));
  } else if (c.op == "sample") {
    const SampleCase a = sample_case(c);
    DevMem z = up<T>(input(c, "logits", a.rows * a.V));
    DevMem temp = up_raw(a.temperature), tp = up_raw(a.top_p), mp = up_raw(a.min_p), tk = up_raw(a.top_k);
    DevMem stream = up_raw(a.stream), step = up_raw(a.step);
    DevMem tok = dev_alloc(size_t(a.rows) * 4), lp = dev_alloc(size_t(a.rows) * 4);
    sample_cuda(P<T>(z), P<float>(temp), P<float>(tp), P<float>(mp), P<int32_t>(tk), P<uint64_t>(stream), P<int64_t>(step),
                P<int32_t>(tok), P<float>(lp), a.rows, a.V, s);
    cuda_synchronize();
    std::vector<int32_t> t(size_t(a.rows));
    cuda_download(t.data(), tok.get(), t.size() * 4);
    o["token"] = std::vector<float>(t.begin(), t.end());
    o["logp"] = down<float>(lp, size_t(a.rows));
  } else {
    throw Error("kernelCuda: op '" + c.op + "' has no CUDA runner");
  }
  return o;
}

}  // namespace

std::map<std::string, std::vector<float>> run_cuda_decode_case(const HarnessCase& c) {
  return c.bf16 ? run_typed<uint16_t>(c) : run_typed<float>(c);
}

}  // namespace gpu
}  // namespace murphy
