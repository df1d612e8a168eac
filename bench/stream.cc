// STREAM-style memory bandwidth probe for the kernel benchmarks' floor (bench/run.ts compiles
// it with the system C++ compiler into build/bench-stream and runs it once per benchmark run).
//
// Usage: bench-stream <threads> <floats per array> <reps>
// Prints one JSON object: for each probe and thread count, the best time of <reps> and the
// bandwidth in GB/s, with bytes counted as STREAM counts them (each array element read or
// written once; no write-allocate traffic), and the probe's access pattern:
//   read     sum: s = sum_i a[i], 4 B / element, in several variants (below); the part named
//            `sum` is the best of them, the others are listed under their own names
//   copy     (read one array, write another) copy c[i] = a[i] 8 B / element; triad
//            a[i] = b[i] + q * c[i] 12 B / element; copy_nt, triad_nt: the same with
//            non-temporal (streaming) stores, which skip the read-for-ownership of the
//            destination line (x86-64 only)
//   inplace  update a[i] = q * a[i] + 1 8 B / element (read and written back); nstream
//            a[i] += b[i] + q * c[i] 16 B / element (BabelStream's in-place triad)
// The in-place kernels are here because optimizer-style kernels (AdamW updates param, m and v
// in place) write lines they have just read, with no read-for-ownership of a separate
// destination: on some machines they move more bytes per second than copy or triad.
// The read-only variants (which one is fastest depends on the machine; on the 2-vCPU EPYC VM
// the in-place update moved 95.5 GB/s where the 4-accumulator sum read 32.0, see
// docs/kernels.md "The floor"):
//   sum_acc4, sum_acc8, sum_acc16   4 / 8 / 16 independent vector accumulators
//   sum_pf_t0_1k, sum_pf_t0_4k, sum_pf_t2_4k, sum_pf_t2_16k, sum_pf_nta_4k
//                                   8 accumulators and a software prefetch of every line,
//                                   that far ahead (bytes), with that hint
//   sum_x2, sum_x4, sum_x8          each thread's range read as 2 / 4 / 8 interleaved streams
//   sum_x4_pf1k                     4 streams, each with a t0 prefetch of its lines 1 KiB ahead
//   sum_chunks                      64 KiB chunks dealt round-robin to the threads (instead of
//                                   one contiguous range per thread)
//   sum_4k_pages                    sum_acc8 on an array that madvise keeps on 4 KiB pages
//                                   (the others ask for 2 MiB pages where the kernel allows:
//                                   MADV_HUGEPAGE; "huge_pages" in the output says whether)
// and update again on 1/4 and 1/2 of the array (update_q, update_h; each still >= 4x the last
// level cache when the caller sized the array so), so that a cache effect would show as a
// size dependence.
// As STREAM does: every array is >= 4x the last-level cache (the caller picks the size), each
// thread first-touches the part it later works on, one untimed pass precedes the timed ones,
// and the figure kept is the best of <reps>. The threads live through all the probes of a
// thread count (Team below), so no timed run includes starting them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Range { size_t lo, hi; };

Range part(size_t n, int t, int nt) {
  // 64-byte aligned chunks (16 floats) so non-temporal stores stay aligned
  size_t blocks = n / 16, per = blocks / nt, extra = blocks % nt;
  size_t lo = (per * t + std::min<size_t>(t, extra)) * 16;
  size_t hi = lo + (per + (static_cast<size_t>(t) < extra ? 1 : 0)) * 16;
  if (t == nt - 1) hi = n;
  return {lo, hi};
}

// nt threads that live through all the probes of one thread count: run(f) has thread t call
// f(t) and returns when all have. The workers spin on a generation counter between runs, so a
// timed run measures the probe and a hand-off of about a microsecond, not the start of threads
// (50-100 us each, 1-2% of a 512 MiB read at 80 GB/s, with std::thread per run as before).
class Team {
 public:
  explicit Team(int nt) : nt_(nt) {
    for (int t = 1; t < nt; t++)
      ts_.emplace_back([this, t] {
        uint64_t seen = 0;
        for (;;) {
          uint64_t g;
          while ((g = gen_.load(std::memory_order_acquire)) == seen) spin();
          seen = g;
          if (quit_.load(std::memory_order_acquire)) return;
          (*job_)(t);
          done_.fetch_add(1, std::memory_order_acq_rel);
        }
      });
  }
  ~Team() {
    quit_.store(true, std::memory_order_release);
    gen_.fetch_add(1, std::memory_order_acq_rel);
    for (auto& th : ts_) th.join();
  }
  template <class F>
  void run(F f) {
    std::function<void(int)> job = f;
    job_ = &job;
    done_.store(0, std::memory_order_relaxed);
    gen_.fetch_add(1, std::memory_order_acq_rel);
    job(0);
    while (done_.load(std::memory_order_acquire) < nt_ - 1) spin();
  }

