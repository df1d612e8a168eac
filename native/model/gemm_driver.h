// The BLIS driver shared by the packed CPU matrix products (gemm_avx512.cc: 12 x 32 tiles,
// gemm_avx2.cc: 6 x 16 tiles): the task grid over the output, operand packing shared between
// threads, the K slices. The micro-kernels and packers are the caller's (compiled for its
// target); this file is baseline code. See docs/kernels.md, "CPU GEMM".
//
//   C[M,N] (+)= A[M,K] B[K,N] over K "units" (f32 values or bf16 pairs as 32-bit values).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "../cpu/threads.h"

namespace murphy {
namespace model {
namespace gemm_driver {

constexpr int64_t KC = 256;   // k units per slice
constexpr int64_t NCB = 512;  // columns per task at most (B block KC x NCB x 4 bytes = 512 KiB: L2)
constexpr int64_t MCB = 384;  // rows per task at most

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

// Products below this many flops run on the calling thread: waking the pool costs more (~10 us)
// than the product itself.
constexpr double kSerialFlops = 2e6;
// parallel_for's grain for n items of a product of `flops`: everything in one chunk when small.
inline int64_t grain_for(int64_t n, double flops, int64_t grain) { return flops < kSerialFlops ? (n > 0 ? n : 1) : grain; }

// Skinny (decode) products below this many flops run on the calling thread: ~2 us of one core,
// about what a job handed to the pool costs when its workers are spinning (native/cpu/threads.cc:
// they spin ~100 us after each job, so back-to-back decode products find them awake; a sleeping
// worker costs the caller only the wake-up call, the caller doing the chunks it does not take).
// Bigger ones (the small model's single-row 256 x 768, 0.4 MFLOP) split the weight rows.
constexpr double kSkinnySerialFlops = 2e5;
// Runs fn(j0, j1) over the weight rows [0, N) of a skinny product Y[M, N] = X[M, K] W[N, K]^T,
// in blocks of `unit` rows (a multiple of the kernels' weight-row blocks: 4, or 12 where blocks
// of 3 rows are used too, so that no chunk leaves rows to a narrower block), at least ~32 rows a
// chunk, split between the threads with a home thread per part (parallel_for_affine): a decode
// step's product reads its weight once, and giving each core the same rows every call keeps
// them in that core's caches.
template <class F>
void split_weight_rows(int64_t M, int64_t N, int64_t K, const F& fn, int64_t unit = 4) {
  const int64_t blocks = (N + unit - 1) / unit;
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const int64_t grain = 32 / unit > 1 ? 32 / unit : 1;
  parallel_for_affine(blocks, flops < kSkinnySerialFlops ? blocks : grain,
                      [&](int64_t b0, int64_t b1) { fn(b0 * unit, imin(N, b1 * unit)); });
}

// Prefetching a skinny product's weight rows. A decode product reads each weight row once per
// call, a block of JB rows at a time, each k step taking one vector of every row of the block:
// JB short interleaved streams (a row of Qwen3's LM head is 2 KiB in bf16), which the hardware
// prefetchers barely follow. From memory (4 x 1,024 x 151,936, bf16 weights on 2 MiB pages, one
// core) the AVX-512 path read 11-12 GB/s of weights where a read-only stream reads ~31. So each
// k step also prefetches its share of the block `ahead` rows on, front to back: a block's rows
// are contiguous, so the prefetches walk one stream, one block's worth per block. Measured on the
// Zen 4 VM (2026-12-02, A/B of two builds in one process, interleaved, best of 8 rounds; the
// figures swing 10-30% between runs there): into L1 (prefetcht0), one core read 19-21 GB/s of
// bf16 weights, two 28-42 (17-20 without); 1 block of 8 KiB ahead was better than 2 or 3, and
// each row's own next line instead gave 12.5-13. But fp32 rows (4 KiB: a whole page, which the
// hardware follows better) went 0.80-0.93x with prefetcht0, while into L2 (prefetcht1/t2) gave
// 1.15-1.2x; bf16 was as fast or faster into L2 (8 rows: 225-260 GFLOP/s against 148). So the
// prefetch goes to L2. Weights under kSkinnyPrefetchMinBytes stay in the caches between calls
// and get none.
constexpr int64_t kSkinnyPrefetchMinBytes = int64_t(4) << 20;
constexpr int64_t kSkinnyAheadBytes = int64_t(8) << 10;  // at least this far ahead (whole blocks)

// The first byte of the block of `jb` rows `ahead` rows after row j, for a block whose k steps
// read kStepBytes bytes of it each, where that block is prefetched (weights of N rows of
// `row_bytes` at W, at least kSkinnyPrefetchMinBytes, and steps of 32 bytes or more), or nullptr
// (too small, steps too short, or the block ahead would end past row N).
template <int kStepBytes>
inline const char* skinny_prefetch_base(const void* W, int64_t row_bytes, int64_t N, int64_t j, int64_t jb) {
  if (kStepBytes < 32 || N * row_bytes < kSkinnyPrefetchMinBytes) return nullptr;
  const int64_t block = jb * row_bytes;
  const int64_t ahead = jb * ((kSkinnyAheadBytes + block - 1) / block);
  if (j + ahead + jb > N) return nullptr;
  return static_cast<const char*>(W) + (j + ahead) * row_bytes;
}

// k step `s` of a block whose steps read kStepBytes bytes of it each: those bytes of the block
// ahead (pf from skinny_prefetch_base<kStepBytes>; nothing when null), one prefetch per 64 bytes
// from the step's first byte: every line of the block is covered when kStepBytes is not a whole
// number of lines (steps of 48 bytes, the AVX2 path's 3 bf16 rows: one prefetch per step, 48
// bytes apart). Steps under 32 bytes (which would prefetch each line more than twice) get none.
template <int kStepBytes>
inline __attribute__((always_inline)) void skinny_prefetch_step(const char* pf, int64_t s) {
  if constexpr (kStepBytes >= 32) {
    if (!pf) return;
    for (int i = 0; i < kStepBytes; i += 64) __builtin_prefetch(pf + s * kStepBytes + i, 0, 2);  // prefetcht1: to L2
  }
}

// The micro-tile: MR rows x NR columns of C per micro-kernel call.
struct Tile {
  int mr, nr;
};

// Packs the MR-row strips of rows [i0, i0 + rows) x k units [k0, k0 + kc) of A: strip s at
// dst + s MR kc, k-major (MR values per k), zero past `rows`.
using PackA = void (*)(const float* A, int64_t a_rs, int64_t a_cs, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                       float* dst);
// Runs one MR-row strip (mr valid rows) across a column block: the micro-kernel on each NR-column
// panel of bp (panel p at bp + p NR kc). mode 0: C =, 1: C +=, 2: C = beta C +.
using Strip = void (*)(int64_t kc, const float* ap, const float* bp, int64_t ncols, float* c, int64_t ldc, int mr,
                       int mode, float beta);
// Packs the B block of a task: k units [k0, k0 + kc) x columns [j0, j0 + ncols) into NR-column
// panels (panel p at dst + p NR kc, k-major, zero past ncols).
using PackB = std::function<void(int64_t k0, int64_t kc, int64_t j0, int64_t ncols, float* dst)>;

// A 64-byte aligned buffer of at least n floats for one call (throws NoMem). From 8 MiB on it is
// 2 MiB aligned, marked for huge pages and taken from the process's cache of released buffers
// (gemm_driver.cc, "Big buffers"); the products use it past kKeepFloats, where a thread's kept
// buffers stop.
struct CallBuf {
  float* p = nullptr;
  explicit CallBuf(size_t n);
  ~CallBuf();
  CallBuf(const CallBuf&) = delete;
  CallBuf& operator=(const CallBuf&) = delete;

