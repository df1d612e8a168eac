// Stress test of native/cpu/threads.cc: many tiny parallel_for and parallel_for_affine calls from
// two threads at once, with nested calls and exceptions; then every item of affine calls of many
// sizes and grains visited exactly once; then jobs that need every thread of the pool at once (each
// chunk waits at a barrier for the others: a worker that missed a job, spinning or asleep, or one
// started by a resize that missed the first job after it, hangs here). Built and run by
// thread_pool.test.ts, with the pool's spin on and off (MURPHY_POOL_SPIN_US).
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>
#include "threads.h"
using namespace murphy;
int main() {
  std::atomic<long> total{0};
  auto work = [&](int) {
    for (int it = 0; it < 20000; ++it) {
      std::atomic<long> s{0};
      auto pf = it % 2 ? parallel_for_affine : parallel_for;
      pf(8 + it % 5, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) s += i;
        if (it % 97 == 0) parallel_for(4, 1, [&](int64_t b2, int64_t e2) { s += (e2 - b2) * 0; });
        if (it % 89 == 0) parallel_for_affine(4, 1, [&](int64_t b2, int64_t e2) { s += (e2 - b2) * 0; });
      });
      long n = 8 + it % 5;
      if (s != n * (n - 1) / 2) { printf("wrong sum %ld at %d\n", (long)s, it); std::abort(); }
      if (it % 1000 == 0) {
        try { parallel_for(10, 1, [&](int64_t b, int64_t) { if (b == 5) throw std::runtime_error("x"); }); std::abort(); }
        catch (const std::runtime_error&) {}
        try { parallel_for_affine(10, 1, [&](int64_t b, int64_t) { if (b == 5) throw std::runtime_error("x"); }); std::abort(); }
        catch (const std::runtime_error&) {}
      }
      total += 1;
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join(); b.join();
  // affine calls cover [0, n) exactly once, in chunks of at least `grain` where n allows
  for (int64_t n = 1; n <= 70; ++n)
    for (int64_t grain = 1; grain <= 9; grain += 4) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      parallel_for_affine(n, grain, [&](int64_t b, int64_t e) {
        if (b >= e || b < 0 || e > n) { fprintf(stderr, "affine: bad chunk [%ld, %ld) of %ld\n", (long)b, (long)e, (long)n); std::abort(); }
        for (int64_t i = b; i < e; ++i) seen[size_t(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        if (seen[size_t(i)].load() != 1) { fprintf(stderr, "affine: item %ld of %ld seen %d times (grain %ld)\n", (long)i, (long)n, seen[size_t(i)].load(), (long)grain); std::abort(); }
    }
  // every thread in every job: n chunks of one item each for n threads, each waiting for all
  const int threads = num_threads();
  for (int round = 0; round < 3; ++round) {
    if (round > 0) set_num_threads(round == 1 ? threads + 1 : threads);  // fresh workers
    const int n = num_threads();
    // affine: each thread holds its own part's one chunk at the barrier, so item i runs on the
    // same thread in every call (item 0 on the caller)
    std::vector<std::thread::id> home(static_cast<size_t>(n));
    for (int it = 0; it < 2000; ++it) {
      std::atomic<int> arrived{0};
      const bool affine = it % 2;
      (affine ? parallel_for_affine : parallel_for)(n, 1, [&](int64_t b, int64_t) {
        arrived.fetch_add(1);
        while (arrived.load() < n) std::this_thread::yield();
        if (!affine) return;
        const auto me = std::this_thread::get_id();
        if (it == 1) home[size_t(b)] = me;  // written once, read after the call returns
        else if (home[size_t(b)] != me) { fprintf(stderr, "affine: item %ld moved to another thread (call %d)\n", (long)b, it); std::abort(); }
      });
      if (it == 1) {
        if (home[0] != std::this_thread::get_id()) { fprintf(stderr, "affine: item 0 did not run on the caller\n"); std::abort(); }
        for (int i = 1; i < n; ++i)
          for (int j = 0; j < i; ++j)
            if (home[size_t(i)] == home[size_t(j)]) { fprintf(stderr, "affine: items %d and %d on one thread\n", j, i); std::abort(); }
      }
    }
  }
  printf("ok %ld calls, %d threads\n", (long)total, num_threads());
}
