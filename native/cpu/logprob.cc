// Kernel family 1 on the CPU: batched log-prob gathering and its gradient.
// Formulas: see native/include/murphy/logprob.h.
//
// Reference (one row, plain loops):
//   m   = max_j z[j]
//   s   = sum_j exp((z[j] - m) / T)
//   lse = m / T + log(s)
//   logp = z[y] / T - lse
//   H    = log(s) - sum_j e_j * d_j / s,   d_j = (z[j] - m) / T, e_j = exp(d_j)
//   grad[j] = g * (1[j = y] - exp(z[j] / T - lse)) / T
// Fast path (logprob_simd.inc): forward reads each row once, in blocks of 1024, taking the
// exponentials relative to the running max (t = z log2(e) / T - fl(M log2(e) / T), one FMA) and
// the block's max in the same loop; a block that raises the max rescales the fp64 sums before
// it and is summed again from L1 (online softmax). exp in base 2 with a degree-5 polynomial
// (lp_exp2, its error bound there and in docs/kernels.md). Explicit vectors, compiled for
// AVX-512, AVX2 and baseline and picked at run time; parallel over rows (AVX-512: fp32 rows in pairs
// and prefetched 4 KiB ahead: one stream per core is bound by its misses in flight, see
// docs/kernels.md, third round). Gradients larger than
// the cache are written with streaming stores (cache_bytes below), with the same results; bf16
// gradients are rounded by vcvtne2ps2bf16 where the CPU has AVX512-BF16.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "murphy/logprob.h"
#include "murphy/validate.h"
#include "simd.h"
#include "threads.h"

namespace murphy {
// One row's forward statistics (row_stats in logprob_simd.inc), relative to the reference
// ref = fl(max * scale) in base 2, scale = log2(e) / T: d_j = (z_j scale - ref) ln 2.
struct RowStats {
  float max;      // -inf: no finite logit
  float scale;    // log2(e) / T as the kernel used it
  double ref;
  double sum;     // sum_j exp(d_j)
  double sum_ed;  // sum_j exp(d_j) * d_j
  int nan;
};
}  // namespace murphy

#define MURPHY_SIMD_BODY "logprob_simd.inc"
#include "simd_multiversion.inc"

