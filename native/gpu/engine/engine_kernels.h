// The device engine's glue kernels in harness form (kernels/harness.h): residual adds, row
// gathers and scatters for the chunked lm-head, and the fp32 -> storage conversion. One
// thread per element, each element written by the thread that reads it; T is float or
// uint16_t (bf16 bits), arithmetic in fp32. CPU reference of each: the formula in its comment
// (the loops in native/model/model.cc that do the same with std::memcpy / add_inplace).
#pragma once
#include "../kernels/harness.h"

namespace murphy {
namespace gpu {

constexpr int kEngineBlock = 256;

// ---- y_i = a_i + b_i  (y may be a: each element is read and written by one thread)
template <typename T>
struct AddKernel {
  T* y;
  const T* a;
  const T* b;
  int64_t n;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n, kEngineBlock); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i < n) st(y, i, ld(a, i) + ld(b, i));
  }
};

// ---- y_i = (assign ? 0 : y_i) + x_i  (fp32 accumulator += a storage-typed contribution)
template <typename T>
struct AccumulateF32 {
  float* y;
  const T* x;
  int64_t n;
  bool assign;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n, kEngineBlock); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i < n) y[i] = (assign ? 0.0f : y[i]) + ld(x, i);
  }
};

// ---- Rows by index, one thread per element:
//   gather  (kScatter false): dst[i, j] = src[idx[i], j]  (rows of the final hidden states for one lm-head chunk)
//   scatter (kScatter true):  dst[idx[i], j] = src[i, j]  (the chunk's input gradient back into dL/dxf; the indices
//                             of one call are distinct, so no two threads write one element)
template <typename T, bool kScatter>
struct MoveRows {
  const T* src;
  const int32_t* idx;  // [rows]
  T* dst;
  int64_t rows, dim;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(rows * dim, kEngineBlock); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t k = t.block * t.block_dim + t.thread;
    if (k >= rows * dim) return;
    const int64_t indexed = int64_t(idx[k / dim]) * dim + k % dim;
    dst[kScatter ? indexed : k] = src[kScatter ? k : indexed];
  }
};
template <typename T>
using GatherRows = MoveRows<T, false>;
template <typename T>
using ScatterRows = MoveRows<T, true>;

// ---- dst_i = round_T(src_i)  (fp32 -> storage; a copy when T is float)
template <typename T>
struct ToStorage {
  const float* src;
  T* dst;
  int64_t n;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n, kEngineBlock); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i < n) st(dst, i, src[i]);
  }
};

// ---- x_i = c * x_i  (the ZeRO-1 shard's gradient scaled by the global clip coefficient; fp32
// product, rounded once: the host path's Math.fround(coef) * g)
struct ScaleF32 {
  float* x;
  float c;
  int64_t n;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n, kEngineBlock); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i < n) x[i] = c * x[i];
  }
};

// ---- partial[k] = sum over i = k, k + K, k + 2K, ... < n of double(x_i)^2, K = blocks x
// kEngineBlock threads (each thread its own partial, no shared memory); the caller adds the K
// partials in index order in double. Squares of fp32 values are exact in double.
struct SumSquaresPartials {
  const float* x;
  int64_t n;
  double* partial;  // [blocks * kEngineBlock]
  int64_t blocks;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks; }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t k = t.block * t.block_dim + t.thread, K = t.grid_dim * t.block_dim;
    double s = 0.0;
    for (int64_t i = k; i < n; i += K) s += double(x[i]) * double(x[i]);
    partial[k] = s;
  }
};

}  // namespace gpu
}  // namespace murphy
