// Causal GQA attention over packed variable-length sequences, forward and backward, in harness
// form (harness.h): each struct is one kernel, run on the GPU by launch_phased and on the CPU
// by run_on_host. Formulas and the tile table: native/gpu/attention.h; spec: the CPU ops
// attention_forward_cpu / attention_backward_cpu (native/model/attention.cc).
//
// Shape of every kernel: a block owns one tile (a range of <= B token rows of one sequence,
// an entry of the plan's tile table) and loops over the tiles it interacts with; each loop
// step is a few phases (load a tile into shared memory | compute scores | row softmax |
// accumulate), so the kernels have a run-time phase count per block (`phases(block)`).
// Everything that lives across phases is in shared memory: the staged tiles and the fp32
// accumulators. Threads stride over the elements of a phase (`i = thread; i < n; i += block`),
// so any block size works; each element has one writer; every sum runs in a fixed order.
// Shared memory per block depends on (B, C, head_dim) only: memory is linear in T.
#pragma once
#include <cmath>

#include "harness.h"

namespace murphy {
namespace gpu {

namespace attn {

// `fault` fields take the values of AttnFault (native/gpu/attention.h): 0 in every real run;
// 1 (Causal) and 2 (Gqa) are deliberate bugs for the tests to catch.

// One tile of the table: rows [row0, row1) of the sequence [seq0, seq1).
struct Tile {
  int64_t row0, row1, seq0, seq1;
};
MURPHY_HD Tile tile_at(const int32_t* tiles, int64_t i) {
  return Tile{tiles[4 * i], tiles[4 * i + 1], tiles[4 * i + 2], tiles[4 * i + 3]};
}
MURPHY_HD int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
MURPHY_HD int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// The GQA head mapping: q head h reads kv head h / (H / G); kv head g serves q heads
// g * rep + r, r < rep. (Fault Gqa: the interleaved mapping h % G, a classic porting bug.)
MURPHY_HD int64_t kv_head(int64_t h, int64_t H, int64_t G, int32_t fault) {
  return fault == 2 ? h % G : h / (H / G);
}
MURPHY_HD int64_t q_head(int64_t g, int64_t r, int64_t H, int64_t G, int32_t fault) {
  return fault == 2 ? r * G + g : g * (H / G) + r;
}
// Causal mask within a sequence: query row t sees key row j <= t. (Fault Causal: j <= t + 1.)
MURPHY_HD bool visible(int64_t t, int64_t j, int32_t fault) { return fault == 1 ? j <= t + 1 : j <= t; }

// The staged K and V tiles are swizzled: element (j, e) lives at j * D + (e ^ (j & swz)),
// swz = 31 when D is a multiple of 32 (else 0: no swizzle). In the score phases consecutive
// threads take consecutive key rows j and read element e of each: unswizzled, rows D floats
// apart would all hit one of the 32 shared-memory banks; swizzled, they hit 32 different ones.
// Threads that read consecutive e of one row (the accumulate phases, the loads) still touch
// each bank once. Only addresses change: every sum keeps its order, so the bits are the same.
// Used by the backward kernels. The forward kernel keeps plain rows (its score phase has the
// conflicts): swizzled, nvcc 13's ptxas gives it 32 registers and spills for sm_80.
MURPHY_HD int64_t kv_swizzle(int64_t D) { return D % 32 == 0 ? 31 : 0; }

// Fixed-order dot product of a shared row a and a swizzled shared row b (mask m = j & swz).
MURPHY_HD float dot(const float* a, const float* b, int64_t n, int64_t m) {
  float s = 0.0f;
  for (int64_t e = 0; e < n; ++e) s += a[e] * b[e ^ m];
  return s;
}

// What a block of the forward and dQ kernels owns: block = tile index x H + q head h; it reads
// kv head g; the tile has nq query rows.
struct QueryBlock {
  int64_t h, g, nq;
  Tile tl;
};
MURPHY_HD QueryBlock query_block(int64_t block, const int32_t* tiles, int64_t H, int64_t G, int32_t fault) {
  const int64_t h = block % H;
  const Tile tl = tile_at(tiles, block / H);
  return QueryBlock{h, kv_head(h, H, G, fault), tl.row1 - tl.row0, tl};
}

// Rows [row, row + n) of head `head` of a [T, heads, D] tensor into shared [n, D] (fp32),
// swizzled with `swz` (0: plain).
template <typename T>
MURPHY_HD void load_rows(const Thread& t, const T* x, int64_t row, int64_t n, int64_t heads, int64_t head, int64_t D,
                         float* dst, int64_t swz = 0) {
  for (int64_t i = t.thread; i < n * D; i += t.block_dim) {
    const int64_t r = i / D, e = i % D;
    dst[r * D + (e ^ (r & swz))] = ld(x, ((row + r) * heads + head) * D + e);
  }
}

// The inverse, for the write phases: shared [n, D] (plain rows) into rows [row, row + n) of
// head `head` of a [T, heads, D] tensor, as  x = scale * src (/ row_div[r] when given).
template <typename T>
MURPHY_HD void store_rows(const Thread& t, T* x, int64_t row, int64_t n, int64_t heads, int64_t head, int64_t D,
                          const float* src, float scale, const float* row_div = nullptr) {
  for (int64_t i = t.thread; i < n * D; i += t.block_dim) {
    const int64_t r = i / D, e = i % D;
    float v = scale * src[i];
    if (row_div != nullptr) v /= row_div[r];
    st(x, ((row + r) * heads + head) * D + e, v);
  }
}

// What the backward kernels stage of a run of query rows [row, row + n) of q head h: Q and dO
// (plain rows) and the forward's lse and D = rowsum(dO o O) of each row ([T, H] buffers).
template <typename T>
MURPHY_HD void load_query_rows(const Thread& t, const T* q, const T* dout, const float* lse, const float* delta, int64_t row,
                               int64_t n, int64_t H, int64_t h, int64_t D, float* sQ, float* sO, float* sLse, float* sD) {
  load_rows(t, q, row, n, H, h, D, sQ);
  load_rows(t, dout, row, n, H, h, D, sO);
  for (int64_t r = t.thread; r < n; r += t.block_dim) {
    sLse[r] = lse[(row + r) * H + h];
    sD[r] = delta[(row + r) * H + h];
  }
}

}  // namespace attn

// ---- Forward: one block per (query tile, q head); key tiles of the sequence from its start
// to the query tile's end, with the online softmax per query row i:
//   S_ij = scale q_i . k_j (masked: -inf);  m' = max(m, max_j S_ij);  c = exp(m - m')
//   P_ij = exp(S_ij - m');  l = l c + sum_j P_ij;  acc_i = acc_i c + sum_j P_ij v_j;  m = m'
// and at the end o_i = acc_i / l, lse_i = m + log l.
// Phases: 0 load Q, init | per key tile: load K,V | scores | row softmax | accumulate | last: write.
// Shared (floats): Q, acc [B, D] | K, V [B, D] (plain rows: see kv_swizzle) | S [B, B] | m, l, c [B].
template <typename T>
struct AttnForward {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  float* lse;
  const int32_t* tiles;
  int64_t n_tiles, n_heads, n_kv, head_dim;
  float scale;
  int tile;
  int32_t fault;