 private:
  static void spin() {
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }
  int nt_;
  std::vector<std::thread> ts_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> quit_{false};
  const std::function<void(int)>* job_ = nullptr;
};

// s = sum of a[lo, hi) with ACC vector accumulators (independent adds hide the add latency);
// PF > 0: a software prefetch of every line PF bytes ahead, hint HINT (0 = t0, 2 = t2, 3 = nta).
template <int ACC, int PF, int HINT>
float sum_acc(const float* a, size_t lo, size_t hi) {
  size_t i = lo;
  float s = 0;
#if defined(__AVX512F__)
  constexpr size_t kStep = 16 * ACC;
  __m512 acc[ACC];
  for (int k = 0; k < ACC; k++) acc[k] = _mm512_setzero_ps();
  for (; i + kStep <= hi; i += kStep) {
    if (PF > 0)
      for (int k = 0; k < ACC; k++)
        _mm_prefetch(reinterpret_cast<const char*>(a + i + 16 * k) + PF, HINT == 0 ? _MM_HINT_T0 : HINT == 2 ? _MM_HINT_T2 : _MM_HINT_NTA);
    for (int k = 0; k < ACC; k++) acc[k] = _mm512_add_ps(acc[k], _mm512_load_ps(a + i + 16 * k));
  }
  for (int k = 1; k < ACC; k++) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  alignas(64) float l[16];
  _mm512_store_ps(l, acc[0]);
  for (float x : l) s += x;
#elif defined(__AVX__)
  constexpr size_t kStep = 8 * ACC;
  __m256 acc[ACC];
  for (int k = 0; k < ACC; k++) acc[k] = _mm256_setzero_ps();
  for (; i + kStep <= hi; i += kStep) {
    if (PF > 0)
      for (int k = 0; k < ACC; k += 2)
        _mm_prefetch(reinterpret_cast<const char*>(a + i + 8 * k) + PF, HINT == 0 ? _MM_HINT_T0 : HINT == 2 ? _MM_HINT_T2 : _MM_HINT_NTA);
    for (int k = 0; k < ACC; k++) acc[k] = _mm256_add_ps(acc[k], _mm256_load_ps(a + i + 8 * k));
  }
  for (int k = 1; k < ACC; k++) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  alignas(32) float l[8];
  _mm256_store_ps(l, acc[0]);
  for (float x : l) s += x;
#endif
#pragma omp simd reduction(+ : s)
  for (size_t j = i; j < hi; j++) s += a[j];
  return s;
}

// The thread's range read as S interleaved streams (pieces of equal length, read together);
// PF > 0: a t0 prefetch of each stream's lines PF bytes ahead.
template <int S, int PF = 0>
float sum_streams(const float* a, Range r) {
  const size_t len = (r.hi - r.lo) / S / 64 * 64;
  float s = 0;
#if defined(__AVX512F__)
  __m512 acc[2 * S];
  for (int k = 0; k < 2 * S; k++) acc[k] = _mm512_setzero_ps();
  for (size_t i = 0; i < len; i += 32)
    for (int k = 0; k < S; k++) {
      if (PF > 0) {
        const char* p = reinterpret_cast<const char*>(a + r.lo + k * len + i) + PF;
        _mm_prefetch(p, _MM_HINT_T0);
        _mm_prefetch(p + 64, _MM_HINT_T0);
      }
      acc[2 * k] = _mm512_add_ps(acc[2 * k], _mm512_load_ps(a + r.lo + k * len + i));
      acc[2 * k + 1] = _mm512_add_ps(acc[2 * k + 1], _mm512_load_ps(a + r.lo + k * len + i + 16));
    }
  for (int k = 1; k < 2 * S; k++) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  alignas(64) float l[16];
  _mm512_store_ps(l, acc[0]);
  for (float x : l) s += x;
#else
  for (int k = 0; k < S; k++) s += sum_acc<4, 0, 0>(a, r.lo + k * len, r.lo + (k + 1) * len);
#endif
  return s + sum_acc<4, 0, 0>(a, r.lo + S * len, r.hi);
}

// 64 KiB chunks of [0, n) dealt round-robin: thread t reads chunks t, t + nt, ...
float sum_chunks(const float* a, size_t n, int t, int nt) {
  constexpr size_t kChunk = 16384;
  float s = 0;
  for (size_t lo = size_t(t) * kChunk; lo < n; lo += size_t(nt) * kChunk) s += sum_acc<8, 0, 0>(a, lo, std::min(n, lo + kChunk));
  return s;
}

void copy_range(const float* a, float* c, Range r) {
#pragma omp simd
  for (size_t i = r.lo; i < r.hi; i++) c[i] = a[i];
}

