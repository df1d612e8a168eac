// The bf16-weight forward product on Intel AMX (AMX-TILE + AMX-BF16: Xeon Sapphire Rapids and
// later), where the CPU and the OS allow it (matmul.cc: the path amx-bf16).
//
//   Y[M,N] (+)= bf16(X)[M,K] Wb[N,K]^T, products exact, sums in fp32
//
// One tdpbf16ps does C[16 x 16 fp32] += A[16 x 32 bf16] B[32 x 16 bf16] as 16 steps of bf16 pairs
// along k: c[i][j] += a[i][2p] b[2p][j] + a[i][2p+1] b[2p+1][j], the pairs' products summed as
// vdpbf16ps sums them (denormal inputs read as zero, results rounded to nearest even with
// denormals flushed; Intel SDM, TDPBF16PS). The operands are gemm_avx512.cc's bf16 pairs: X
// rounded to bf16 (nearest even) and paired along k, W [N, K] bf16 whose row j is already the
// pairs (W[j, 2p], W[j, 2p + 1]) as 32-bit values. An A tile is 16 rows of pairs (64 bytes = 16
// pairs of each row, at the rows' own stride); a B tile is 16 pair rows of 16 columns, which is a
// column panel of gemm_pack.inc (dst[p NR + j], NR = 32 columns: 128 bytes a pair row) read with
// a 128-byte stride at columns 0 and 16. The work is 2 x 2 tiles of C (tiles 0-3) from two A
// tiles (4, 5) and two B tiles (6, 7), over all of K in steps of 32 bf16 from k = 0, so each
// output's sum runs in the same order whatever M and the row's place (kSkinnyRows' promise, gemm.h).
//
// Products of more than kSkinnyRows rows (training's forward, prefill, the LM head): X is paired
// once per call into Xp [Mp, KT] (rows to a multiple of 32 and pairs to a multiple of 16, both
// zero-filled, so every tile is whole) and is the A operand; the output is cut into 32-column
// panels of W times chunks of 32-row blocks; a thread packs a panel (its pair rows past K zero)
// into a buffer it keeps, then runs each 32-row block of its chunk across it. The tiles go to a
// 32 x 32 buffer, then to Y (=, or += for accumulate), valid rows and columns only. Where Xp
// passes kSharedPackMinX, W is packed whole first (up to kSharedPackBytes) and a task is a chunk
// of kChunkRows rows times a group of kGroupPanels panels, so that the chunk stays in L2 while
// the panels pass. Odd K (no model has one) takes gemm_avx512's widening path.
// Skinny products (decoding: kSkinnyMinRows <= M <= kSkinnyRows, K a multiple of 32) turn it
// around: W is the A operand, read in place (16 weight rows a tile, no packing), and X's pairs
// transposed into one panel (Xt [K / 2, 32], zero past M) are B, so C holds blocks of Y^T (32
// weight rows x 32 rows of X), stored transposed; each weight row is read once per call, and
// with M <= 16 only the B tile of columns 0-15 runs. Fewer rows, or another K, take vdpbf16ps.
// AMX needs the kernel's leave for the tile data state (Linux 5.16+, arch_prctl
// ARCH_REQ_XCOMP_PERM), asked once per process by cpu_has_amx_bf16 (native/cpu/simd.cc); each
// task loads the tile configuration and releases the tiles when it ends.
#include "gemm.h"
#include "gemm_driver.h"

#include <cstdint>
#include <cstring>

#include "../cpu/threads.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define MURPHY_HAVE_AMX_GEMM 1
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // (GCC 12's AVX-512 intrinsics: see gemm_avx512.cc)
#endif

