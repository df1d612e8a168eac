// Checks the matrix products' cache of big buffers (native/model/gemm_driver.cc, "Big buffers"):
// compiled by test/model/gemm.test.ts with the system C++ compiler, with gemm_driver.cc,
// threads.cc and heap.cc. Prints "ok <checks>" and exits 0, or prints what failed and exits 1.
//
// What a CallBuf must do: give at least n floats; under 8 MiB from the heap, 64-byte aligned and
// never cached; from 8 MiB on 2 MiB aligned, never a block another live CallBuf holds; on release
// go to the cache (at most kCallBufCacheBytes, the smallest blocks evicted first, a block over
// the limit freed); hand out the smallest cached block that fits; release_cached_buffers()
// empties the cache. And from several threads at once: every block filled with its owner's
// pattern still holds it when the owner reads it back.
//
// The blocks are 2 MiB aligned and a whole number of 2 MiB units long, so two blocks that overlap
// share a whole unit: one mark at the start of each unit (and one on the last float) finds any
// overlap. The process asks the kernel for no transparent huge pages (PR_SET_THP_DISABLE), so a
// mark faults in one 4 KiB page, not a zeroed 2 MiB one: with them, the ~80 blocks of 65-105 MiB
// of the threaded part took ~1.1 s of system time a run (2026-12-07) and now take a few ms. What is
// checked does not depend on the page size (the CallBuf's madvise still runs and succeeds).
#include <sys/prctl.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gemm_driver.h"

using murphy::model::gemm_driver::cached_buffer_bytes;
using murphy::model::gemm_driver::CallBuf;
using murphy::model::gemm_driver::kCallBufCacheBytes;
using murphy::model::gemm_driver::release_cached_buffers;

namespace {

int failures = 0, checks = 0;
void expect(bool ok, const char* what, long long a = 0, long long b = 0) {
  ++checks;
  if (!ok) {
    ++failures;
    std::printf("FAIL %s (%lld, %lld)\n", what, a, b);
  }
}

constexpr size_t kMiB = size_t(1) << 20;
size_t floats(size_t mib) { return mib * kMiB / 4; }
// a mark per 2 MiB unit (see the top)
constexpr size_t kUnitFloats = 2 * kMiB / 4;
// the bytes a CallBuf of n floats takes: n * 4 + 256, rounded up to 2 MiB
size_t block_bytes(size_t n) { return (n * 4 + 256 + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB); }

}  // namespace

