// The decode kernels over a paged KV cache, in harness form (harness.h). T is the storage type
// of q, k, v and the pools (float, or uint16_t holding bf16); arithmetic is fp32.
//
// Pool layout: k_pool, v_pool [n_blocks, block_size, G, D]; a cache slot is
// block * block_size + offset, so slot s's row of kv head g starts at (s G + g) D. A sequence's
// position j lives in block block_table[seq][j / block_size] at offset j % block_size.
//
// Attention of a chunk of new query tokens (decode: a chunk of 1): query token t belongs to
// sequence seq[t] and sits at position pos[t] of it; it attends to positions 0..pos[t] of its
// sequence (its own k and v appended first), so the chunk is causal inside itself. GQA: query
// head h reads kv head h / (H / G) (Hugging Face's repeat_kv). Split along the sequence (vLLM's
// paged_attention_v2): partition p covers positions [p P, (p + 1) P); per (token, head, p)
//   s_j = scale q . k_j;  m_p = max_j s_j;  l_p = sum_j exp(s_j - m_p);  o_p = sum_j exp(s_j - m_p) v_j / l_p
// (the partition's scores live in shared memory), then the reduce merges the partitions:
//   M = max_p m_p;  w_p = l_p exp(m_p - M);  out = sum_p w_p o_p / sum_p w_p;  lse = M + log(sum_p w_p)
// which equals softmax(s) v over the whole context, and lse = log sum_j exp(s_j).
#pragma once
#include "harness.h"

namespace murphy {
namespace gpu {

constexpr int kMaxPartition = 512;  // positions per partition (the scores held in shared memory)
constexpr int kMaxHeadDim = 256;

// ---- KV append, one thread per element of the new tokens' k and v [n_new, G, D]:
//   k_pool[slot[t] G D + e] = k[t G D + e] (and v); slot < 0 = padding, skipped
template <typename T>
struct KvAppend {
  const T* k;
  const T* v;
  const int64_t* slot;  // [n_new]
  T* k_pool;
  T* v_pool;
  int64_t n_new, row;  // row = G D
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(n_new * row, block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i >= n_new * row) return;
    const int64_t tok = i / row, e = i % row, s = slot[tok];
    if (s < 0) return;
    st(k_pool, s * row + e, ld(k, i));
    st(v_pool, s * row + e, ld(v, i));
  }
};

// Block max over shared floats, laid out as block_sum_* (harness.h): sh[thread] partials,
// sh[B + group] group maxima, thread 0's total.
MURPHY_HD void block_max_warps(const Thread& t, float* sh) {
  if (t.thread % 32 != 0) return;
  float s = -INFINITY;
  const int end = t.thread + 32 < t.block_dim ? t.thread + 32 : t.block_dim;
  for (int i = t.thread; i < end; ++i) s = sh[i] > s ? sh[i] : s;
  sh[t.block_dim + t.thread / 32] = s;
}
MURPHY_HD float block_max_total(const Thread& t, const float* sh) {
  float s = -INFINITY;
  for (int g = 0; g < (t.block_dim + 31) / 32; ++g) s = sh[t.block_dim + g] > s ? sh[t.block_dim + g] : s;
  return s;
}

// ---- Paged attention, one partition of one (token, head) per block (block index =
// (token H + head) n_parts + partition). Partials in fp32: o_part [n_new, H, n_parts, D],
// m_part and l_part [n_new, H, n_parts]; an empty partition (past the token's position) writes
// m = -inf, l = 0, o = 0.
template <typename T>
struct PagedAttentionPartial {
  const T* q;                  // [n_new, H, D]
  const T* k_pool;
  const T* v_pool;
  const int32_t* block_table;  // [n_seqs, max_blocks]
  const int32_t* seq;          // [n_new]
  const int32_t* pos;          // [n_new]
  float* o_part;
  float* m_part;
  float* l_part;
  int64_t n_new, H, G, D, block_size, max_blocks, partition, n_parts;
  float scale;
  static constexpr int kPhases = 8;
  // q [kMaxHeadDim], scores [kMaxPartition], then the block reduction's floats
  static constexpr int kScores = kMaxHeadDim, kRed = kMaxHeadDim + kMaxPartition;
  static size_t shared_floats(int block) { return size_t(kRed) + block_sum_shared_floats(block) + 1; }  // + l
  int64_t grid() const { return n_new * H * n_parts; }
  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int64_t p = t.block % n_parts, th = t.block / n_parts, h = th % H, tok = th / H;
    const int64_t g = h / (H / G);
    const int64_t start = p * partition;
    const int64_t end = pos[tok] + 1 < start + partition ? pos[tok] + 1 : start + partition;
    const int64_t n = end - start;  // <= 0: empty
    const int32_t* table = block_table + int64_t(seq[tok]) * max_blocks;
    float* qs = sh;
    float* sc = sh + kScores;
    float* red = sh + kRed;
    const int slot = block_sum_slot(t);
    switch (phase) {
      case 0:
        for (int64_t d = t.thread; d < D; d += t.block_dim) qs[d] = ld(q, th * D + d);
        break;
      case 1: {
        float mx = -INFINITY;
        for (int64_t j = t.thread; j < n; j += t.block_dim) {
          const int64_t x = start + j;
          const int64_t kv = ((int64_t(table[x / block_size]) * block_size + x % block_size) * G + g) * D;
          float s = 0.0f;
          for (int64_t d = 0; d < D; ++d) s += qs[d] * ld(k_pool, kv + d);
          s *= scale;
          sc[j] = s;
          mx = s > mx ? s : mx;
        }
        red[t.thread] = mx;
        break;
      }
      case 2: block_max_warps(t, red); break;
      case 3:
        if (t.thread == 0) red[slot] = block_max_total(t, red);
        break;
      case 4: {
        const float mx = red[slot];
        float s = 0.0f;
        for (int64_t j = t.thread; j < n; j += t.block_dim) {
          const float e = expf(sc[j] - mx);
          sc[j] = e;
          s += e;
        }
        red[t.thread] = s;  // (the max stays in red[slot] for phase 6)
        break;
      }
      case 5: block_sum_warps(t, red); break;
      case 6:
        if (t.thread == 0) {
          const float l = n > 0 ? block_sum_total(t, red) : 0.0f;
          m_part[t.block] = n > 0 ? red[slot] : -INFINITY;
          l_part[t.block] = l;
          red[slot + 1] = l;
        }
        break;
      default: {
        const float l = red[slot + 1];
        for (int64_t d = t.thread; d < D; d += t.block_dim) {
          float acc = 0.0f;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t x = start + j;
            acc += sc[j] * ld(v_pool, ((int64_t(table[x / block_size]) * block_size + x % block_size) * G + g) * D + d);
          }
          o_part[t.block * D + d] = n > 0 ? acc / l : 0.0f;
        }
      }
    }
  }
};