namespace murphy {
namespace model {
namespace gemm_amx {

#ifdef MURPHY_HAVE_AMX_GEMM
namespace {

constexpr int64_t kRows = 32;       // rows of a block: two A tiles
constexpr int64_t kCols = 32;       // columns of a panel: two B tiles (gemm_pack.inc's NR)
constexpr int64_t kStep = 16;       // pairs per tile step (32 bf16 = 64 bytes)
constexpr int64_t kChunkRows = 256; // rows of a task at most (256 x 1,024 pairs of Xp: 1 MiB, L2)
constexpr int64_t kGroupPanels = 8;  // panels of a task when W is packed whole (512 KiB at K = 1,024)
constexpr size_t kSharedPackBytes = size_t(64) << 20;  // W packed whole up to this size,
constexpr size_t kSharedPackMinX = size_t(2) << 20;    // where paired X passes this (an L2 here)
// Skinny products of fewer rows stay on vdpbf16ps (widening measured 0.83-1.15x of it there): a
// tile's 16 columns of X are mostly zeros then, and AMX measured 0.32-0.75x of vdpbf16ps at
// M = 1-2, 0.61-0.99x at 4, 0.94-1.49x at 6, 1.08-1.64x at 8 and 1.9-2.9x at 16 (decode shapes
// of the small model and Qwen3-0.6B, 2026-12-07, Xeon with AMX, 2 threads; docs/kernels.md,
// "bf16 on AMX").
constexpr int64_t kSkinnyMinRows = 6;
using gemm_driver::imin;
using gemm_driver::round_up;

// The tile configuration of palette 1 (Intel SDM, LDTILECFG): 8 tiles of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4,avx512bf16,amx-tile,amx-bf16")
namespace amx {
namespace {

void load_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  _tile_loadconfig(&c);
}

// cb[32 x 32] = A rows [0, 32) (pairs at xa, stride ldx pairs) . panel bp over pairs [0, KT);
// with NB = 1 only the panel's columns 0-15 (cb's columns 16-31 are left as they are). pf: the
// next block's rows (same stride), one line of each of its 32 rows asked into L2 per step, or null.
template <int NB>
void block(const uint32_t* xa, int64_t ldx, const uint32_t* bp, int64_t KT, float* cb, const uint32_t* pf = nullptr) {
  const int64_t xs = ldx * 4;  // bytes per row of A
  _tile_zero(0);
  _tile_zero(2);
  if (NB == 2) {
    _tile_zero(1);
    _tile_zero(3);
  }
  for (int64_t p = 0; p < KT; p += kStep) {
    if (pf)
      for (int r = 0; r < kRows; ++r) __builtin_prefetch(pf + r * ldx + p, 0, 2);
    _tile_loadd(4, xa + p, xs);
    _tile_loadd(5, xa + 16 * ldx + p, xs);
    _tile_loadd(6, bp + p * kCols, kCols * 4);
    if (NB == 2) _tile_loadd(7, bp + p * kCols + 16, kCols * 4);
    _tile_dpbf16ps(0, 4, 6);
    if (NB == 2) _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    if (NB == 2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, cb, kCols * 4);
  _tile_stored(2, cb + 16 * kCols, kCols * 4);
  if (NB == 2) {
    _tile_stored(1, cb + 16, kCols * 4);
    _tile_stored(3, cb + 16 * kCols + 16, kCols * 4);
  }
}

// Y[r, j] (=, +=) cb[r, j] for r < rows, j < cols (cols <= 32).
void store(const float* cb, float* Y, int64_t ldy, int64_t rows, int64_t cols, bool acc) {
  const __mmask16 m0 = __mmask16(cols >= 16 ? 0xffff : (1u << cols) - 1u);
  const __mmask16 m1 = __mmask16(cols >= 32 ? 0xffff : cols > 16 ? (1u << (cols - 16)) - 1u : 0u);
  for (int64_t r = 0; r < rows; ++r) {
    __m512 c0 = _mm512_loadu_ps(cb + r * kCols), c1 = _mm512_loadu_ps(cb + r * kCols + 16);
    float* y = Y + r * ldy;
    if (acc) {
      c0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, y), c0);
      c1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, y + 16), c1);
    }
    _mm512_mask_storeu_ps(y, m0, c0);
    _mm512_mask_storeu_ps(y + 16, m1, c1);
  }
}

// Runs rows [r0, r1) of Xp (r0 a multiple of 32) across one packed panel (columns [j0, j0 + nc)).
void panel_rows(const uint32_t* Xp, int64_t ldx, const uint32_t* bp, int64_t KT, float* Y, int64_t N, int64_t j0,
                int64_t nc, int64_t r0, int64_t r1, bool acc, float* cb) {
  for (int64_t r = r0; r < r1; r += kRows) {
    block<2>(Xp + r * ldx, ldx, bp, KT, cb);
    store(cb, Y + r * N + j0, N, imin(kRows, r1 - r), nc, acc);
  }
}

// Packs panel p of W (columns [32 p, 32 p + 32)) into bp: pairs [0, K / 2), zero up to KT.
void pack_panel(const uint16_t* Wb, int64_t N, int64_t K, int64_t KT, int64_t p, uint32_t* bp) {
  const int64_t Kp = K / 2, j0 = p * kCols;
  gemm_avx512::pack_pair_panel(reinterpret_cast<const uint32_t*>(Wb), Kp, Kp, j0, imin(kCols, N - j0), bp);
  std::memset(bp + Kp * kCols, 0, size_t((KT - Kp) * kCols) * 4);
}

// Tasks [t0, t1) of the grid (panel-major: task t is panel t / chunks, row chunk t % chunks).
void run_tasks(int64_t t0, int64_t t1, int64_t chunks, int64_t chunk_rows, const uint32_t* Xp, int64_t ldx,
               const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, int64_t KT, bool acc) {
  uint32_t* bp = reinterpret_cast<uint32_t*>(gemm_driver::KeptBuf(1, size_t(KT * kCols)).p);
  alignas(64) float cb[kRows * kCols];
  load_config();
  int64_t packed = -1;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t panel = t / chunks, j0 = panel * kCols;
    if (panel != packed) pack_panel(Wb, N, K, KT, panel, bp), packed = panel;
    const int64_t r0 = (t % chunks) * chunk_rows;
    panel_rows(Xp, ldx, bp, KT, Y, N, j0, imin(kCols, N - j0), r0, imin(M, r0 + chunk_rows), acc, cb);
  }
  _tile_release();
}

// Tasks [t0, t1) over W packed whole (panel p at Wp + p KT 32): task t is row chunk t / groups
// (kChunkRows rows) times panel group t % groups (kGroupPanels panels), so that consecutive tasks
// of a thread keep the chunk's rows of Xp in L2 while the group's panels pass.
void run_shared(int64_t t0, int64_t t1, int64_t groups, const uint32_t* Xp, int64_t ldx, const uint32_t* Wp, float* Y,
                int64_t M, int64_t N, int64_t KT, bool acc) {
  alignas(64) float cb[kRows * kCols];
  load_config();
  const int64_t panels = (N + kCols - 1) / kCols;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t r0 = (t / groups) * kChunkRows, r1 = imin(M, r0 + kChunkRows);
    const int64_t p0 = (t % groups) * kGroupPanels, p1 = imin(panels, p0 + kGroupPanels);
    for (int64_t p = p0; p < p1; ++p)
      panel_rows(Xp, ldx, Wp + p * KT * kCols, KT, Y, N, p * kCols, imin(kCols, N - p * kCols), r0, r1, acc, cb);
  }
  _tile_release();
}

