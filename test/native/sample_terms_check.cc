// Checks the sampler's fp64 softmax terms (native/model/sample_terms_simd.inc) in every compiled
// copy this CPU runs, against glibc's exp: prints one JSON line per copy. Built and run by
// test/model/sample-terms.test.ts: `sample_terms_check SEED`.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define MURPHY_SIMD_BODY "../model/sample_terms_simd.inc"
#include "simd_multiversion.inc"

namespace {

struct Copy {
  const char* name;
  void (*terms)(const float*, int64_t, double, double, double*);
  void (*block_sums)(const float*, int64_t, double, double, int64_t, double*);
  void (*argmax)(const float*, int64_t, float*, int64_t*, bool*);
  void (*cut_masses)(const float*, int64_t, double, double, double*);
  const double* cuts;
  int ncuts;
};

// |a - b| in units of b's ulp (b normal, positive)
double ulps(double a, double b) { return std::fabs(a - b) / (std::nextafter(b, INFINITY) - b); }

void check(const Copy& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  const int64_t n = 4 * 8 + 3;  // whole vectors of every width, then a scalar tail
  std::vector<float> zero(static_cast<size_t>(n), 0.0f);
  std::vector<double> p(static_cast<size_t>(n));
  double worst = 0, worst_at = 0, worst_den = 0, worst_den_at = 0;
  auto one = [&](double x) {  // exp(x) through z = 0, m = -x, T = 1: every lane and the tail
    c.terms(zero.data(), n, -x, 1.0, p.data());
    const double ref = std::exp(x);
    for (double y : p) {
      if (ref >= DBL_MIN) {
        const double e = ulps(y, ref);
        if (e > worst) worst = e, worst_at = x;
      } else {
        const double e = std::fabs(y - ref) / 4.9406564584124654e-324;  // denormal steps
        if (e > worst_den) worst_den = e, worst_den_at = x;
      }
    }
  };
  for (int i = 0; i < 200000; ++i) one(-708.0 * unif(rng));                    // uniform over the normal range
  for (int i = 0; i < 100000; ++i) one(-std::exp(std::log(708.0) * (2 * unif(rng) - 1) * 20));  // log-uniform, tiny to large
  for (int i = 0; i < 20000; ++i) one(-708.4 - 36.8 * unif(rng));               // the denormal range
  for (int k = -1100; k <= 0; ++k) one(k * 0.6931471805599453), one(k * 0.6931471805599453 + 0.5 * 0.6931471805599453);
  // edges: exact values the sampler relies on, [exp(x), lanes and tail agree] in this order of x
  // (test/model/sample-terms.test.ts lists the same x)
  std::string edges;
  for (double x : {0.0, -0.0, -1e-300, -745.0, -745.1332191019411, -745.2, -746.0, -1000.0, -1e300, -double(INFINITY)}) {
    c.terms(zero.data(), n, -x, 1.0, p.data());
    bool same = true;
    for (double y : p) same &= std::memcmp(&y, &p[0], 8) == 0;
    char b[96];
    std::snprintf(b, sizeof b, "%s[%.17g,%s]", edges.empty() ? "" : ",", p[0], same ? "true" : "false");
    edges += b;
  }
  // a temperature: the division's rounding is the same on both sides
  double worst_t = 0;
  {
    std::vector<float> z(4099);
    std::vector<double> q(z.size());
    for (int rep = 0; rep < 40; ++rep) {
      const double T = 0.05 + 2 * unif(rng);
      for (float& v : z) v = float(-30.0 * unif(rng));
      const double m = 0.25;
      c.terms(z.data(), int64_t(z.size()), m, T, q.data());
      for (size_t i = 0; i < z.size(); ++i) {
        const double ref = std::exp((double(z[i]) - m) / T);
        if (ref >= DBL_MIN) worst_t = std::fmax(worst_t, ulps(q[i], ref));
      }
    }
  }
  // block sums and top-p's cut masses against long double sums of glibc's terms, and the argmax
  double worst_sum = 0;
  bool argmax_ok = true;
  for (int rep = 0; rep < 30; ++rep) {
    const int64_t V = 1 + int64_t(unif(rng) * 5000), block = 1 + int64_t(unif(rng) * 700);
    std::vector<float> z(static_cast<size_t>(V));
    for (float& v : z) v = float(20.0 * (unif(rng) - 0.5));
    if (rep % 3 == 0) z[size_t(int64_t(unif(rng) * V))] = 40.0f, z[size_t(int64_t(unif(rng) * V))] = 40.0f;  // ties
    if (rep % 5 == 0) z[0] = -INFINITY;
    float mx;
    int64_t at;
    bool nan;
    c.argmax(z.data(), V, &mx, &at, &nan);
    float rm = -INFINITY;
    int64_t ra = 0;
    for (int64_t i = 0; i < V; ++i)
      if (z[size_t(i)] > rm) rm = z[size_t(i)], ra = i;
    argmax_ok &= mx == rm && at == ra && !nan;
    z[size_t(V / 2)] = NAN;
    c.argmax(z.data(), V, &mx, &at, &nan);
    argmax_ok &= nan;
    z[size_t(V / 2)] = 0.0f;
    c.argmax(z.data(), V, &mx, &at, &nan);
    {  // top-p's cut masses: the terms with x >= -cut[j], and all of them
      const double T = rep % 2 ? 1.0 : 1.3;
      std::vector<double> mass(static_cast<size_t>(c.ncuts + 1));
      c.cut_masses(z.data(), V, mx, T, mass.data());
      for (int j = 0; j <= c.ncuts; ++j) {
        long double ref = 0;
        for (int64_t i = 0; i < V; ++i) {
          const double x = T == 1.0 ? double(z[size_t(i)]) - mx : (double(z[size_t(i)]) - mx) / T;
          if (j == c.ncuts || x >= -c.cuts[j]) ref += std::exp((long double)x);
        }
        if (ref > 0) worst_sum = std::fmax(worst_sum, double(std::fabs((long double)mass[size_t(j)] - ref) / ref));
        else if (mass[size_t(j)] != 0) worst_sum = INFINITY;
      }
    }
    const int64_t blocks = (V + block - 1) / block;
    std::vector<double> bs(static_cast<size_t>(blocks));
    const double T = rep % 2 ? 1.0 : 0.7;
    c.block_sums(z.data(), V, mx, T, block, bs.data());
    for (int64_t b = 0; b < blocks; ++b) {
      long double ref = 0;
      for (int64_t i = b * block; i < std::min(V, (b + 1) * block); ++i) ref += std::exp((long double)((double(z[size_t(i)]) - mx) / T));
      if (ref > 0) worst_sum = std::fmax(worst_sum, double(std::fabs((long double)bs[size_t(b)] - ref) / ref));
    }
  }
  std::printf("{\"copy\":\"%s\",\"maxUlp\":%.4g,\"maxUlpAt\":%.17g,\"denormalSteps\":%.4g,\"denormalAt\":%.17g,\"temperatureUlp\":%.4g,"
              "\"blockSumRel\":%.4g,\"argmax\":%s,\"edges\":[%s]}\n",
              c.name, worst, worst_at, worst_den, worst_den_at, worst_t, worst_sum, argmax_ok ? "true" : "false", edges.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  using namespace murphy;
  check({"baseline", cpu_base::softmax_terms, cpu_base::softmax_block_sums, cpu_base::argmax_nan, cpu_base::softmax_cut_masses, cpu_base::kTopPCut, cpu_base::kTopPCuts}, seed);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    check({"avx2", cpu_v3::softmax_terms, cpu_v3::softmax_block_sums, cpu_v3::argmax_nan, cpu_v3::softmax_cut_masses, cpu_v3::kTopPCut, cpu_v3::kTopPCuts}, seed);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    check({"avx512", cpu_v4::softmax_terms, cpu_v4::softmax_block_sums, cpu_v4::argmax_nan, cpu_v4::softmax_cut_masses, cpu_v4::kTopPCut, cpu_v4::kTopPCuts}, seed);
#endif
  return 0;
}