// ---- The partitions' merge, one block per (token, head), one thread per output element d
// (each thread merges the statistics itself, in partition order: no barrier needed):
//   M = max_p m_p;  w_p = l_p exp(m_p - M);  out_d = sum_p w_p o_pd / sum_p w_p;  lse = M + log(sum_p w_p)
template <typename T>
struct PagedAttentionReduce {
  const float* o_part;
  const float* m_part;
  const float* l_part;
  const int32_t* pos;  // [n_new]
  T* out;              // [n_new, H, D]
  float* lse;          // [n_new, H]
  int64_t n_new, H, D, partition, n_parts;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return n_new * H; }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t th = t.block, tok = th / H;
    const int64_t np = (int64_t(pos[tok]) + partition) / partition;  // partitions that hold positions
    const float* m = m_part + th * n_parts;
    const float* l = l_part + th * n_parts;
    float M = -INFINITY;
    for (int64_t p = 0; p < np; ++p) M = m[p] > M ? m[p] : M;
    float L = 0.0f;
    for (int64_t p = 0; p < np; ++p) L += l[p] * expf(m[p] - M);
    for (int64_t d = t.thread; d < D; d += t.block_dim) {
      float acc = 0.0f;
      for (int64_t p = 0; p < np; ++p) acc += l[p] * expf(m[p] - M) * o_part[(th * n_parts + p) * D + d];
      st(out, th * D + d, acc / L);
    }
    if (t.thread == 0) lse[th] = M + logf(L);
  }
};

}  // namespace gpu
}  // namespace murphy