  static size_t shared_floats_for(int64_t B, int64_t D) { return size_t(4 * B * D + B * B + 3 * B); }
  size_t shared_floats(int) const { return shared_floats_for(tile, head_dim); }
  int64_t grid() const { return n_tiles * n_heads; }
  MURPHY_HD int key_tiles(const attn::Tile& tl) const { return int(attn::cdiv(tl.row1 - tl.seq0, tile)); }
  MURPHY_HD int phases(int64_t block) const { return 2 + 4 * key_tiles(attn::tile_at(tiles, block / n_heads)); }

  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int64_t H = n_heads, D = head_dim, B = tile;
    const attn::QueryBlock qb = attn::query_block(t.block, tiles, H, n_kv, fault);
    const int64_t h = qb.h, g = qb.g, nq = qb.nq;
    const attn::Tile tl = qb.tl;
    float* sQ = sh;
    float* sA = sQ + B * D;
    float* sK = sA + B * D;
    float* sV = sK + B * D;
    float* sS = sV + B * D;
    float* sM = sS + B * B;
    float* sL = sM + B;
    float* sC = sL + B;
    const int nk_tiles = key_tiles(tl);
    if (phase == 0) {
      attn::load_rows(t, q, tl.row0, nq, H, h, D, sQ);
      for (int64_t i = t.thread; i < nq * D; i += t.block_dim) sA[i] = 0.0f;
      for (int64_t i = t.thread; i < nq; i += t.block_dim) sM[i] = -INFINITY, sL[i] = 0.0f;
      return;
    }
    if (phase == 1 + 4 * nk_tiles) {
      attn::store_rows(t, o, tl.row0, nq, H, h, D, sA, 1.0f, sL);  // o = acc / l (1 * acc is acc exactly)
      for (int64_t r = t.thread; r < nq; r += t.block_dim) lse[(tl.row0 + r) * H + h] = sM[r] + logf(sL[r]);
      return;
    }
    const int64_t kt = (phase - 1) / 4, k0 = tl.seq0 + kt * B, nk = attn::min64(B, tl.row1 - k0);
    switch ((phase - 1) % 4) {
      case 0:
        attn::load_rows(t, k, k0, nk, n_kv, g, D, sK);
        attn::load_rows(t, v, k0, nk, n_kv, g, D, sV);
        break;
      case 1:
        for (int64_t i = t.thread; i < nq * nk; i += t.block_dim) {
          const int64_t r = i / nk, j = i % nk;
          sS[r * B + j] = attn::visible(tl.row0 + r, k0 + j, fault) ? scale * attn::dot(sQ + r * D, sK + j * D, D, 0) : -INFINITY;
        }
        break;
      case 2:
        for (int64_t r = t.thread; r < nq; r += t.block_dim) {
          float* s = sS + r * B;
          float mx = sM[r];
          for (int64_t j = 0; j < nk; ++j) mx = s[j] > mx ? s[j] : mx;
          // every row sees at least one key of every key tile (the diagonal tile starts at
          // row0 <= row), so mx is finite; the guard keeps a fully masked row at zero weight
          const bool any = mx != -INFINITY;
          float sum = 0.0f;
          for (int64_t j = 0; j < nk; ++j) {
            s[j] = any ? expf(s[j] - mx) : 0.0f;
            sum += s[j];
          }
          const float c = any ? expf(sM[r] - mx) : 1.0f;
          sL[r] = sL[r] * c + sum;
          sM[r] = mx;
          sC[r] = c;
        }
        break;
      default:
        for (int64_t i = t.thread; i < nq * D; i += t.block_dim) {
          const int64_t r = i / D, e = i % D;
          const float* p = sS + r * B;
          float a = sA[i] * sC[r];
          for (int64_t j = 0; j < nk; ++j) a += p[j] * sV[j * D + e];
          sA[i] = a;
        }
    }
  }
};

// ---- Backward pre-pass, one thread per (token, q head):  D_t,h = sum_e dO_t,h,e O_t,h,e  (f32)
template <typename T>
struct AttnBackwardDelta {
  const T* o;
  const T* dout;
  float* delta;  // [T, H]
  int64_t rows, head_dim;  // rows = T x H
  int block;
  static constexpr int kPhases = 1;
  static size_t shared_floats(int) { return 0; }
  int64_t grid() const { return blocks_for(rows, block); }
  MURPHY_HD void operator()(int, const Thread& t, float*) const {
    const int64_t i = t.block * t.block_dim + t.thread;
    if (i >= rows) return;
    float s = 0.0f;
    for (int64_t e = 0; e < head_dim; ++e) s += ld(dout, i * head_dim + e) * ld(o, i * head_dim + e);
    delta[i] = s;
  }
};

// ---- dQ: one block per (query tile, q head), looping over the key tiles as the forward does:
//   P_ij = exp(scale q_i . k_j - lse_i) (masked: 0);  dS_ij = P_ij (dO_i . v_j - D_i)
//   dq_i = scale sum_j dS_ij k_j
// Phases: 0 load Q, dO, lse, D; zero acc | per key tile: load K,V | dS | accumulate | last: write.
// Shared (floats): Q, dO, acc [B, D] | K, V [B, D] swizzled | dS [B, B] | lse, D [B].
template <typename T>
struct AttnBackwardDq {
  const T* q;
  const T* k;
  const T* v;
  const T* dout;
  const float* lse;
  const float* delta;
  T* dq;
  const int32_t* tiles;
  int64_t n_tiles, n_heads, n_kv, head_dim;
  float scale;
  int tile;
  int32_t fault;