void triad_range(float* a, const float* b, const float* c, float q, Range r) {
#pragma omp simd
  for (size_t i = r.lo; i < r.hi; i++) a[i] = b[i] + q * c[i];
}

void update_range(float* a, float q, Range r) {
#pragma omp simd
  for (size_t i = r.lo; i < r.hi; i++) a[i] = q * a[i] + 1.0f;
}

void nstream_range(float* a, const float* b, const float* c, float q, Range r) {
#pragma omp simd
  for (size_t i = r.lo; i < r.hi; i++) a[i] += b[i] + q * c[i];
}

#if defined(__x86_64__)
// Non-temporal stores; r.lo is 64-byte aligned (part() above, arrays from aligned_alloc).
void copy_nt_range(const float* a, float* c, Range r) {
  size_t i = r.lo;
#if defined(__AVX512F__)
  for (; i + 16 <= r.hi; i += 16) _mm512_stream_ps(c + i, _mm512_load_ps(a + i));
#elif defined(__AVX__)
  for (; i + 8 <= r.hi; i += 8) _mm256_stream_ps(c + i, _mm256_load_ps(a + i));
#else
  for (; i + 4 <= r.hi; i += 4) _mm_stream_ps(c + i, _mm_load_ps(a + i));
#endif
  for (; i < r.hi; i++) c[i] = a[i];
  _mm_sfence();
}

void triad_nt_range(float* a, const float* b, const float* c, float q, Range r) {
  size_t i = r.lo;
#if defined(__AVX512F__)
  const __m512 vq = _mm512_set1_ps(q);
  for (; i + 16 <= r.hi; i += 16) _mm512_stream_ps(a + i, _mm512_fmadd_ps(vq, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
#elif defined(__AVX__)
  const __m256 vq = _mm256_set1_ps(q);
  for (; i + 8 <= r.hi; i += 8) _mm256_stream_ps(a + i, _mm256_add_ps(_mm256_load_ps(b + i), _mm256_mul_ps(vq, _mm256_load_ps(c + i))));
#else
  const __m128 vq = _mm_set1_ps(q);
  for (; i + 4 <= r.hi; i += 4) _mm_stream_ps(a + i, _mm_add_ps(_mm_load_ps(b + i), _mm_mul_ps(vq, _mm_load_ps(c + i))));
#endif
  for (; i < r.hi; i++) a[i] = b[i] + q * c[i];
  _mm_sfence();
}
#endif

// 2 MiB-aligned; huge: ask for 2 MiB pages (MADV_HUGEPAGE), else keep 4 KiB pages. Returns
// whether the kernel took the advice (false where madvise or transparent huge pages are absent).
float* alloc_floats(size_t n, bool huge, bool& advised) {
  constexpr size_t kAlign = size_t(2) << 20;
  size_t bytes = (n * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (!p) {
    std::fprintf(stderr, "bench-stream: cannot allocate %zu bytes; pass a smaller array size\n", bytes);
    std::exit(2);
  }
  advised = false;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  advised = madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 && huge;
#endif
  return static_cast<float*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: bench-stream <threads> <floats per array> <reps>\n");
    return 2;
  }
  const int max_threads = std::atoi(argv[1]);
  const size_t n = std::strtoull(argv[2], nullptr, 10);
  const int reps = std::atoi(argv[3]);
  if (max_threads < 1 || n < 1024 || reps < 1) {
    std::fprintf(stderr, "bench-stream: threads >= 1, floats >= 1024 and reps >= 1 expected\n");
    return 2;
  }
  bool huge = false, ignored = false;
  float* a = alloc_floats(n, true, huge);
  float* b = alloc_floats(n, true, ignored);
  float* c = alloc_floats(n, true, ignored);
  float* a4k = alloc_floats(n, false, ignored);
  volatile float sink = 0;

  // fn(thread, threads, its range of [0, elems)) -> a partial sum (read probes) or 0
  using Fn = float (*)(float*, float*, float*, float*, size_t, int, int, Range);
  struct Kernel { const char* name; const char* access; double bytes_per_elem; size_t elems; Fn fn; };
  std::vector<Kernel> kernels = {
      {"sum_acc4", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<4, 0, 0>(a, r.lo, r.hi); }},
      {"sum_acc8", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<8, 0, 0>(a, r.lo, r.hi); }},
      {"sum_acc16", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<16, 0, 0>(a, r.lo, r.hi); }},
#if defined(__x86_64__)
      {"sum_pf_t0_1k", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<8, 1024, 0>(a, r.lo, r.hi); }},
      {"sum_pf_t0_4k", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<8, 4096, 0>(a, r.lo, r.hi); }},
      {"sum_pf_t2_4k", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<8, 4096, 2>(a, r.lo, r.hi); }},
      {"sum_pf_t2_16k", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<8, 16384, 2>(a, r.lo, r.hi); }},
      {"sum_pf_nta_4k", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_acc<8, 4096, 3>(a, r.lo, r.hi); }},
