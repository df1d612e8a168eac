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
//
// Overlap of step 1 with the backward pass (docs/distributed.md, "Overlap"), as llm.c's
// multi_gpu_async_reduce_gradient and DDP's buckets: arm() before the last micro-batch of an
// accumulation; its backward calls grads_final_from(x) whenever every gradient in [x, total) is
// final (after the head and final norm, after each layer, after the embedding: the backward
// walks the flat vector from its end), and each bucket k not yet issued whose begin >= x is
// started then, in reverse bucket order (the reference's order), on the communicator's stream
// after the compute queued so far (nccl.h start_*: an event, no host wait for the device work).
// The calls are the reference's, bucket for bucket (equal parts: a reduce-scatter in place;
// else an all-reduce in place: the shard layout is not cut to the buckets), so the sums are
// the same bits. flush() starts whatever is left (a rank without micro-batches starts them all,
// at the point where the others' backward does); step() starts any bucket left, waits for all
// of them (finish: the NCCL stream and the deadline) and goes on with 2-5. Nothing is armed on
// one rank (no collective worth overlapping) or when JavaScript chooses the reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
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

  // ---- overlap (the file comment's last paragraph)

  // The next backward starts each bucket's reduction on `comm` as soon as its gradients are
  // final. timeline (CUDA): timing events at the first start (on the NCCL stream, just before
  // the call) and at the end of the backward (on the compute stream); timeline_ms() after the step.
  void arm(std::shared_ptr<NcclComm> comm, double timeout_ms, bool timeline = false) {
    check_comm(*comm);
    if (!(timeout_ms > 0)) throw Error("zeroOverlapNext: timeoutMs must be > 0");
    if (started_ > 0 && comm.get() != comm_.get())
      throw Error("zeroOverlapNext: this step's reductions were started on another communicator");
    comm_ = std::move(comm);
    ms_ = timeout_ms;
    timeline_ = timeline;
    armed_ = true;
  }
  bool armed() const { return armed_; }
  void disarm() { armed_ = false; }
  // Buckets started this step (from the last one down); 0 when none (the reference path).
  int64_t started() const { return started_; }
  // Where each bucket of the last overlapped step was started, in start order: the frontier x
  // of grads_final_from (0 also for flush and the end of accumulate), -1 for the step's own
  // starts. Tests compare it with the layout's layer bounds (the timeline of the overlap).
  const std::vector<int64_t>& trace() const { return trace_; }

  // Every gradient in [x, total) is final: starts the buckets not started yet that lie there.
  void grads_final_from(int64_t x, const ZeroTarget<S>& t) {
    if (!armed_) return;
    for (int64_t k = plan_.n_buckets() - 1 - started_; k >= 0 && plan_.buckets[size_t(k)] >= x; --k) {
      if (started_ == 0) {
        trace_.clear();
        drop_events();
        timeline_ms_ = std::nan("");
      }
      reduce_bucket(*comm_, k, t, true, ms_, started_ == 0 && timeline_ ? &ev_start_ : nullptr);
      ++started_;
      trace_.push_back(x);
    }
  }

  // The engine's backward has queued its last kernel (timeline: the compute stream's event).
  void backward_done() {
#ifdef MURPHY_WITH_CUDA
    if (armed_ && timeline_ && comm_->device() >= 0) {
      nccl_event_destroy(ev_end_);
      ev_end_ = nullptr;
      ev_end_ = nccl_event_record(nullptr);
    }
#endif
  }

  // Milliseconds from the first started reduction (on the device) to the end of the backward in
  // the last overlapped step: > 0 when the reduction began before the backward ended; NaN
  // without the timeline's events (not armed with it, no device, or no start during the backward).
  double timeline_ms() const { return timeline_ms_; }

  ~ZeroShard() { drop_events(); }

  // Starts every bucket not started yet (collective: a rank without micro-batches starts them
  // all here, where the others' last backward starts theirs).
  void flush(std::shared_ptr<NcclComm> comm, double timeout_ms, const ZeroTarget<S>& t) {
    arm(std::move(comm), timeout_ms);
    grads_final_from(0, t);
    disarm();
  }

  // The optimizer step (the file comment's 1-5). `step` is the engine's step count (t - 1).
  AdamWResult step(NcclComm& comm, const ZeroStepOptions& o, const ZeroTarget<S>& t, int64_t step) {
    check_comm(comm);
    const double ms = o.timeout_ms;
    const int W = plan_.world, R = plan_.rank;
    // 1. the gradient summed over ranks: the reference issues and waits bucket by bucket; an
    //    overlapped step starts what its backward left and waits for all
    if (started_ > 0) {
      if (&comm != comm_.get())
        throw Error("zeroStep: this step's reductions were started on another communicator; pass the same one");
      for (int64_t k = plan_.n_buckets() - 1 - started_; k >= 0; --k) {
        reduce_bucket(comm, k, t, true, ms);
        trace_.push_back(-1);
      }
      started_ = 0;
      comm_.reset();
      comm.finish("the overlapped gradient reductions", ms);
#ifdef MURPHY_WITH_CUDA
      if (ev_start_ && ev_end_) timeline_ms_ = double(nccl_event_elapsed_ms(ev_start_, ev_end_));
#endif
      drop_events();
    } else {
      for (int64_t k = plan_.n_buckets() - 1; k >= 0; --k) reduce_bucket(comm, k, t, false, ms);
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

  // Step 1 for bucket k: equal parts reduce-scattered in place, else all-reduced in place;
  // started (overlap) or waited for (the reference).
  void reduce_bucket(NcclComm& comm, int64_t k, const ZeroTarget<S>& t, bool start, double ms, void** event = nullptr) {
    const BucketParts p = bucket_parts(plan_, k);
    if (p.m == 0) return;
    float* b = t.grads + p.begin;
    if (p.equal) {
      float* mine = t.grads + p.start[size_t(plan_.rank)];
      if (start) comm.start_reduce_scatter(b, mine, size_t(p.m), ncclFloat32, ncclSum, ms, event);
      else comm.reduce_scatter(b, mine, size_t(p.m), ncclFloat32, ncclSum, ms);
    } else {
      const size_t n = size_t(p.end - p.begin);
      if (start) comm.start_all_reduce(b, b, n, ncclFloat32, ncclSum, ms, event);
      else comm.all_reduce(b, b, n, ncclFloat32, ncclSum, ms);
    }
  }

  void drop_events() noexcept {
#ifdef MURPHY_WITH_CUDA
    nccl_event_destroy(ev_start_);
    nccl_event_destroy(ev_end_);
#endif
    ev_start_ = ev_end_ = nullptr;
  }

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
  // overlap: the communicator the started reductions run on, their deadline, and the count
  std::shared_ptr<NcclComm> comm_;
  double ms_ = 0;
  bool armed_ = false;
  int64_t started_ = 0;
  std::vector<int64_t> trace_;
  bool timeline_ = false;
  void *ev_start_ = nullptr, *ev_end_ = nullptr;
  double timeline_ms_ = std::nan("");
};

}  // namespace gpu
}  // namespace murphy