  static size_t shared_floats_for(int64_t B, int64_t D) { return size_t(5 * B * D + B * B + 2 * B); }
  size_t shared_floats(int) const { return shared_floats_for(tile, head_dim); }
  int64_t grid() const { return n_tiles * n_heads; }
  MURPHY_HD int key_tiles(const attn::Tile& tl) const { return int(attn::cdiv(tl.row1 - tl.seq0, tile)); }
  MURPHY_HD int phases(int64_t block) const { return 2 + 3 * key_tiles(attn::tile_at(tiles, block / n_heads)); }

  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int64_t H = n_heads, D = head_dim, B = tile;
    const attn::QueryBlock qb = attn::query_block(t.block, tiles, H, n_kv, fault);
    const int64_t h = qb.h, g = qb.g, nq = qb.nq;
    const attn::Tile tl = qb.tl;
    float* sQ = sh;
    float* sO = sQ + B * D;  // dO
    float* sA = sO + B * D;
    float* sK = sA + B * D;
    float* sV = sK + B * D;
    float* sS = sV + B * D;
    float* sLse = sS + B * B;
    float* sD = sLse + B;
    const int nk_tiles = key_tiles(tl);
    if (phase == 0) {
      attn::load_query_rows(t, q, dout, lse, delta, tl.row0, nq, H, h, D, sQ, sO, sLse, sD);
      for (int64_t i = t.thread; i < nq * D; i += t.block_dim) sA[i] = 0.0f;
      return;
    }
    if (phase == 1 + 3 * nk_tiles) {
      attn::store_rows(t, dq, tl.row0, nq, H, h, D, sA, scale);
      return;
    }
    const int64_t kt = (phase - 1) / 3, k0 = tl.seq0 + kt * B, nk = attn::min64(B, tl.row1 - k0);
    switch ((phase - 1) % 3) {
      case 0:
        attn::load_rows(t, k, k0, nk, n_kv, g, D, sK, attn::kv_swizzle(D));
        attn::load_rows(t, v, k0, nk, n_kv, g, D, sV, attn::kv_swizzle(D));
        break;
      case 1:
        for (int64_t i = t.thread; i < nq * nk; i += t.block_dim) {
          const int64_t r = i / nk, j = i % nk;
          float ds = 0.0f;
          if (attn::visible(tl.row0 + r, k0 + j, fault)) {
            const int64_t m = j & attn::kv_swizzle(D);
            const float p = expf(scale * attn::dot(sQ + r * D, sK + j * D, D, m) - sLse[r]);
            ds = p * (attn::dot(sO + r * D, sV + j * D, D, m) - sD[r]);
          }
          sS[r * B + j] = ds;
        }
        break;
      default:
        for (int64_t i = t.thread; i < nq * D; i += t.block_dim) {
          const int64_t r = i / D, e = i % D;
          const float* ds = sS + r * B;
          float a = sA[i];
          for (int64_t j = 0; j < nk; ++j) a += ds[j] * sK[j * D + (e ^ (j & attn::kv_swizzle(D)))];
          sA[i] = a;
        }
    }
  }
};

