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

// Kernels whose number of phases is known only at run time (a loop with a barrier in each
// step, e.g. a bisection over a row) define `MURPHY_HD int phases() const` instead of kPhases.
template <class K, class = void>
struct HasRuntimePhases {
  static constexpr bool value = false;
};
template <class K>
struct HasRuntimePhases<K, decltype(void(std::declval<const K&>().phases()))> {
  static constexpr bool value = true;
};
template <class K>
int phase_count(const K& k) {
  if constexpr (HasRuntimePhases<K>::value) return k.phases();
  else return K::kPhases;
}

// Runs kernel k over `grid` blocks of `block` threads on the host (see the rules above).
template <class K>
void run_on_host(const K& k, int64_t grid, int block, Order order = Order::Forward) {
  if (block <= 0 || block > kMaxBlock) throw Error("harness: block size " + std::to_string(block) + " outside 1..1024");
  std::vector<float> shared(K::shared_floats(block));
  const int phases = phase_count(k);
  for (int64_t bi = 0; bi < grid; ++bi) {
    const int64_t b = order == Order::Forward ? bi : grid - 1 - bi;
    for (float& s : shared) s = std::nanf("");
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