#endif
      {"sum_x2", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_streams<2>(a, r); }},
      {"sum_x4", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_streams<4>(a, r); }},
      {"sum_x8", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_streams<8>(a, r); }},
#if defined(__x86_64__)
      {"sum_x4_pf1k", "read", 4, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { return sum_streams<4, 1024>(a, r); }},
#endif
      {"sum_chunks", "read", 4, n, [](float* a, float*, float*, float*, size_t e, int t, int nt, Range) { return sum_chunks(a, e, t, nt); }},
      {"sum_4k_pages", "read", 4, n, [](float*, float*, float*, float* a4k, size_t, int, int, Range r) { return sum_acc<8, 0, 0>(a4k, r.lo, r.hi); }},
      {"copy", "copy", 8, n, [](float* a, float*, float* c, float*, size_t, int, int, Range r) { copy_range(a, c, r); return 0.0f; }},
      {"triad", "copy", 12, n, [](float* a, float* b, float* c, float*, size_t, int, int, Range r) { triad_range(a, b, c, 0.5f, r); return 0.0f; }},
#if defined(__x86_64__)
      {"copy_nt", "copy", 8, n, [](float* a, float*, float* c, float*, size_t, int, int, Range r) { copy_nt_range(a, c, r); return 0.0f; }},
      {"triad_nt", "copy", 12, n, [](float* a, float* b, float* c, float*, size_t, int, int, Range r) { triad_nt_range(a, b, c, 0.5f, r); return 0.0f; }},
#endif
      {"update", "inplace", 8, n, [](float* a, float*, float*, float*, size_t, int, int, Range r) { update_range(a, 0.5f, r); return 0.0f; }},
      {"update_h", "inplace", 8, n / 2, [](float* a, float*, float*, float*, size_t, int, int, Range r) { update_range(a, 0.5f, r); return 0.0f; }},
      {"update_q", "inplace", 8, n / 4, [](float* a, float*, float*, float*, size_t, int, int, Range r) { update_range(a, 0.5f, r); return 0.0f; }},
      {"nstream", "inplace", 16, n, [](float* a, float* b, float* c, float*, size_t, int, int, Range r) { nstream_range(a, b, c, 0.5f, r); return 0.0f; }},
  };
  std::vector<int> counts = {max_threads};
  if (max_threads > 1) counts.push_back(1);

  std::string json = "{\"floats_per_array\":" + std::to_string(n) + ",\"reps\":" + std::to_string(reps) +
                     ",\"huge_pages\":" + (huge ? "true" : "false") + ",\"results\":[";
  bool first = true;
  auto emit = [&](const char* name, const char* access, int nt, double bytes, double best, const char* variant) {
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s{\"kernel\":\"%s\",\"access\":\"%s\",\"threads\":%d,\"bytes\":%.0f,\"best_ms\":%.9g,\"gbps\":%.9g%s%s%s}",
                  first ? "" : ",", name, access, nt, bytes, best * 1e3, bytes / best / 1e9,
                  variant ? ",\"variant\":\"" : "", variant ? variant : "", variant ? "\"" : "");
    json += buf;
    first = false;
  };
  for (int nt : counts) {
    Team team(nt);
    // first touch by the thread that later works on each part (the pages land where they are used)
    team.run([&](int t) {
      Range r = part(n, t, nt);
      for (size_t i = r.lo; i < r.hi; i++) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 0.0f; a4k[i] = 1.0f; }
    });
    const Kernel* best_read = nullptr;
    double best_read_s = 1e30;
    for (const Kernel& k : kernels) {
      double best = 1e30;
      for (int rep = 0; rep <= reps; rep++) {  // rep 0 is the untimed warm-up
        std::vector<float> partial(nt, 0.0f);
        auto t0 = Clock::now();
        team.run([&](int t) { partial[t] = k.fn(a, b, c, a4k, k.elems, t, nt, part(k.elems, t, nt)); });
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        for (float p : partial) sink = sink + p;
        if (rep > 0) best = std::min(best, s);
      }
      emit(k.name, k.access, nt, k.bytes_per_elem * double(k.elems), best, nullptr);
      if (std::strcmp(k.access, "read") == 0 && best < best_read_s) best_read = &k, best_read_s = best;
    }
    // the read-only probe: the best of the variants, under STREAM's name for it
    emit("sum", "read", nt, best_read->bytes_per_elem * double(best_read->elems), best_read_s, best_read->name);
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  std::free(a);
  std::free(b);
  std::free(c);
  std::free(a4k);
  return 0;
}
