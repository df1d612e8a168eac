// Causal grouped-query attention over packed variable-length sequences, forward and backward,
// for the GPU engine (issue 13): the host-side API. The kernels are in kernels/attention.h
// (harness form: the same code runs on the GPU and, block by block, on the CPU); their spec is
// native/model/attention.cc (attention_forward_cpu / attention_backward_cpu).
//
//   o_t,h   = sum_{j in seq(t), j <= t} softmax_j(scale q_t,h . k_j,g) v_j,g,   g = h / (H / G)
//   lse_t,h = log sum_j exp(scale q_t,h . k_j,g)                                   (f32)
//   backward (P recomputed from lse; no T x T matrix is stored):
//   D_t,h   = dO_t,h . O_t,h                           (pre-pass, f32 workspace [T, H])
//   dS_tj   = P_tj (dO_t,h . v_j,g - D_t,h)
//   dq_t,h  = scale sum_j dS_tj k_j,g
//   dk_j,g  = scale sum_{h in g} sum_t dS_tj q_t,h,    dv_j,g = sum_{h in g} sum_t P_tj dO_t,h
//
// Flash-style tiling: a block owns one query tile of `tile` rows of one sequence (forward, dQ)
// or one key tile of `tile` rows (dK/dV) and loops over the tiles it interacts with, staged in
// shared memory; the softmax is computed online (running max and sum per row). Memory: the
// workspace is T x H floats and shared memory per block depends on head_dim only, never on T.
// Deterministic, no atomics: every output element has one writer that sums in a fixed order.
//
// Storage type T: float or uint16_t (bf16 bits); arithmetic fp32; lse and the workspace f32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/harness.h"

#ifdef MURPHY_WITH_CUDA
// The CUDA runtime's stream type, declared as cuda_runtime.h does (plain C++ files of the CUDA
// build are compiled without the CUDA headers); written ::cudaStream_t below, since cublaslt.h
// declares a namespace-local alias of its own.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
#endif

namespace murphy {
namespace gpu {

constexpr int kAttnBlock = 128;        // threads per block of every attention kernel
constexpr int kAttnMaxHeadDim = 256;   // the tile sizes below are chosen for head_dim <= 256
constexpr size_t kAttnSharedFloats = 12288;  // 48 KiB: the default dynamic shared memory limit (no opt-in)

// Tests only: a deliberate bug the comparison with the CPU op must catch.
enum class AttnFault : int32_t { None = 0, Causal = 1, Gqa = 2 };

struct AttnShape {
  int64_t tokens = 0, n_heads = 0, n_kv = 0, head_dim = 0;
  float scale = 1.0f;
};

// The varlen tile table and sizes for one packed batch (host memory).
struct AttnPlan {
  AttnShape shape;
  std::vector<int32_t> seq_offsets;  // [n_seqs + 1], 0 .. tokens
  int tile = 0;   // B: rows of a query tile = rows of a key tile (so one table serves both)
  int chunk = 0;  // C: query rows per step of the dK/dV kernel (<= tile)
  // 4 ints per tile: row0, row1 (the tile's token rows [row0, row1), row1 - row0 <= B), seq0,
  // seq1 (its sequence's rows). Tiles start at the sequence start and step by B. These are
  // the query tiles of the forward and dQ kernels and the key tiles of the dK/dV kernel.
  std::vector<int32_t> tiles;
  AttnFault fault = AttnFault::None;  // tests only

  int64_t n_tiles() const { return int64_t(tiles.size() / 4); }
  // f32 workspace of attention_backward_*: D = rowsum(dO * O) per (token, q head).
  size_t workspace_floats() const { return size_t(shape.tokens * shape.n_heads); }
  // Shared memory per block of each kernel (floats); functions of head_dim only.
  size_t forward_shared_floats() const;
  size_t dq_shared_floats() const;
  size_t dkdv_shared_floats() const;
};

// Checks the shape and offsets (one line naming the problem on error) and builds the plan.
AttnPlan attention_plan(const AttnShape& s, const int32_t* seq_offsets, int64_t n_seqs);

// Host harness runs (all pointers host memory). q [T,H,D], k/v [T,G,D], o [T,H,D], lse [T,H] f32.
// `block` threads per block (the GPU uses kAttnBlock; the harness accepts any 1..1024).
template <typename T>
void attention_forward_host(const AttnPlan& p, const T* q, const T* k, const T* v, T* o, float* lse,
                            Order order = Order::Forward, int block = kAttnBlock);
// dq [T,H,D], dk/dv [T,G,D] are overwritten; ws: p.workspace_floats() floats.
template <typename T>
void attention_backward_host(const AttnPlan& p, const T* q, const T* k, const T* v, const T* o, const float* lse,
                             const T* dout, T* dq, T* dk, T* dv, float* ws, Order order = Order::Forward,
                             int block = kAttnBlock);

#ifdef MURPHY_WITH_CUDA
// The same on the device (native/gpu/attention.cu): every pointer is device memory.
// The plan's tile table is uploaded once per packed batch into an int32 device buffer of at
// least attention_plan_ints(p) ints (layout: p.tiles as is).
struct AttnDevicePlan {
  const int32_t* tiles = nullptr;  // device copy of AttnPlan::tiles
  int64_t n_tiles = 0;
};
size_t attention_plan_ints(const AttnPlan& p);
AttnDevicePlan attention_upload_plan(const AttnPlan& p, int32_t* dev_buffer, size_t dev_buffer_ints, ::cudaStream_t s);
template <typename T>
void attention_forward_cuda(const AttnPlan& p, const AttnDevicePlan& d, const T* q, const T* k, const T* v, T* o,
                            float* lse, ::cudaStream_t s);
template <typename T>
void attention_backward_cuda(const AttnPlan& p, const AttnDevicePlan& d, const T* q, const T* k, const T* v,
                             const T* o, const float* lse, const T* dout, T* dq, T* dk, T* dv, float* ws,
                             ::cudaStream_t s);
#endif

}  // namespace gpu
}  // namespace murphy