 private:
  size_t bytes_ = 0;
};

// Bytes of released CallBufs the cache keeps for the next calls at most (512 MiB).
constexpr size_t kCallBufCacheBytes = size_t(512) << 20;

// The cache's blocks, freed (Engine::generate's release_heap calls it before giving free heap
// back); returns the bytes freed.
size_t release_cached_buffers();
// Bytes the cache holds now.
size_t cached_buffer_bytes();

// Floats a KeptBuf keeps between calls at most (64 MiB).
constexpr size_t kKeepFloats = size_t(16) << 20;

// A 64-byte aligned buffer of at least n floats for one call on the calling thread, kept by that
// thread between calls (slot 0 or 1: two buffers of one call), so that a product does not
// page-fault fresh memory in every call (~11 us per 4 KiB page on first touch on this VM); past
// kKeepFloats it is a CallBuf, from the process's cache of big buffers and back to it with this
// object. A thread's slot holds one
// live buffer at a time (a slot's user must not call anything that takes the same slot).
class KeptBuf {
 private:
  std::unique_ptr<CallBuf> big_;  // (declared first: the constructor fills it before p)

 public:
  KeptBuf(int slot, size_t n);
  float* p = nullptr;
};

// C[M, N] (+)= A B: the task grid, packing, strips (docs/kernels.md, "CPU GEMM").
void drive(Tile t, int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, PackA pack_a,
           const PackB& pack_b, Strip strip, float* C, int64_t ldc, float beta);

}  // namespace gemm_driver
}  // namespace model
}  // namespace murphy