// ---- dK, dV: one block per (key tile, kv head g), looping over the group's q heads h and,
// for each, over the query rows from the key tile's first row to the sequence end in chunks
// of C rows (rows before the key tile see none of its keys):
//   P_ij = exp(scale q_i . k_j - lse_i) (masked: 0);  dS_ij = P_ij (dO_i . v_j - D_i)
//   dv_j = sum_h sum_i P_ij dO_i;  dk_j = scale sum_h sum_i dS_ij q_i
// Phases: 0 load K, V; zero acc | per (head, chunk): load Q, dO, lse, D | P, dS | accumulate | last: write.
// Shared (floats): K, V [B, D] swizzled | dK, dV [B, D] | Q, dO [C, D] | P, dS [C, B] | lse, D [C].
template <typename T>
struct AttnBackwardDkDv {
  const T* q;
  const T* k;
  const T* v;
  const T* dout;
  const float* lse;
  const float* delta;
  T* dk;
  T* dv;
  const int32_t* tiles;
  int64_t n_tiles, n_heads, n_kv, head_dim;
  float scale;
  int tile, chunk;
  int32_t fault;

  static size_t shared_floats_for(int64_t B, int64_t C, int64_t D) { return size_t(4 * B * D + 2 * C * D + 2 * C * B + 2 * C); }
  size_t shared_floats(int) const { return shared_floats_for(tile, chunk, head_dim); }
  int64_t grid() const { return n_tiles * n_kv; }
  MURPHY_HD int chunks(const attn::Tile& tl) const { return int(attn::cdiv(tl.seq1 - tl.row0, chunk)); }
  MURPHY_HD int phases(int64_t block) const {
    return 2 + 3 * int(n_heads / n_kv) * chunks(attn::tile_at(tiles, block / n_kv));
  }