namespace murphy {

namespace {

void check_common(const void* logits, int64_t n_rows, int64_t vocab, const int32_t* targets, float temperature) {
  if (n_rows < 0) throw Error("logprob: nRows must be >= 0, got " + std::to_string(n_rows));
  if (vocab < 1) throw Error("logprob: vocab must be >= 1, got " + std::to_string(vocab));
  (void)temperature;  // its range (> 0) is checked once, in lib/native/options.ts
  if (n_rows > 0 && (!logits || !targets)) throw Error("logprob: logits and targets are required");
}

void check_target(int64_t row, int32_t y, int64_t vocab) {
  if (y < 0 || int64_t(y) >= vocab)
    throw Error("logprob: target id " + std::to_string(y) + " at row " + std::to_string(row) +
                " is outside the vocabulary [0, " + std::to_string(vocab) + "); check the token ids");
}

// A backward call's gradient of at least this many bytes is taken to
// stream to memory rather than stay in cache: the last-level cache's size (sysfs;
// 32 MiB when unknown; glibc's sysconf reports 320 MiB for this VM's 32 MiB L3). Backward then writes with non-temporal stores, since such an output
// leaves the cache before anyone reads it and a plain store would first read each line from
// memory; smaller outputs (the model's chunks, consumed by the next matrix product while in
// cache) use plain stores; both leave the results' bits as they are.
// MURPHY_LOGPROB_CACHE_BYTES overrides it (tests force each path).
int64_t cache_bytes() {
  static const int64_t v = [] {
    if (const char* env = std::getenv("MURPHY_LOGPROB_CACHE_BYTES")) return int64_t(std::strtoll(env, nullptr, 10));
    int64_t llc = 0;
    for (int i = 0; i < 8; ++i) {  // the largest cache of cpu0 (the last level)
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::FILE* f = std::fopen((dir + "size").c_str(), "r");
      if (!f) break;
      long long kb = 0;
      char unit = 'K';
      if (std::fscanf(f, "%lld%c", &kb, &unit) >= 1)
        llc = std::max<int64_t>(llc, kb << (unit == 'M' ? 20 : unit == 'G' ? 30 : unit == 'K' ? 10 : 0));
      std::fclose(f);
    }
    return llc > 0 ? llc : int64_t(32) << 20;
  }();
  return v;
}

float load_logit(const void* logits, DType dt, int64_t idx) {
  return dt == DType::F32 ? static_cast<const float*>(logits)[idx]
                          : bf16_to_f32(static_cast<const uint16_t*>(logits)[idx]);
}

}  // namespace

void logprob_forward_cpu(const LogprobForwardArgs& a) {
  check_common(a.logits, a.n_rows, a.vocab, a.targets, a.temperature);
  for (int64_t n = 0; n < a.n_rows; ++n) check_target(n, a.targets[n], a.vocab);
  const float inv_t = 1.0f / a.temperature;
  const int64_t V = a.vocab;
  const bool want_entropy = a.entropy != nullptr;
  // one row's outputs from its statistics
  auto emit = [&](int64_t n, const RowStats& st) {
    const int64_t off = n * V;
    float lse, logp, ent;
    if (st.nan) {
      lse = logp = ent = std::numeric_limits<float>::quiet_NaN();
    } else if (st.max == -std::numeric_limits<float>::infinity()) {  // fully masked row
      lse = logp = -std::numeric_limits<float>::infinity();
      ent = 0.0f;
    } else {
      constexpr double kLn2 = 0.69314718055994531;
      const double log_s = std::log(st.sum);
      lse = float(st.ref * kLn2 + log_s);
      // relative to the reference (z y scale is exact in fp64), so that large logits keep their precision
      logp = float((double(load_logit(a.logits, a.dtype, off + a.targets[n])) * st.scale - st.ref) * kLn2 - log_s);
      ent = float(log_s - st.sum_ed / st.sum);
    }
    a.logp[n] = logp;
    if (a.lse) a.lse[n] = lse;
    if (a.entropy) a.entropy[n] = ent;
  };
  // Rows are independent; each parallel chunk writes only its own rows. fp32 rows go two at a
  // time (row_stats2_f32: the same bits as one at a time, with two streams of reads in flight:
  // faster from memory); bf16 rows, bound by the arithmetic, one at a time.
  const bool pairs = a.dtype == DType::F32;
  const float* z32 = static_cast<const float*>(a.logits);
  parallel_for(pairs ? (a.n_rows + 1) / 2 : a.n_rows, 1, [&](int64_t begin, int64_t end) {
    int64_t n = pairs ? begin * 2 : begin;
    end = pairs ? std::min(end * 2, a.n_rows) : end;
    if (pairs) {
      for (; n + 1 < end; n += 2) {
        RowStats two[2];
        MURPHY_SIMD_CALL(row_stats2_f32, z32 + n * V, V, inv_t, want_entropy, two);
        emit(n, two[0]);
        emit(n + 1, two[1]);
      }
    }
    for (; n < end; ++n)
      emit(n, a.dtype == DType::F32
                  ? MURPHY_SIMD_CALL(row_stats_f32, z32 + n * V, V, inv_t, want_entropy)
                  : MURPHY_SIMD_CALL(row_stats_bf16, static_cast<const uint16_t*>(a.logits) + n * V, V, inv_t, want_entropy));
  });
  for (int64_t n = 0; n < a.n_rows; ++n)
    if (std::isnan(a.logp[n]))
      throw Error("logprob: NaN in the logits of row " + std::to_string(n) +
                  "; the model produced NaN (check the learning rate and the inputs)");
}

void logprob_backward_cpu(const LogprobBackwardArgs& a) {
  check_common(a.logits, a.n_rows, a.vocab, a.targets, a.temperature);
  if (a.n_rows > 0 && (!a.lse || !a.grad_logp || !a.grad_logits))
    throw Error("logprob backward: lse, gradLogp and the gradLogits output are required");
  for (int64_t n = 0; n < a.n_rows; ++n) check_target(n, a.targets[n], a.vocab);
  validate_logprob_backward_alias(a);
  const float inv_t = 1.0f / a.temperature;
  const int64_t V = a.vocab;
  // In place (the output is the logits): plain stores, whose lines the loads have just brought
  // into the cache (no read for ownership to save), and the streaming path's head, which may
  // store a vector over entries it reads again, is not taken.
  const bool in_place = a.grad_logits == a.logits;
  const bool stream = !in_place && a.n_rows * V * int64_t(dtype_size(a.dtype)) >= cache_bytes();
  const bool bf16_isa = simd_level_index() == 2 && cpu_has_avx512_bf16();  // AVX-512 copy's bf16 rounding
  parallel_for(a.n_rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int64_t off = n * V;
      const float g = a.grad_logp[n];
      const float lse = a.lse[n];
      const int32_t y = a.targets[n];
      if (a.dtype == DType::F32) {
        float* out = static_cast<float*>(a.grad_logits) + off;
        if (g == 0.0f || std::isinf(lse)) {
          std::memset(out, 0, size_t(V) * 4);
          continue;
        }
        MURPHY_SIMD_CALL(row_grad_f32, static_cast<const float*>(a.logits) + off, out, V, inv_t, lse, -g * inv_t, stream);
        out[y] += g * inv_t;
      } else {
        uint16_t* out = static_cast<uint16_t*>(a.grad_logits) + off;
        if (g == 0.0f || std::isinf(lse)) {
          std::memset(out, 0, size_t(V) * 2);
          continue;
        }
        const uint16_t* z = static_cast<const uint16_t*>(a.logits) + off;
        const float zy = bf16_to_f32(z[y]);  // (read before the row: in place, the row overwrites it)
        if (bf16_isa) cpu_v4::row_grad_bf16_cvt(z, out, V, inv_t, lse, -g * inv_t, stream);
        else MURPHY_SIMD_CALL(row_grad_bf16, z, out, V, inv_t, lse, -g * inv_t, stream);
        // the target entry in full precision, then rounded once
        float p = std::exp(zy * inv_t - lse);
        out[y] = f32_to_bf16(g * inv_t * (1.0f - p));
      }
    }
  });
}

}  // namespace murphy