// Weight rows [j0, j1) of a skinny product (j0 a multiple of 32): blocks of 32 weight rows read
// in place as A tiles (the last block's rows past N from a zero-padded copy) times Xt; NB = 1
// for M <= 16. Weights of kSkinnyPrefetchMinBytes and more (not kept in the caches between
// calls) have the next block's rows prefetched into L2 while a block runs.
template <int NB>
void skinny_rows(const uint32_t* Xt, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, int64_t j0,
                 int64_t j1, bool acc) {
  const int64_t Kp = K / 2;
  const bool prefetch = N * K * 2 >= gemm_driver::kSkinnyPrefetchMinBytes;
  alignas(64) float cb[kRows * kCols];
  load_config();
  for (int64_t j = j0; j < j1; j += kRows) {
    const int64_t nj = imin(kRows, N - j);
    const uint32_t* wa = reinterpret_cast<const uint32_t*>(Wb + j * K);
    if (nj < kRows) {  // (a tile reads 32 whole rows)
      uint16_t* pad = reinterpret_cast<uint16_t*>(gemm_driver::KeptBuf(1, size_t(kRows * Kp)).p);
      std::memcpy(pad, Wb + j * K, size_t(nj * K) * 2);
      std::memset(pad + nj * K, 0, size_t((kRows - nj) * K) * 2);
      block<NB>(reinterpret_cast<const uint32_t*>(pad), Kp, Xt, Kp, cb);
    } else {
      block<NB>(wa, Kp, Xt, Kp, cb, prefetch && j + 2 * kRows <= N ? wa + kRows * Kp : nullptr);
    }
    // cb[jj][m] = Y[m][j + jj]
    for (int64_t m = 0; m < M; ++m) {
      float* y = Y + m * N + j;
      for (int64_t jj = 0; jj < nj; ++jj) y[jj] = acc ? y[jj] + cb[jj * kCols + m] : cb[jj * kCols + m];
    }
  }
  _tile_release();
}

}  // namespace
}  // namespace amx
#pragma GCC pop_options

namespace {

// Y (+)= bf16(X) Wb^T for M <= kSkinnyRows and K a multiple of 32 (see the top of the file).
void linear_skinny_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K, bool acc) {
  const int64_t Kp = K / 2;
  // X's pairs [M, Kp], then transposed into the panel Xt [Kp, 32] (zero past M): one buffer.
  gemm_driver::KeptBuf buf(0, size_t(M * Kp + Kp * kCols));
  uint32_t* Xp = reinterpret_cast<uint32_t*>(buf.p);
  uint32_t* Xt = Xp + M * Kp;
  gemm_avx512::pair_rows_bf16(X, K, 0, M, Xp, Kp);
  gemm_avx512::pack_pair_panel(Xp, Kp, Kp, 0, M, Xt);
  gemm_driver::split_weight_rows(M, N, K, [&](int64_t j0, int64_t j1) {
    if (M <= 16) amx::skinny_rows<1>(Xt, Wb, Y, M, N, K, j0, j1, acc);
    else amx::skinny_rows<2>(Xt, Wb, Y, M, N, K, j0, j1, acc);
  }, kRows);
}

}  // namespace

