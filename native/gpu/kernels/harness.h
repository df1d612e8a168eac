// Kernels written once for the GPU and the CPU (issue 13, "Testable without a GPU").
//
// A kernel is a struct holding its arguments and an operator()(phase, thread, shared) that
// does one thread's work in one phase. Phases are what runs between two barriers: the CUDA
// launcher (launch.cuh) calls every phase in order with __syncthreads() between them; the
// host harness below runs the same code over the same grid, block by block, each phase for
// every thread of the block before the next phase. A kernel is thus checked on the CPU with
// exactly the index arithmetic, masking and reduction order the GPU runs.
//
// Rules for harness kernels: threads communicate only through `shared` and only across a
// phase boundary; no warp shuffles or other lockstep assumptions (the harness has none);
// each output element is written by one thread. The harness helps catch violations: it fills
// shared memory with NaN before each block, and runs blocks and threads forward or in
// reverse order (tests require identical bits both ways).
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "murphy/common.h"

namespace murphy {
namespace gpu {

// One thread's coordinates (1-D blocks and grids).
struct Thread {
  int64_t block;
  int thread;
  int block_dim;
  int64_t grid_dim;
};

// Element access in the storage type: f32, or bf16 as raw bits (round to nearest even on store).
MURPHY_HD float ld(const float* p, int64_t i) { return p[i]; }
MURPHY_HD float ld(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }
MURPHY_HD void st(float* p, int64_t i, float v) { p[i] = v; }
MURPHY_HD void st(uint16_t* p, int64_t i, float v) { p[i] = f32_to_bf16(v); }

// Block sum in three phases over shared floats [0, B + 33):
//   phase a: every thread writes its partial to sh[thread]           (the kernel does this)
//   phase b: block_sum_warps  — each 32-thread group's first thread sums its 32 partials
//            in thread order into sh[B + group]
//   phase c: block_sum_total  — thread 0 sums the group sums in order into sh[B + 32]
// and every thread reads sh[B + 32] after the next barrier. Fixed order: deterministic.
constexpr int kMaxBlock = 1024;
inline size_t block_sum_shared_floats(int block) { return size_t(block) + 33; }
MURPHY_HD void block_sum_warps(const Thread& t, float* sh) {
  if (t.thread % 32 != 0) return;
  float s = 0.0f;
  const int end = t.thread + 32 < t.block_dim ? t.thread + 32 : t.block_dim;
  for (int i = t.thread; i < end; ++i) s += sh[i];
  sh[t.block_dim + t.thread / 32] = s;
}
MURPHY_HD float block_sum_total(const Thread& t, float* sh) {
  const int groups = (t.block_dim + 31) / 32;
  float s = 0.0f;
  for (int g = 0; g < groups; ++g) s += sh[t.block_dim + g];
  return s;
}
MURPHY_HD int block_sum_slot(const Thread& t) { return t.block_dim + 32; }

enum class Order { Forward, Reverse };

// Phase count: a kernel has a compile-time `static constexpr int kPhases`, or a run-time
// count (a loop with a barrier in each step: a phase per iteration), either the same for
// every block, `MURPHY_HD int phases() const`, or per block, `MURPHY_HD int phases(int64_t
// block) const` (e.g. a loop over the tiles a block's tile interacts with). A per-block count
// is the same for every thread of the block, so each thread meets every barrier.
template <class K, class = void>
struct HasBlockPhases : std::false_type {};
template <class K>
struct HasBlockPhases<K, std::void_t<decltype(std::declval<const K&>().phases(int64_t(0)))>> : std::true_type {};
template <class K, class = void>
struct HasRuntimePhases : std::false_type {};
template <class K>
struct HasRuntimePhases<K, std::void_t<decltype(std::declval<const K&>().phases())>> : std::true_type {};
template <class K>
MURPHY_HD int kernel_phases(const K& k, int64_t block) {
  if constexpr (HasBlockPhases<K>::value) return k.phases(block);
  else if constexpr (HasRuntimePhases<K>::value) return k.phases();
  else return K::kPhases;
}

// The largest block a kernel runs with: kMaxBlock, or its own `static constexpr int
// kBlockLimit` (smaller), which the CUDA launcher passes to __launch_bounds__. At kMaxBlock
// threads ptxas may give a thread at most 64 registers; a kernel that needs more (its fp64
// partials: the sampler's multi-way search) declares the block size it is launched with.
template <class K, class = void>
struct BlockLimit : std::integral_constant<int, kMaxBlock> {};
template <class K>
struct BlockLimit<K, std::void_t<decltype(K::kBlockLimit)>> : std::integral_constant<int, K::kBlockLimit> {};

// Runs kernel k over `grid` blocks of `block` threads on the host (see the rules above).
template <class K>
void run_on_host(const K& k, int64_t grid, int block, Order order = Order::Forward) {
  constexpr int limit = BlockLimit<K>::value;
  static_assert(limit > 0 && limit <= kMaxBlock, "a kernel's kBlockLimit is in 1..kMaxBlock");
  if (block <= 0 || block > limit)
    throw Error("harness: block size " + std::to_string(block) + " outside 1.." + std::to_string(limit));
  std::vector<float> shared(k.shared_floats(block));  // static, or a member when it depends on the arguments
  for (int64_t bi = 0; bi < grid; ++bi) {
    const int64_t b = order == Order::Forward ? bi : grid - 1 - bi;
    for (float& s : shared) s = std::nanf("");
    const int phases = kernel_phases(k, b);
    for (int p = 0; p < phases; ++p) {
      for (int ti = 0; ti < block; ++ti) {
        const int t = order == Order::Forward ? ti : block - 1 - ti;
        k(p, Thread{b, t, block, grid}, shared.data());
      }
    }
  }
}

// Grid size for `n` independent items of `block` threads each.
inline int64_t blocks_for(int64_t n, int block) { return (n + block - 1) / block; }

}  // namespace gpu
}  // namespace murphy