  MURPHY_HD void operator()(int phase, const Thread& t, float* sh) const {
    const int64_t H = n_heads, G = n_kv, D = head_dim, B = tile, C = chunk;
    const int64_t g = t.block % G;
    const attn::Tile tl = attn::tile_at(tiles, t.block / G);
    const int64_t nk = tl.row1 - tl.row0;
    float* sK = sh;
    float* sV = sK + B * D;
    float* sdK = sV + B * D;
    float* sdV = sdK + B * D;
    float* sQ = sdV + B * D;
    float* sO = sQ + C * D;  // dO
    float* sP = sO + C * D;
    float* sS = sP + C * B;  // dS
    float* sLse = sS + C * B;
    float* sD = sLse + C;
    const int nc = chunks(tl);
    const int64_t rep = H / G;
    if (phase == 0) {
      attn::load_rows(t, k, tl.row0, nk, G, g, D, sK, attn::kv_swizzle(D));
      attn::load_rows(t, v, tl.row0, nk, G, g, D, sV, attn::kv_swizzle(D));
      for (int64_t i = t.thread; i < nk * D; i += t.block_dim) sdK[i] = 0.0f, sdV[i] = 0.0f;
      return;
    }
    if (phase == 1 + 3 * int(rep) * nc) {
      attn::store_rows(t, dk, tl.row0, nk, G, g, D, sdK, scale);
      attn::store_rows(t, dv, tl.row0, nk, G, g, D, sdV, 1.0f);  // 1 * dV is dV exactly
      return;
    }
    const int64_t step = (phase - 1) / 3, r = step / nc, c = step % nc;
    const int64_t h = attn::q_head(g, r, H, G, fault);
    const int64_t q0 = tl.row0 + c * C, nq = attn::min64(C, tl.seq1 - q0);
    switch ((phase - 1) % 3) {
      case 0:
        attn::load_query_rows(t, q, dout, lse, delta, q0, nq, H, h, D, sQ, sO, sLse, sD);
        break;
      case 1:
        for (int64_t x = t.thread; x < nq * nk; x += t.block_dim) {
          const int64_t i = x / nk, j = x % nk;
          float p = 0.0f, ds = 0.0f;
          if (attn::visible(q0 + i, tl.row0 + j, fault)) {
            const int64_t m = j & attn::kv_swizzle(D);
            p = expf(scale * attn::dot(sQ + i * D, sK + j * D, D, m) - sLse[i]);
            ds = p * (attn::dot(sO + i * D, sV + j * D, D, m) - sD[i]);
          }
          sP[i * B + j] = p;
          sS[i * B + j] = ds;
        }
        break;
      default:
        for (int64_t x = t.thread; x < nk * D; x += t.block_dim) {
          const int64_t j = x / D, e = x % D;
          float a = sdV[x], b = sdK[x];
          for (int64_t i = 0; i < nq; ++i) {
            a += sP[i * B + j] * sO[i * D + e];
            b += sS[i * B + j] * sQ[i * D + e];
          }
          sdV[x] = a;
          sdK[x] = b;
        }
    }
  }
};

}  // namespace gpu
}  // namespace murphy
