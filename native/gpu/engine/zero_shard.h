// ZeRO-1 on the device engine's own memory (docs/distributed.md, "ZeRO-1 on the device
// engine"): one rank's shard of the optimizer state and the optimizer step that never leaves
// the device. The engine (device_engine.h) owns the full buffers (fp32 master weights, the
// compute copy, the fp32 gradients); this class owns the shard's state and drives the collectives on the engine's device pointers through an NCCL communicator
// (nccl.h: every call checked, bounded by the deadline, aborted past it). Over HostBackend
// ("emulate") the pointers are host memory and only a fake NCCL library accepts them (the
// tests': test/helpers/fake-nccl.ts).
//
// State of the shard [s0, s1) of the flat vector:
//   fp32 master weights   f32 storage: the engine's master [s0, s1) itself (it is the compute
//                         copy); bf16 storage: a shard-sized buffer here, and the engine
//                         releases its full master (its weights are then the bf16 compute copy,
//                         the same on every rank; the fp32 master exists only as shards)
//   AdamW moments         m, v [s1 - s0] here (the engine's full-size moments are released)
//
// The step (the host path's formulas, lib/dist/zero.ts):
//   1. the gradient summed over ranks, bucket by bucket in reverse order (zero_plan.h): a
//      bucket whose parts are equal is reduce-scattered in place; any other (most lie inside one
//      shard) is all-reduced in place, twice a reduce-scatter's traffic where padding its parts
//      to NCCL's equal ones would cost up to W times it; then the engine's gradient [s0, s1) is
//      the sum over ranks
//   2. sq = sum of the shard's squares (SumSquaresPartials, added in double), all-reduced
//      (f64); norm = sqrt(sq); with max_grad_norm > 0 a non-finite norm skips the step on every
//      rank, else coef = min(1, max_grad_norm / (norm + 1e-6)) and g = fround(coef) * g
//   3. AdamW (the backend's kernel, no clipping) over the shard's slice of each parameter,
//      weight decay on matrices only; bf16: the compute copy of the shard written in its pass
//   4. the compute copy (bf16, or the f32 master) gathered, bucket by bucket in order: equal
//      parts all-gathered in place, else each owning rank's part broadcast from it (in rank order)
//   5. the gradients zeroed, the step counted.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../../model/model_internal.h"
#include "../nccl.h"
#include "engine_kernels.h"
#include "murphy/adamw.h"
#include "zero_plan.h"

namespace murphy {
namespace gpu {

template <class B, class X>
class DBuf;  // device_engine.h

// Where the engine keeps the full buffers the step reads and writes.
template <typename S>
struct ZeroTarget {
  float* master;  // [P] fp32 (f32 storage: also the compute copy); null once released (bf16)
  S* compute;     // [P] the compute copy (== master for f32)
  float* grads;   // [P]
  int64_t total;
};

template <class B, typename S>
class ZeroShard {
  static constexpr bool kF32 = std::is_same<S, float>::value;

 public:
  // Takes over the engine's current weights: the shard's fp32 master from `t.master` (bf16:
  // the engine releases its full master afterwards); zero moments.
  ZeroShard(B* b, const model::Layout& L, ZeroPlan plan, const ZeroTarget<S>& t) : b_(b), L_(L), plan_(std::move(plan)) {
    check_zero_plan(plan_, L_.total);
    const int64_t n = size();
    const char* what = "the ZeRO-1 shard";
    if (!kF32) master_.ensure(b_, n, what);
    m_.ensure(b_, n, what), v_.ensure(b_, n, what);
    b_->zero(m_.data(), size_t(n) * 4);
    b_->zero(v_.data(), size_t(n) * 4);
    parts_.ensure(b_, kNormBlocks * kEngineBlock, "the ZeRO-1 norm partials");
    one_.ensure(b_, 1, "the ZeRO-1 norm");
    adopt(t.master, 0, t.total);
  }

  int64_t begin() const { return plan_.begin(); }
  int64_t end() const { return plan_.end(); }
  int64_t size() const { return end() - begin(); }
  const ZeroPlan& plan() const { return plan_; }
  int64_t bytes() const { return master_.bytes() + m_.bytes() + v_.bytes(); }

  // New fp32 values `src` of [off, off + n) (a load or set_param; the engine has rounded them
  // into its compute copy): bf16 copies the part in the shard into the shard's master. f32: the
  // engine's master is the shard's already.
  void adopt(const float* src, int64_t off, int64_t n) {
    if (kF32) return;
    const int64_t a = std::max(off, begin()), e = std::min(off + n, end());
    if (e > a) b_->copy(master_.data() + (a - begin()), src + (a - off), size_t(e - a) * 4);
  }

  // Host copies of the shard's fp32 master weights and moments ([size()] each).
  void get(const ZeroTarget<S>& t, float* master, float* m, float* v) {
    const size_t n = size_t(size()) * 4;
    b_->download(master, kF32 ? t.master + begin() : master_.data(), n);
    b_->download(m, m_.data(), n);
    b_->download(v, v_.data(), n);
  }

  // Sets the shard's master weights and moments; bf16: the compute copy of the shard is
  // rounded from them.
  void set(const ZeroTarget<S>& t, const float* master, const float* m, const float* v) {
    const size_t n = size_t(size()) * 4;
    float* dst = kF32 ? t.master + begin() : master_.data();
    b_->upload(dst, master, n);
    b_->upload(m_.data(), m, n);
    b_->upload(v_.data(), v, n);
    if (!kF32) b_->launch(ToStorage<S>{master_.data(), t.compute + begin(), size()});
  }