int main(int argc, char** argv) {
  const unsigned seed = argc > 1 ? unsigned(std::strtoul(argv[1], nullptr, 10)) : 1u;
  std::srand(seed);
  if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) std::printf("note: PR_SET_THP_DISABLE refused; huge pages stay on\n");
  release_cached_buffers();
  expect(cached_buffer_bytes() == 0, "an empty cache at the start");

  // 0. a small buffer (under 8 MiB) is the heap's: 64-byte aligned, never cached
  {
    CallBuf s(floats(1));
    expect(s.p && reinterpret_cast<uintptr_t>(s.p) % 64 == 0, "a small buffer is 64-byte aligned");
    s.p[floats(1) - 1] = 1.0f;
  }
  expect(cached_buffer_bytes() == 0, "a small buffer is not cached", (long long)cached_buffer_bytes());

  // 1. two live buffers are distinct, aligned and big enough; released, both are cached
  float *pa, *pb;
  {
    CallBuf a(floats(70)), b(floats(100));
    pa = a.p;
    pb = b.p;
    expect(a.p && b.p && a.p != b.p, "two live buffers are distinct");
    expect(reinterpret_cast<uintptr_t>(a.p) % (2 * kMiB) == 0, "2 MiB aligned");
    const bool apart = a.p + floats(70) <= b.p || b.p + floats(100) <= a.p;
    expect(apart, "two live buffers do not overlap");
    a.p[floats(70) - 1] = 1.0f;  // the last float of each is ours to write
    b.p[floats(100) - 1] = 2.0f;
  }
  expect(cached_buffer_bytes() == block_bytes(floats(70)) + block_bytes(floats(100)), "both released into the cache",
         (long long)cached_buffer_bytes(), (long long)(block_bytes(floats(70)) + block_bytes(floats(100))));

  // 2. the smallest cached block that fits: 60 MiB takes the 70 MiB block, 90 the 100 MiB one
  {
    CallBuf c(floats(60));
    expect(c.p == pa, "60 MiB reuses the 70 MiB block (the smallest that fits)");
    CallBuf d(floats(90));
    expect(d.p == pb, "90 MiB reuses the 100 MiB block");
    expect(cached_buffer_bytes() == 0, "both taken out of the cache");
    CallBuf e(floats(65));
    expect(e.p != pa && e.p != pb, "a third live buffer is a new block");
  }

  // 3. the limit: releasing past it evicts the smallest cached blocks first; a block over the
  // limit is never kept
  release_cached_buffers();
  expect(cached_buffer_bytes() == 0, "release_cached_buffers empties the cache");
  const size_t big = kCallBufCacheBytes / 4 / 2;  // floats of half the limit
  {
    CallBuf s1(floats(66)), h1(big - floats(4)), h2(big - floats(4));
    (void)s1;
    (void)h1;
    (void)h2;
  }  // released h2, h1 (254 MiB blocks: 508 MiB cached), then s1 (68 MiB), which evicts one
  expect(cached_buffer_bytes() <= kCallBufCacheBytes, "the cache stays within its limit", (long long)cached_buffer_bytes(),
         (long long)kCallBufCacheBytes);
  {
    const size_t before = cached_buffer_bytes();
    { CallBuf over(kCallBufCacheBytes / 4 + floats(2)); }
    expect(cached_buffer_bytes() <= before, "a block over the limit is freed, not cached", (long long)cached_buffer_bytes(),
           (long long)before);
  }
  release_cached_buffers();
  {
    CallBuf small(floats(70)), large(big);
    (void)small;
    (void)large;
  }
  // both fit (70 MiB + 256 MiB + 2 MiB <= 512 MiB)
  expect(cached_buffer_bytes() == block_bytes(floats(70)) + block_bytes(big), "both kept when they fit");
  {
    CallBuf large2(big + floats(100));  // a new block (none cached is big enough)
    (void)large2;
  }  // its release must evict the 70 MiB block (the smallest), and then also the 256 MiB one
  const size_t after = cached_buffer_bytes();
  expect(after == block_bytes(big + floats(100)), "the smallest evicted first, until it fits", (long long)after,
         (long long)block_bytes(big + floats(100)));

  // 4. several threads taking and releasing buffers of random sizes at once: each fills its block
  // with a pattern of its own and finds it intact before releasing it
  release_cached_buffers();
  // (the threads start together, at a barrier: a take and release is a few microseconds now
  // that a block is not faulted in whole, less than starting a thread)
  std::atomic<int> bad{0}, started{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t, seed, &bad, &started] {
      uint64_t s = seed * 0x9E3779B97F4A7C15ull + uint64_t(t + 1);
      auto next = [&s] {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        return s;
      };
      started.fetch_add(1);
      while (started.load() < 4) std::this_thread::yield();
      for (int i = 0; i < 200; ++i) {
        const size_t n = floats(65) + size_t(next() % floats(40));
        CallBuf b(n);
        if (reinterpret_cast<uintptr_t>(b.p) % (2 * kMiB) != 0) bad.fetch_add(1);  // what one mark a unit relies on
        const float mark = float(t * 1000 + i);
        for (size_t k = 0; k < n; k += kUnitFloats) b.p[k] = mark;
        b.p[n - 1] = mark;
        std::this_thread::yield();
        for (size_t k = 0; k < n; k += kUnitFloats)
          if (b.p[k] != mark) bad.fetch_add(1);
        if (b.p[n - 1] != mark) bad.fetch_add(1);
      }
    });
  for (auto& th : ts) th.join();
  expect(bad.load() == 0, "concurrent buffers are 2 MiB aligned and keep their owners' patterns", bad.load());
  expect(cached_buffer_bytes() <= kCallBufCacheBytes, "within the limit after the threads");
  release_cached_buffers();
  expect(cached_buffer_bytes() == 0, "empty at the end");

  if (failures) {
    std::printf("%d of %d checks failed (seed %u)\n", failures, checks, seed);
    return 1;
  }
  std::printf("ok %d checks\n", checks);
  return 0;
}
