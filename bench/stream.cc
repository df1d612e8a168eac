// STREAM-style memory bandwidth probe for the kernel benchmarks' floor (bench/run.ts compiles
// it with the system C++ compiler into build/bench-stream and runs it once per benchmark run).
//
// Usage: bench-stream <threads> <floats per array> <reps>
// Prints one JSON object: for each kernel and thread count, the best time of <reps> and the
// bandwidth in GB/s, with bytes counted as STREAM counts them (each array element read or
// written once; no write-allocate traffic):
//   sum       s = sum_i a[i]          4 B / element (read-only; vectorised, 4 accumulators)
//   copy      c[i] = a[i]             8 B / element
//   triad     a[i] = b[i] + q * c[i]  12 B / element
//   copy_nt, triad_nt: the same with non-temporal (streaming) stores, which skip the
//   read-for-ownership of the destination line (x86-64 only).
//   update    a[i] = q * a[i] + 1     8 B / element (in place: read and written back)
//   nstream   a[i] += b[i] + q * c[i] 16 B / element (BabelStream's in-place triad)
// The in-place kernels are here because optimizer-style kernels (AdamW updates param, m and v
// in place) write lines they have just read, with no read-for-ownership of a separate
// destination: on some machines they move more bytes per second than copy or triad.
// As STREAM does: every array is >= 4x the last-level cache (the caller picks the size), each
// thread first-touches the part it later works on, one untimed pass precedes the timed ones,
// and the figure kept is the best of <reps>.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
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

template <class F>
void parallel(int nt, F f) {
  std::vector<std::thread> ts;
  for (int t = 1; t < nt; t++) ts.emplace_back(f, t);
  f(0);
  for (auto& th : ts) th.join();
}

float sum_range(const float* a, Range r) {
  size_t i = r.lo;
  float s = 0;
#if defined(__AVX512F__)
  // four independent accumulators hide the add latency
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (; i + 64 <= r.hi; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
  }
  alignas(64) float l[16];
  _mm512_store_ps(l, _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  for (float x : l) s += x;
#elif defined(__AVX__)
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (; i + 32 <= r.hi; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (float x : l) s += x;
#endif
#pragma omp simd reduction(+ : s)
  for (size_t j = i; j < r.hi; j++) s += a[j];
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

float* alloc_floats(size_t n) {
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) {
    std::fprintf(stderr, "bench-stream: cannot allocate %zu bytes; pass a smaller array size\n", bytes);
    std::exit(2);
  }
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
  float* a = alloc_floats(n);
  float* b = alloc_floats(n);
  float* c = alloc_floats(n);
  volatile float sink = 0;

  struct Kernel { const char* name; double bytes_per_elem; int kind; };
  std::vector<Kernel> kernels = {{"sum", 4, 0}, {"copy", 8, 1}, {"triad", 12, 2}};
#if defined(__x86_64__)
  kernels.push_back({"copy_nt", 8, 3});
  kernels.push_back({"triad_nt", 12, 4});
#endif
  kernels.push_back({"update", 8, 5});
  kernels.push_back({"nstream", 16, 6});
  std::vector<int> counts = {max_threads};
  if (max_threads > 1) counts.push_back(1);

  std::string json = "{\"floats_per_array\":" + std::to_string(n) + ",\"reps\":" + std::to_string(reps) + ",\"results\":[";
  bool first = true;
  for (int nt : counts) {
    // first touch by the thread that later works on each part (the pages land where they are used)
    parallel(nt, [&](int t) {
      Range r = part(n, t, nt);
      for (size_t i = r.lo; i < r.hi; i++) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 0.0f; }
    });
    for (const Kernel& k : kernels) {
      double best = 1e30;
      for (int rep = 0; rep <= reps; rep++) {  // rep 0 is the untimed warm-up
        std::vector<float> partial(nt, 0.0f);
        auto t0 = Clock::now();
        parallel(nt, [&](int t) {
          Range r = part(n, t, nt);
          switch (k.kind) {
            case 0: partial[t] = sum_range(a, r); break;
            case 1: copy_range(a, c, r); break;
            case 2: triad_range(a, b, c, 0.5f, r); break;
#if defined(__x86_64__)
            case 3: copy_nt_range(a, c, r); break;
            case 4: triad_nt_range(a, b, c, 0.5f, r); break;
#endif
            case 5: update_range(a, 0.5f, r); break;
            case 6: nstream_range(a, b, c, 0.5f, r); break;
          }
        });
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        for (float p : partial) sink = sink + p;
        if (rep > 0) best = std::min(best, s);
      }
      double bytes = k.bytes_per_elem * static_cast<double>(n);
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s{\"kernel\":\"%s\",\"threads\":%d,\"bytes\":%.0f,\"best_ms\":%.9g,\"gbps\":%.9g}",
                    first ? "" : ",", k.name, nt, bytes, best * 1e3, bytes / best / 1e9);
      json += buf;
      first = false;
    }
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  std::free(a);
  std::free(b);
  std::free(c);
  return 0;
}
