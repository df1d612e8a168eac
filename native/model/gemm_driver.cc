// The BLIS driver of the packed CPU matrix products (gemm_driver.h).
//
// Tiles: the output is cut into row blocks (<= MCB rows) x column blocks (<= NCB columns) of even
// sizes, at least one per thread, one task each, handed to the threads one at a time (so the 2D
// tile space is shared by the threads). A
// task walks K in slices of KC over its B block (KC x NCB, NR-column panels, k-major, kept in L2)
// and its rows of A (MR-row strips, k-major), running each strip: the MR x NR micro-kernel across
// the block's panels, the strip's A micro-panel staying in L1 while B streams from L2. Blocks used
// by several tasks are packed once per call into a shared buffer, in pieces, by the tasks that need
// them first (one parallel region, no barrier); the others by their task, just before use. The first K slice writes C (beta 0), adds to it (beta 1) or scales it (other beta);
// later slices add.
#include "gemm_driver.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../cpu/threads.h"
#include "murphy/common.h"
#include "murphy/heap.h"
#include "murphy/model/big_buffer.h"

namespace murphy {
namespace model {
namespace gemm_driver {

// Big buffers. A product whose shared packed operand is past kKeepFloats (64 MiB) gets it from
// a CallBuf. A fresh one each call page-faulted all of it in again: the head's two backward
// products pack a chunk of dlogits (110 x 151,936 at Qwen3's vocabulary: 68 MiB for the input
// gradient, up to 155 MiB of address space for the weight gradient) once per chunk, 1.2 M page
// faults a 4,096-token training step of the Qwen3-0.6B-shaped model, ~14 s of its 36 s on a VM
// where a fault costs 12 us (2026-12-02, perf record -e page-faults). Released buffers now go to
// a process-wide cache (at most kCallBufCacheBytes; not per thread, since the calls come from
// any of the addon's worker threads) that hands out the smallest block that fits, so a training
// loop reuses the same blocks every chunk and step. New blocks are 2 MiB aligned and marked for
// huge pages (murphy/heap.h): one fault per 2 MiB where transparent huge pages are "madvise".
// The sizes are the engine's big buffers' (murphy/model/big_buffer.h): the cache takes blocks of
// kHugeMinBytes and more, placed on kHugePageBytes; smaller CallBufs (the bf16 forward's copy of
// weights with an odd K) come from the heap and go back to it.
namespace {

struct BigCache {
  std::mutex mu;
  std::vector<std::pair<size_t, float*>> blocks;  // (bytes, block), free for the taking
  size_t held = 0;
};
// Never destroyed: a CallBuf may be released on a thread that outlives static destruction.
BigCache& big_cache() {
  static BigCache* c = new BigCache;
  return *c;
}

}  // namespace

CallBuf::CallBuf(size_t n) {
  if (n * 4 + 256 < kHugeMinBytes) {
    const size_t bytes = size_t(round_up(int64_t(n) * 4 + 256, 64));
    p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p) throw Error("matmul: out of memory allocating " + std::to_string(bytes) + " bytes", ErrorCode::NoMem);
    return;  // bytes_ 0: not the cache's
  }
  const size_t want = size_t(round_up(int64_t(n) * 4 + 256, int64_t(kHugePageBytes)));
  {
    BigCache& c = big_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    size_t best = c.blocks.size();
    for (size_t i = 0; i < c.blocks.size(); ++i)
      if (c.blocks[i].first >= want && (best == c.blocks.size() || c.blocks[i].first < c.blocks[best].first)) best = i;
    if (best < c.blocks.size()) {
      bytes_ = c.blocks[best].first;
      p = c.blocks[best].second;
      c.held -= bytes_;
      c.blocks.erase(c.blocks.begin() + std::ptrdiff_t(best));
      return;
    }
  }
  void* q = nullptr;
  if (posix_memalign(&q, kHugePageBytes, want) != 0 || !q)
    throw Error("matmul: out of memory allocating " + std::to_string(want) + " bytes", ErrorCode::NoMem);
  advise_huge_pages(q, want);
  p = static_cast<float*>(q);
  bytes_ = want;
}

// Back to the cache; to make room, the cache's smallest blocks go first, and a block that does
// not fit even then is freed.
CallBuf::~CallBuf() {
  if (!p) return;
  if (bytes_ == 0) {
    std::free(p);
    return;
  }
  std::vector<float*> drop;
  {
    BigCache& c = big_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (bytes_ <= kCallBufCacheBytes) {
      std::sort(c.blocks.begin(), c.blocks.end());
      size_t i = 0;
      while (c.held + bytes_ > kCallBufCacheBytes && i < c.blocks.size()) {
        c.held -= c.blocks[i].first;
        drop.push_back(c.blocks[i++].second);
      }
      c.blocks.erase(c.blocks.begin(), c.blocks.begin() + std::ptrdiff_t(i));
      c.blocks.emplace_back(bytes_, p);
      c.held += bytes_;
    } else {
      drop.push_back(p);
    }
  }
  for (float* q : drop) std::free(q);
}

size_t release_cached_buffers() {
  std::vector<std::pair<size_t, float*>> blocks;
  {
    BigCache& c = big_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    blocks.swap(c.blocks);
    c.held = 0;
  }
  size_t bytes = 0;
  for (const auto& b : blocks) {
    bytes += b.first;
    std::free(b.second);
  }
  return bytes;
}

size_t cached_buffer_bytes() {
  BigCache& c = big_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.held;
}

namespace {

// Per-thread packing space (64-byte aligned, grown on demand, freed at thread exit).
struct Scratch {
  float* p = nullptr;
  size_t cap = 0;
  float* get(size_t n) {
    if (n > cap) {
      std::free(p);
      const size_t bytes = size_t(round_up(int64_t(n) * 4 + 256, 64));
      p = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!p) {
        cap = 0;
        throw Error("matmul: out of memory allocating " + std::to_string(bytes) + " bytes of packing space", ErrorCode::NoMem);
      }
      cap = n;
    }
    return p;
  }
  ~Scratch() { std::free(p); }
};
thread_local Scratch t_apack, t_bpack;

struct Grid {
  int64_t mcb, ncb, tm, tn;
};

// ceil(n / ceil(n / cap)) rounded up to m: blocks of at most ~cap, all about the same size (so
// that 512 rows are 2 x 264, not 384 + 128, whose big block would be the threads' tail).
int64_t even_block(int64_t n, int64_t cap, int64_t m) {
  const int64_t parts = (n + cap - 1) / cap;
  return round_up((n + parts - 1) / parts, m);
}

// Row and column block sizes: blocks of at most MCB x NCB, cut smaller (down to 4 MR x 4 NR)
// until there is a task per thread. (Until 2026-12-02 the cuts went on to ~4 tasks per thread,
// so that a busy machine would still balance; on the Zen 5 VM one task per thread ran the small
// products 1.1-1.4x faster, in medians of 400 calls as in the best: docs/kernels.md, "One task
// per thread".)
Grid plan(Tile t, int64_t M, int64_t N) {
  const int64_t want = int64_t(num_threads());
  Grid g;
  g.mcb = even_block(M, MCB, t.mr);
  g.ncb = even_block(N, NCB, t.nr);
  auto count = [&] {
    g.tm = (M + g.mcb - 1) / g.mcb;
    g.tn = (N + g.ncb - 1) / g.ncb;
    return g.tm * g.tn;
  };
  while (count() < want) {
    if (g.ncb > 4 * t.nr) g.ncb = even_block(N, round_up(g.ncb / 2, t.nr), t.nr);
    else if (g.mcb > 4 * t.mr) g.mcb = even_block(M, round_up(g.mcb / 2, t.mr), t.mr);
    else break;
  }
  count();
  return g;
}

// Operands packed once per call, shared by the tasks, while the copy stays under this many
// floats (256 MiB); beyond it (the LM head's weight) each task packs its own block.
constexpr int64_t kSharedPackFloats = int64_t(64) << 20;

}  // namespace

namespace {

// Pack units: a shared block is packed in pieces (kUnitRows rows of A, kUnitCols columns of B) by
// whichever threads need it first (cooperate()).
constexpr int64_t kUnitRows = 48, kUnitCols = 64;

// A shared block's packing state: the next piece to claim, and the pieces done.
struct PackState {
  std::atomic<int64_t> next{0}, done{0};
};

// Packs a shared block cooperatively: claims and packs pieces until none is left, then waits for
// the pieces other threads claimed (each is being packed, never waiting itself: no deadlock).
// The release increments of `done` and the acquire load that sees them all publish the packed data.
template <class F>
void cooperate(PackState& st, int64_t units, const F& unit) {
  if (st.done.load(std::memory_order_acquire) == units) return;
  for (;;) {
    const int64_t u = st.next.fetch_add(1, std::memory_order_relaxed);
    if (u >= units) break;
    unit(u);
    st.done.fetch_add(1, std::memory_order_release);
  }
  for (int spins = 0; st.done.load(std::memory_order_acquire) < units; ++spins) {
    if (spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();  // the packer was descheduled: let it run
    }
  }
}

// Shared pack buffers of the calling thread, and KeptBuf's two slots: kept between calls up to
// kKeepFloats floats (64 MiB each; bigger ones are CallBufs, from the process's cache above), so
// a product does not page-fault fresh memory in.
thread_local Scratch t_shared_a, t_shared_b;
thread_local Scratch t_kept[2];

// n floats from the thread's kept buffer s, or past kKeepFloats from a CallBuf (big).
float* kept_or_call(Scratch& s, size_t n, std::unique_ptr<CallBuf>& big) {
  if (n <= kKeepFloats) return s.get(n);
  big = std::make_unique<CallBuf>(n);
  return big->p;
}

}  // namespace

KeptBuf::KeptBuf(int slot, size_t n) : p(kept_or_call(t_kept[slot & 1], n, big_)) {}

// One parallel region per product. A row block of A is used by the tn tasks of its row, a B block
// by the tm tasks of its column: when several tasks share one (and the copy is not too big), it
// is packed once into a buffer of the call, [block][k slice], in pieces by the tasks that need it
// (pack traffic (M + N) K instead of (tn M + tm N) K; no barrier between packing and computing,
// and no second wake-up of the pool); a block only one task uses is packed by its task into its
// thread's scratch just before use.
void drive(Tile t, int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, PackA pack_a,
           const PackB& pack_b, Strip strip, float* C, int64_t ldc, float beta) {
  const int64_t MR = t.mr, NR = t.nr;
  const Grid g = plan(t, M, N);
  const int base_mode = beta == 0.0f ? 0 : (beta == 1.0f ? 1 : 2);
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const int64_t ns = (K + KC - 1) / KC;
  const int64_t asz = round_up(g.mcb, MR) * KC + 16, bsz = KC * round_up(g.ncb, NR);
  const bool share_a = g.tn > 1 && flops >= kSerialFlops && g.tm * ns * asz <= kSharedPackFloats;
  const bool share_b = g.tm > 1 && flops >= kSerialFlops && g.tn * ns * bsz <= kSharedPackFloats;
  // rows [r0, r1) of row block rb (whole MR strips from the block's start) at k slice s
  // Block boundaries: the tm row blocks split the ceil(M / MR) strips as evenly as whole strips
  // allow (and the tn column blocks the panels), so that no block is a sliver: 512 rows in blocks
  // of at most 72 were 7 x 72 + 8 (one thread's share 288 rows, the other's 224), now 60 or 72.
  const int64_t sm = (M + MR - 1) / MR, sn = (N + NR - 1) / NR;
  auto row0 = [&](int64_t rb) { return imin(M, rb * sm / g.tm * MR); };
  auto col0 = [&](int64_t cb) { return imin(N, cb * sn / g.tn * NR); };
  auto a_rows = [&](int64_t rb, int64_t s, int64_t r0, int64_t r1, float* blk) {
    const int64_t i0 = row0(rb), k0 = s * KC, kc = imin(KC, K - k0);
    pack_a(A, a_rs, a_cs, i0 + r0, imin(row0(rb + 1), i0 + r1) - (i0 + r0), k0, kc, blk + r0 * kc);
  };
  // columns [c0, c1) of column block cb (whole NR panels from the block's start) at k slice s
  auto b_cols = [&](int64_t cb, int64_t s, int64_t c0, int64_t c1, float* blk) {
    const int64_t j0 = col0(cb), k0 = s * KC, kc = imin(KC, K - k0);
    pack_b(k0, kc, j0 + c0, imin(col0(cb + 1), j0 + c1) - (j0 + c0), blk + c0 * kc);
  };
  const int64_t unit_rows = MR * (kUnitRows / MR > 0 ? kUnitRows / MR : 1);
  const int64_t unit_cols = NR * (kUnitCols / NR > 0 ? kUnitCols / NR : 1);
  const size_t a_floats = share_a ? size_t(g.tm * ns * asz) : 0, b_floats = share_b ? size_t(g.tn * ns * bsz) : 0;
  std::unique_ptr<CallBuf> a_big, b_big;
  float* apk = nullptr;
  float* bpk = nullptr;
  if (share_a) apk = kept_or_call(t_shared_a, a_floats, a_big);
  if (share_b) bpk = kept_or_call(t_shared_b, b_floats, b_big);
  std::unique_ptr<PackState[]> ast(share_a ? new PackState[size_t(g.tm * ns)] : nullptr);
  std::unique_ptr<PackState[]> bst(share_b ? new PackState[size_t(g.tn * ns)] : nullptr);
  // The tasks are handed out one at a time from a counter, in order (row block major), to one
  // chunk per thread: parallel_for's chunks (at most 4 per thread) would group them unevenly
  // when there are not a multiple of 8 (12 tasks as chunks of 1, 2, 1, 2, ...: the last chunk of
  // 2 ran alone, 7 task-times instead of 6 on 2 threads).
  const int64_t tasks = g.tm * g.tn;
  std::atomic<int64_t> next_task{0};
  const int64_t runners = flops < kSerialFlops ? 1 : imin(tasks, int64_t(num_threads()));
  parallel_for(runners, 1, [&](int64_t, int64_t) {
    float* bbuf = share_b ? nullptr : t_bpack.get(size_t(bsz));
    float* abuf = share_a ? nullptr : t_apack.get(size_t(asz));
    for (int64_t task; (task = next_task.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
      const int64_t rb = task / g.tn, cb = task % g.tn;
      const int64_t i0 = row0(rb), i1 = row0(rb + 1);
      const int64_t j0 = col0(cb), nc = col0(cb + 1) - j0;
      for (int64_t s = 0; s < ns; ++s) {
        const int64_t kc = imin(KC, K - s * KC);
        const float* bp;
        if (share_b) {
          float* blk = bpk + (cb * ns + s) * bsz;
          cooperate(bst[size_t(cb * ns + s)], (nc + unit_cols - 1) / unit_cols,
                    [&](int64_t u) { b_cols(cb, s, u * unit_cols, imin(nc, (u + 1) * unit_cols), blk); });
          bp = blk;
        } else {
          b_cols(cb, s, 0, nc, bbuf);
          bp = bbuf;
        }
        const float* ap;
        if (share_a) {
          float* blk = apk + (rb * ns + s) * asz;
          cooperate(ast[size_t(rb * ns + s)], (i1 - i0 + unit_rows - 1) / unit_rows,
                    [&](int64_t u) { a_rows(rb, s, u * unit_rows, imin(i1 - i0, (u + 1) * unit_rows), blk); });
          ap = blk;
        } else {
          a_rows(rb, s, 0, i1 - i0, abuf);
          ap = abuf;
        }
        const int mode = s == 0 ? base_mode : 1;
        for (int64_t i = i0; i < i1; i += MR)
          strip(kc, ap + (i - i0) * kc, bp, nc, C + i * ldc + j0, ldc, int(imin(MR, i1 - i)), mode, beta);
      }
    }
  });
}

}  // namespace gemm_driver
}  // namespace model
}  // namespace murphy