  // The optimizer step (the file comment's 1-5). `step` is the engine's step count (t - 1).
  AdamWResult step(NcclComm& comm, const ZeroStepOptions& o, const ZeroTarget<S>& t, int64_t step) {
    check_comm(comm);
    const double ms = o.timeout_ms;
    const int W = plan_.world, R = plan_.rank;
    // 1. the gradient summed over ranks
    for (int64_t k = plan_.n_buckets() - 1; k >= 0; --k) {
      const BucketParts p = bucket_parts(plan_, k);
      if (p.m == 0) continue;
      if (p.equal)
        comm.reduce_scatter(t.grads + p.begin, t.grads + p.start[size_t(R)], size_t(p.m), ncclFloat32, ncclSum, ms);
      else
        comm.all_reduce(t.grads + p.begin, t.grads + p.begin, size_t(p.end - p.begin), ncclFloat32, ncclSum, ms);
    }
    // 2. the global norm and the clip coefficient
    const int64_t n = size();
    float* g = t.grads + begin();
    double sq = 0.0;
    if (n > 0) {
      const int64_t blocks = std::min<int64_t>(kNormBlocks, blocks_for(n, kEngineBlock));
      b_->launch(SumSquaresPartials{g, n, parts_.data(), blocks});
      std::vector<double> h(size_t(blocks * kEngineBlock));
      b_->download(h.data(), parts_.data(), h.size() * 8);
      for (double x : h) sq += x;
    }
    b_->upload(one_.data(), &sq, 8);
    comm.all_reduce(one_.data(), one_.data(), 1, ncclFloat64, ncclSum, ms);
    b_->download(&sq, one_.data(), 8);
    AdamWResult r;
    r.grad_norm = std::sqrt(sq);
    if (o.max_grad_norm > 0) {
      if (!std::isfinite(r.grad_norm)) {
        b_->zero(t.grads, size_t(t.total) * 4);
        r.clip_coef = 0, r.skipped = true;
        return r;
      }
      r.clip_coef = std::min(1.0, o.max_grad_norm / (r.grad_norm + 1e-6));
      if (r.clip_coef < 1 && n > 0) b_->launch(ScaleF32{g, float(r.clip_coef), n});
    }
    // 3. AdamW on the shard's slices
    std::vector<AdamWTensor> ts;
    for (const model::ParamInfo& p : L_.params) {
      const int64_t a = std::max(p.offset, begin()), e = std::min(p.offset + p.numel, end());
      if (e <= a) continue;
      AdamWTensor x;
      x.param = kF32 ? t.master + a : master_.data() + (a - begin());
      x.grad = t.grads + a;
      x.m = m_.data() + (a - begin());
      x.v = v_.data() + (a - begin());
      x.param_bf16 = kF32 ? nullptr : reinterpret_cast<uint16_t*>(t.compute) + a;
      x.numel = e - a;
      x.decay = p.decay;
      ts.push_back(x);
    }
    if (!ts.empty()) {
      AdamWArgs a;
      a.tensors = ts.data();
      a.n_tensors = int64_t(ts.size());
      a.lr = o.lr, a.beta1 = o.beta1, a.beta2 = o.beta2, a.eps = o.eps, a.weight_decay = o.weight_decay;
      a.step = step + 1;
      a.max_grad_norm = 0.0f;
      b_->adamw(a);
    }
    // 4. all-gather of the compute copy
    const int dt = kF32 ? ncclFloat32 : ncclBfloat16;
    for (int64_t k = 0; k < plan_.n_buckets(); ++k) {
      const BucketParts p = bucket_parts(plan_, k);
      if (p.m == 0) continue;
      if (p.equal) {
        comm.all_gather(t.compute + p.start[size_t(R)], t.compute + p.begin, size_t(p.m), dt, ms);
        continue;
      }
      for (int q = 0; q < W; ++q)
        if (p.counts[size_t(q)])
          comm.broadcast(t.compute + p.start[size_t(q)], t.compute + p.start[size_t(q)], size_t(p.counts[size_t(q)]), dt, q, ms);
    }
    // 5.
    b_->zero(t.grads, size_t(t.total) * 4);
    return r;
  }

 private:
  static constexpr int64_t kNormBlocks = 64;

  // The communicator must be this plan's rank and world, and live where the engine's memory
  // does: a CUDA device for "cuda", none (-1, a fake library's host pointers) for "emulate".
  void check_comm(const NcclComm& c) const {
    if (c.nranks() != plan_.world || c.rank() != plan_.rank)
      throw Error("zeroStep: the communicator is rank " + std::to_string(c.rank()) + " of " + std::to_string(c.nranks()) +
                  ", the shard plan rank " + std::to_string(plan_.rank) + " of " + std::to_string(plan_.world) +
                  "; pass the communicator the plan was made for");
    const bool host = std::strcmp(B::name(), "emulate") == 0;
    if (host && c.device() >= 0)
      throw Error("zeroStep: the emulated engine keeps its memory on the host, but the communicator is on CUDA device " +
                  std::to_string(c.device()) + "; use the host path (lib/dist/zero.ts) or a communicator of device -1");
    if (!host && c.device() < 0)
      throw Error("zeroStep: the CUDA engine's memory is on the device, but the communicator has no device (-1)");
  }

  template <class X> using Buf = DBuf<B, X>;
  B* b_;
  const model::Layout& L_;
  ZeroPlan plan_;
  Buf<float> master_, m_, v_;
  Buf<double> parts_, one_;
};

}  // namespace gpu
}  // namespace murphy