void linear_forward_bf16(const float* X, const uint16_t* Wb, float* Y, int64_t M, int64_t N, int64_t K,
                         bool accumulate) {
  if (M <= kSkinnyRows) {
    if (M >= kSkinnyMinRows && K % 32 == 0) return linear_skinny_bf16(X, Wb, Y, M, N, K, accumulate);
    return gemm_avx512::linear_forward_bf16(X, Wb, Y, M, N, K, accumulate, true);
  }
  // (odd K: packed bf16 widened to fp32, 1.5x vdpbf16ps's speed on the CPUs that have AMX)
  if (K % 2 != 0) return gemm_avx512::linear_forward_bf16(X, Wb, Y, M, N, K, accumulate, false);
  const int64_t Kp = K / 2, KT = round_up(Kp, kStep), ldx = KT, Mp = round_up(M, kRows);
  gemm_driver::KeptBuf xbuf(0, size_t(Mp * ldx));
  uint32_t* Xp = reinterpret_cast<uint32_t*>(xbuf.p);
  const double flops = 2.0 * double(M) * double(N) * double(K);
  parallel_for(Mp, gemm_driver::grain_for(Mp, flops, 16), [&](int64_t r0, int64_t r1) {
    const int64_t m1 = imin(r1, M);
    if (m1 > r0) gemm_avx512::pair_rows_bf16(X, K, r0, m1, Xp, ldx);
    for (int64_t r = r0 > M ? r0 : M; r < r1; ++r) std::memset(Xp + r * ldx, 0, size_t(ldx) * 4);
  });
  const int64_t panels = (N + kCols - 1) / kCols;
  const size_t packed_floats = size_t(panels * KT * kCols);
  if (size_t(Mp * ldx) * 4 > kSharedPackMinX && packed_floats * 4 <= kSharedPackBytes) {
    // X past L2: W packed once (in parallel), then row chunks x panel groups, so that Xp is not
    // read again from L3 for every panel. Alternated runs of both (2 threads): 4,096 x 1,024 x
    // 3,072 915-932 GFLOP/s before, 1,358-1,365 so; 4,096 x 3,072 x 1,024 1,104-1,182 and
    // 1,265-1,466; 4,096 x 1,024 x 1,024 933-939 and 1,370-1,413; but 1,024 x 1,024 x 3,072
    // (Xp 2 MiB) 1,369-1,379 and 1,335-1,338, hence the threshold.
    gemm_driver::CallBuf wbuf(packed_floats);
    uint32_t* Wp = reinterpret_cast<uint32_t*>(wbuf.p);
    parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) amx::pack_panel(Wb, N, K, KT, p, Wp + p * KT * kCols);
    });
    const int64_t groups = (panels + kGroupPanels - 1) / kGroupPanels, chunks = (Mp + kChunkRows - 1) / kChunkRows;
    parallel_for(chunks * groups, 1, [&](int64_t t0, int64_t t1) {
      amx::run_shared(t0, t1, groups, Xp, ldx, Wp, Y, M, N, KT, accumulate);
    });
    return;
  }
  // Panels, and row chunks where the panels alone would leave a thread idle.
  int64_t chunk_rows = Mp;
  if (panels < 4 * num_threads()) {
    const int64_t want = (4 * num_threads() + panels - 1) / panels;
    chunk_rows = round_up((Mp + want - 1) / want, kRows);
    if (chunk_rows > kChunkRows) chunk_rows = kChunkRows;
  }
  const int64_t chunks = (Mp + chunk_rows - 1) / chunk_rows;
  parallel_for(panels * chunks, gemm_driver::grain_for(panels * chunks, flops, 1), [&](int64_t t0, int64_t t1) {
    amx::run_tasks(t0, t1, chunks, chunk_rows, Xp, ldx, Wb, Y, M, N, K, KT, accumulate);
  });
}

#else  // no AMX build: never called (matmul.cc checks the CPU first)
void linear_forward_bf16(const float*, const uint16_t*, float*, int64_t, int64_t, int64_t, bool) {
  throw Error("matmul: AMX path not compiled in");
}
#endif

}  // namespace gemm_amx
}  // namespace model
}  // namespace murphy
