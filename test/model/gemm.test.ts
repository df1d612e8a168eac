// The CPU matrix product (native/model/matmul.cc, gemm_avx512.cc) against float64 sums computed
// here, on every path this CPU can run (AMX tiles for bf16 (gemm_amx.cc), AVX-512 with vdpbf16ps,
// AVX-512, AVX2 (gemm_avx2.cc), the x86-64 baseline, the reference loops), for the three products
// of a linear layer and the bf16-weight
// forward, with and without accumulation, on fresh random shapes plus the edge sizes: 1, primes,
// sizes that are not multiples of the 12 x 32 tile, that cross the K slice (256 values / 256 bf16
// pairs), the 512-column and 384-row task blocks, the skinny-path boundary (32 rows) and decode
// rows (M = 1..8, fixed and drawn fresh, with K tails and weight rows split between threads,
// also on 1, 3 and 4 threads: the affine parts of split_weight_rows, the AVX2 4 x 3 blocks).
// Tolerances are the rounding-error bounds, so they cannot flake and an indexing error fails:
//   fp32:  |y - y64| <= K 2^-23 sum_k |a b| + 2^-23 |y_old|
//   bf16 weights, against the bf16-rounded inputs: the same bound (exact products, fp32 sums);
//   against the unrounded fp32 inputs: + 2^-7 sum_k |a b| (x and w each rounded by <= 2^-9 relative).
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { addressMod64, alignedArray, cpuInfo, gemmInfo, linearProduct, setNumThreads, type GemmPathName, type LinearProductKind } from '../../lib/native.js';
import { PolicyModel, presets } from '../../lib/model/index.js';
import { nativeAddon } from '../../lib/native/loader.js';
import { compileCached, cxxCompiler } from '../helpers/compile-cache.js';
import { Rng, testSeed } from '../helpers/random.js';
import { TS_LOADER } from '../helpers/cli.js';

const seed = testSeed('gemm');
const root = fileURLToPath(new URL('../..', import.meta.url));
const { cxx, have: haveCxx } = cxxCompiler();
const rng = new Rng(seed);
const U = 2 ** -23;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
/** bf16 bits of x, round to nearest even (finite inputs). */
function bf16Bits(x: number): number {
  f32[0] = x;
  const u = u32[0];
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}
function bf16Value(bits: number): number {
  u32[0] = bits << 16;
  return f32[0];
}
/** `count` normal draws as bf16 bits, and their values in float64. */
function bf16Normals(count: number): { wb: Uint16Array; wv: Float64Array } {
  const wb = new Uint16Array(count);
  for (let i = 0; i < count; i++) wb[i] = bf16Bits(rng.normal());
  return { wb, wv: Float64Array.from(wb, bf16Value) };
}
/** x rounded to bf16 (nearest even), in float64: the activations the bf16 kernels multiply. */
const bf16Rounded = (x: Float32Array) => Float64Array.from(x, (v) => bf16Value(bf16Bits(v)));

interface Shape { m: number; n: number; k: number }

/** Float64 result and the sum of |products| per output, for out = op(a, b) (+ old). */
function reference(product: LinearProductKind, a: Float32Array | Float64Array, b: Float32Array | Float64Array, s: Shape) {
  const { m, n, k } = s;
  // forward: out[m,n] = a[m,k] b[n,k]^T; backwardInput: out[m,k] = a[m,n] b[n,k];
  // backwardWeight: out[n,k] = a[m,n]^T b[m,k]
  const [rows, cols, inner] = product === 'forward' ? [m, n, k] : product === 'backwardInput' ? [m, k, n] : [n, k, m];
  // one loop per product with its own indexing (a closure per element cost ~2x in this file's run)
  const [as, at, bt, bj] = product === 'forward' ? [k, 1, 1, k] : product === 'backwardInput' ? [n, 1, k, 1] : [1, n, k, 1];
  const y = new Float64Array(rows * cols), abs = new Float64Array(rows * cols);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      let sum = 0, sa = 0;
      for (let t = 0, ia = i * as, ib = j * bj; t < inner; t++, ia += at, ib += bt) {
        const p = a[ia] * b[ib];
        sum += p;
        sa += Math.abs(p);
      }
      y[i * cols + j] = sum;
      abs[i * cols + j] = sa;
    }
  }
  return { y, abs, inner };
}

function check(label: string, got: Float32Array, want: Float64Array, abs: Float64Array, old: Float32Array | null, inner: number, extra: number) {
  for (let i = 0; i < got.length; i++) {
    const w = want[i] + (old ? old[i] : 0);
    const tol = Math.max(inner, 1) * U * abs[i] + extra * abs[i] + (old ? U * Math.abs(old[i]) * 2 : 0) + 1e-30;
    const err = Math.abs(got[i] - w);
    if (!(err <= tol)) assert.fail(`${label}: element ${i} is ${got[i]}, float64 says ${w} (error ${err.toExponential(2)} > bound ${tol.toExponential(2)}); seed ${seed}`);
  }
}

const edge: Shape[] = [
  { m: 1, n: 1, k: 1 }, { m: 1, n: 37, k: 64 }, { m: 3, n: 5, k: 7 }, { m: 32, n: 33, k: 31 }, { m: 33, n: 32, k: 17 },
  { m: 13, n: 97, k: 257 }, { m: 41, n: 45, k: 523 }, { m: 37, n: 530, k: 11 }, { m: 397, n: 35, k: 13 },
  { m: 12, n: 32, k: 256 }, { m: 24, n: 64, k: 1 }, { m: 61, n: 3, k: 300 },
  // decode (skinny) products, M = 1..8: ragged row blocks (4 weight rows, 2 / 6 input rows) and K tails
  { m: 1, n: 131, k: 1001 }, { m: 5, n: 67, k: 45 }, { m: 8, n: 34, k: 260 },
  // single rows (the GEMV): K = 61 runs every step kind (AVX-512: 32, 16, masked 13; AVX2: 16, 8,
  // 5 scalars); over 2e5 flops the weight rows are split between the threads (N not a multiple
  // of the 4-row block), and so is a 4-row product
  { m: 1, n: 203, k: 61 }, { m: 1, n: 250, k: 1013 }, { m: 4, n: 130, k: 400 },
];
function randomShapes(count: number): Shape[] {
  const out: Shape[] = [];
  while (out.length < count) {
    const s = { m: 1 + rng.int(rng.next() < 0.3 ? 32 : 200), n: 1 + rng.int(rng.next() < 0.2 ? 600 : 130), k: 1 + rng.int(rng.next() < 0.3 ? 600 : 90) };
    if (s.m * s.n * s.k <= 1.5e6) out.push(s);
  }
  return out;
}
/** Decode products drawn fresh: M = 1..8, any K tail, most over the 2e5 flops that split the weight rows between threads. */
function decodeShapes(count: number): Shape[] {
  const out: Shape[] = [];
  while (out.length < count) {
    const s = { m: 1 + rng.int(8), n: 1 + rng.int(400), k: 1 + rng.int(900) };
    if (s.m * s.n * s.k <= 1e6) out.push(s);
  }
  return out;
}
const sizes = [...edge, ...randomShapes(6), ...decodeShapes(4)];
// Products big enough (>= 2e6 flops) for the AVX-512 driver to pack operands once per call and
// share them between tasks: A shared (several column blocks), B shared (several row blocks), K
// over several slices of 256, ragged edges (docs/kernels.md, "CPU GEMM").
const blocked: Shape[] = [{ m: 100, n: 300, k: 300 }, { m: 131, n: 77, k: 601 }];
// The AMX path's own cases (gemm_amx.cc), drawn fresh: skinny products (6-32 rows, K a multiple
// of 32: the weights read in place, one B tile up to 16 rows and two above, a ragged last block
// of weight rows) and packed ones (more than 32 rows, even K with a tail past the 32-value tile
// step, one or two panels split into row chunks, and many panels).
const amxShapes: Shape[] = [
  { m: 6 + rng.int(11), n: 1 + rng.int(100), k: 32 * (1 + rng.int(12)) },
  { m: 17 + rng.int(16), n: 1 + rng.int(100), k: 32 * (1 + rng.int(12)) },
  { m: 33 + rng.int(128), n: 1 + rng.int(60), k: 2 * (1 + rng.int(300)) },
  { m: 33 + rng.int(64), n: 65 + rng.int(200), k: 2 * (1 + rng.int(300)) },
];
const { best, paths } = gemmInfo();
const allPaths: GemmPathName[] = [...(paths as GemmPathName[]), 'reference'];

describe(`CPU GEMM vs float64 (paths ${allPaths.join(', ')}; auto = ${best}; seed ${seed})`, () => {
  it('auto resolves to the best path this CPU has', () => {
    const r = linearProduct('forward', new Float32Array(1), new Float32Array(1), new Float32Array(1), { m: 1, n: 1, k: 1 });
    assert.equal(r, best);
  });

  // Inputs and their float64 references are drawn once per shape and product and shared by the
  // paths (the references dominate the test's time); `old` (the accumulated-into output) is fresh.
  const fp32Cases = new Map<string, { a: Float32Array; b: Float32Array; ref: ReturnType<typeof reference> }>();
  const fp32Case = (product: LinearProductKind, s: Shape) => {
    const key = `${product} ${s.m} ${s.n} ${s.k}`;
    let c = fp32Cases.get(key);
    if (!c) {
      const a = rng.normals(product === 'forward' ? s.m * s.k : s.m * s.n);
      const b = rng.normals(product === 'backwardWeight' ? s.m * s.k : s.n * s.k);
      c = { a, b, ref: reference(product, a, b, s) };
      fp32Cases.set(key, c);
    }
    return c;
  };
  const bf16Cases = new Map<string, { x: Float32Array; wb: Uint16Array; exact: ReturnType<typeof reference>; loose: ReturnType<typeof reference> }>();
  const bf16Case = (s: Shape) => {
    const key = `${s.m} ${s.n} ${s.k}`;
    let c = bf16Cases.get(key);
    if (!c) {
      const x = rng.normals(s.m * s.k);
      const { wb, wv } = bf16Normals(s.n * s.k);
      // the products the kernel multiplies, and against the unrounded activations
      c = { x, wb, exact: reference('forward', bf16Rounded(x), wv, s), loose: reference('forward', x, wv, s) };
      bf16Cases.set(key, c);
    }
    return c;
  };

  for (const path of allPaths) {
    const shapes = path === 'amx-bf16' ? [...sizes, ...blocked, ...amxShapes] : path.startsWith('avx512') || path === 'avx2' ? [...sizes, ...blocked] : sizes;
    for (const product of ['forward', 'backwardInput', 'backwardWeight'] as const) {
      it(`${path}: ${product}, accumulate off and on, ${shapes.length} shapes`, () => {
        for (const s of shapes) {
          const { m, n, k } = s;
          const { a, b, ref } = fp32Case(product, s);
          const outLen = product === 'forward' ? m * n : product === 'backwardInput' ? m * k : n * k;
          for (const accumulate of product === 'backwardWeight' ? [true] : [false, true]) {
            const old = accumulate ? rng.normals(outLen) : null;
            const out = old ? Float32Array.from(old) : new Float32Array(outLen).fill(Number.NaN);  // overwritten, never read
            const ran = linearProduct(product, a, b, out, s, { accumulate, path });
            if (path === 'generic') assert.match(ran, /^(avx2|baseline)$/);
            else assert.equal(ran, path, 'the forced path ran');
            check(`${path} ${product} ${m}x${n}x${k} acc=${accumulate}`, out, ref.y, ref.abs, old, ref.inner, 0);
          }
        }
      });
    }

    it(`${path}: forward with bf16 weights, accumulate off and on, ${shapes.length} shapes`, () => {
      for (const s of shapes) {
        const { m, n, k } = s;
        const { x, wb, exact, loose } = bf16Case(s);
        for (const accumulate of [false, true]) {
          const old = accumulate ? rng.normals(m * n) : null;
          const out = old ? Float32Array.from(old) : new Float32Array(m * n).fill(Number.NaN);
          const ran = linearProduct('forward', x, wb, out, s, { accumulate, path });
          if (path !== 'generic') assert.equal(ran, path, 'the forced path ran');
          check(`${path} bf16 ${m}x${n}x${k} acc=${accumulate}`, out, exact.y, exact.abs, old, exact.inner, 0);
          check(`${path} bf16 vs fp32 ${m}x${n}x${k} acc=${accumulate}`, out, loose.y, loose.abs, old, loose.inner, 2 ** -7);
        }
      }
    });
  }

  // The skinny path's weight rows split between 1, 3 and 4 threads (parallel_for_affine: one
  // part per thread, claimed by its home thread first; the chunk edges fall on 4-row blocks, the
  // AVX2 4 x 3 blocks then leave 1-3 rows per chunk to the 4-row and 1-row blocks). Fresh shapes
  // over the 2e5 flops that split: M = 1..8, N not a multiple of 3 or 4, K with a tail.
  const splitPaths = allPaths.filter((p) => p.startsWith('avx512') || p === 'avx2' || p === 'amx-bf16');
  it(`decode products on 1, 3 and 4 threads (${splitPaths.join(', ')}), fp32 and bf16 weights`, { skip: splitPaths.length ? false : 'no AVX2 or AVX-512 here' }, () => {
    const threads = cpuInfo().threads;
    const shapes: Shape[] = [];
    for (let m = 1; m <= 8; m++) shapes.push({ m, n: 101 + rng.int(300), k: 201 + rng.int(500) });
    if (splitPaths.includes('amx-bf16')) shapes.push({ m: 6 + rng.int(27), n: 101 + rng.int(300), k: 32 * (7 + rng.int(15)) });  // (AMX's skinny products: K a multiple of 32)
    try {
      for (const t of [1, 3, 4]) {
        setNumThreads(t);
        for (const path of splitPaths) {
          for (const s of shapes) {
            const { a, b, ref } = fp32Case('forward', s);
            for (const accumulate of [false, true]) {
              const old = accumulate ? rng.normals(s.m * s.n) : null;
              const out = old ? Float32Array.from(old) : new Float32Array(s.m * s.n).fill(Number.NaN);
              linearProduct('forward', a, b, out, s, { accumulate, path });
              check(`${path} ${t} threads ${s.m}x${s.n}x${s.k} acc=${accumulate}`, out, ref.y, ref.abs, old, ref.inner, 0);
            }
            const { x, wb, exact } = bf16Case(s);
            const out = new Float32Array(s.m * s.n).fill(Number.NaN);
            linearProduct('forward', x, wb, out, s, { path });
            check(`${path} bf16 ${t} threads ${s.m}x${s.n}x${s.k}`, out, exact.y, exact.abs, null, exact.inner, 0);
          }
        }
      }
    } finally {
      setNumThreads(threads);
    }
  });

  // Weights of 4 MiB and more prefetch the block of rows ahead (gemm_driver.h,
  // kSkinnyPrefetchMinBytes): the same values, but the prefetching blocks (and the last blocks,
  // whose block ahead would pass row N, so none) only run on such sizes. k is not a whole number
  // of vectors, so that the masked tail follows a prefetching loop.
  it(`decode products with weights past the prefetch threshold (${splitPaths.join(', ')}), fp32 and bf16`, { skip: splitPaths.length ? false : 'no AVX2 or AVX-512 here' }, () => {
    // one fp32 and one bf16 weight (>= 4.4 MB each) for every M: fresh weights per M cost ~1 s
    const n = 2200 + rng.int(300), k = 1000 + rng.int(100);
    const w = rng.normals(n * k);
    const { wb, wv } = bf16Normals(n * k);
    for (const m of [1, 3, 4, 8]) {
      const s: Shape = { m, n, k };
      const a = rng.normals(m * k);
      const ref = reference('forward', a, w, s);
      const exact = reference('forward', bf16Rounded(a), wv, s);
      for (const path of splitPaths) {
        const out = new Float32Array(m * n).fill(Number.NaN);
        linearProduct('forward', a, w, out, s, { path });
        check(`${path} ${m}x${n}x${k}`, out, ref.y, ref.abs, null, ref.inner, 0);
        const ob = new Float32Array(m * n).fill(Number.NaN);
        linearProduct('forward', a, wb, ob, s, { path });
        check(`${path} bf16 ${m}x${n}x${k}`, ob, exact.y, exact.abs, null, exact.inner, 0);
      }
    }
  });

  // AMX's skinny products read the weights in place, a block of 32 rows at a time, and prefetch
  // the next block into L2 from 4 MiB of weights on (gemm_amx.cc): K a multiple of 32, one B tile
  // (M <= 16) and two, the last blocks (none ahead, then a zero-padded copy for N % 32 rows).
  it('AMX decode products with weights past the prefetch threshold, bf16', { skip: paths.includes('amx-bf16') ? false : 'no AMX here' }, () => {
    const n = 2200 + rng.int(300), k = 32 * (32 + rng.int(4));
    const { wb, wv } = bf16Normals(n * k);
    for (const m of [6 + rng.int(11), 17 + rng.int(16)]) {
      const s: Shape = { m, n, k };
      const a = rng.normals(m * k);
      const exact = reference('forward', bf16Rounded(a), wv, s);
      const ob = new Float32Array(m * n).fill(Number.NaN);
      assert.equal(linearProduct('forward', a, wb, ob, s, { path: 'amx-bf16' }), 'amx-bf16');
      check(`amx-bf16 bf16 ${m}x${n}x${k}`, ob, exact.y, exact.abs, null, exact.inner, 0);
    }
  });

  // gemm.h's kSkinnyRows contract, which the training loss relies on to merge its logits
  // chunks (model.cc): a forward product's rows split into calls of more than 32 rows each get
  // the same bits as in one call, on every path and thread count; fresh sizes with a K tail.
  it(`a forward product split into calls of more than 32 rows gives the same bits (${allPaths.join(', ')})`, () => {
    const threads = cpuInfo().threads;
    const parts = [33 + rng.int(40), 33 + rng.int(40), 33 + rng.int(40)];
    const m = parts.reduce((x, y) => x + y), n = 200 + rng.int(400), k = 100 + rng.int(300);
    const x = rng.normals(m * k), w = rng.normals(n * k), wb = bf16Normals(n * k).wb;
    const kb = 2 * (50 + rng.int(150));  // (even: the AMX packed path's K; odd K goes to vdpbf16ps)
    const xb = rng.normals(m * kb), wbe = bf16Normals(n * kb).wb;
    try {
      for (const t of [1, 3]) {
        setNumThreads(t);
        for (const path of allPaths) {
          for (const [weights, kk, xx] of [[w, k, x], [wb, k, x], [wbe, kb, xb]] as const) {
            const whole = new Float32Array(m * n), split = new Float32Array(m * n);
            linearProduct('forward', xx, weights, whole, { m, n, k: kk }, { path });
            let r0 = 0;
            for (const rows of parts) {
              linearProduct('forward', xx.subarray(r0 * kk, (r0 + rows) * kk), weights, split.subarray(r0 * n, (r0 + rows) * n), { m: rows, n, k: kk }, { path });
              r0 += rows;
            }
            const kind = weights instanceof Uint16Array ? 'bf16' : 'fp32';
            assert.deepEqual(split, whole, `${path} ${kind}, ${t} threads, ${parts.join(' + ')} x ${n} x ${kk}; seed ${seed}`);
          }
        }
      }
    } finally {
      setNumThreads(threads);
    }
  });

  // AMX's products whose paired X passes 2 MiB pack W whole first and run row chunks x panel
  // groups (gemm_amx.cc): the same bits as the same rows in two calls under that size (the
  // per-panel tasks, checked against float64 above), every output written, and spot checks
  // against float64 sums.
  it('AMX: a bf16 product with X past 2 MiB (W packed whole) gives the bits of two smaller calls', { skip: paths.includes('amx-bf16') ? false : 'no AMX here' }, () => {
    const m = 1030 + rng.int(40), k = 1024, n = 257 + rng.int(40), h = 512 + rng.int(8);
    const x = rng.normals(m * k);
    const { wb, wv } = bf16Normals(n * k);
    const whole = new Float32Array(m * n).fill(Number.NaN), split = new Float32Array(m * n).fill(Number.NaN);
    linearProduct('forward', x, wb, whole, { m, n, k }, { path: 'amx-bf16' });
    linearProduct('forward', x.subarray(0, h * k), wb, split.subarray(0, h * n), { m: h, n, k }, { path: 'amx-bf16' });
    linearProduct('forward', x.subarray(h * k), wb, split.subarray(h * n), { m: m - h, n, k }, { path: 'amx-bf16' });
    assert.deepEqual(whole, split, `${m} x ${n} x ${k} against ${h} + ${m - h} rows; seed ${seed}`);
    for (let t = 0; t < 64; t++) {
      const i = rng.int(m), j = rng.int(n);
      let sum = 0, abs = 0;
      for (let q = 0; q < k; q++) {
        const p = bf16Value(bf16Bits(x[i * k + q]!)) * wv[j * k + q]!;
        sum += p;
        abs += Math.abs(p);
      }
      assert.ok(Math.abs(whole[i * n + j]! - sum) <= k * U * abs, `y[${i}, ${j}] = ${whole[i * n + j]}, float64 ${sum}; seed ${seed}`);
    }
  });

  // The packed driver's tasks handed out one at a time from a counter to one runner per thread
  // (gemm_driver.cc), on 1, 3 and 4 threads: the blocked shapes, one whose 12 column blocks do not
  // split evenly between 8 chunks (the qwen3 down dx grid, scaled down), and a fresh one.
  it(`packed products on 1, 3 and 4 threads (${splitPaths.join(', ')}), the three products and the bf16 forward`, { skip: splitPaths.length ? false : 'no AVX2 or AVX-512 here' }, () => {
    const threads = cpuInfo().threads;
    const shapes: Shape[] = [...blocked, { m: 40, n: 3072, k: 40 }, { m: 40 + rng.int(200), n: 200 + rng.int(900), k: 30 + rng.int(300) }];
    try {
      for (const t of [1, 3, 4]) {
        setNumThreads(t);
        for (const path of splitPaths) {
          for (const product of ['forward', 'backwardInput', 'backwardWeight'] as const) {
            for (const s of shapes) {
              const { a, b, ref } = fp32Case(product, s);
              const outLen = product === 'forward' ? s.m * s.n : product === 'backwardInput' ? s.m * s.k : s.n * s.k;
              const old = product === 'backwardWeight' ? rng.normals(outLen) : null;
              const out = old ? Float32Array.from(old) : new Float32Array(outLen).fill(Number.NaN);
              linearProduct(product, a, b, out, s, { accumulate: old !== null, path });
              check(`${path} ${t} threads ${product} ${s.m}x${s.n}x${s.k}`, out, ref.y, ref.abs, old, ref.inner, 0);
            }
          }
          for (const s of shapes) {  // the bf16 forward (AMX's own tasks: panels and row chunks)
            const { x, wb, exact } = bf16Case(s);
            const out = new Float32Array(s.m * s.n).fill(Number.NaN);
            linearProduct('forward', x, wb, out, s, { path });
            check(`${path} bf16 ${t} threads ${s.m}x${s.n}x${s.k}`, out, exact.y, exact.abs, null, exact.inner, 0);
          }
        }
      }
    } finally {
      setNumThreads(threads);
    }
  });

  // A shared packed operand past the threads' kept buffers (64 MiB) comes from the process's cache
  // of big buffers (gemm_driver.cc, "Big buffers"), which hands back blocks earlier products
  // wrote: the head's input gradient at Qwen3's vocabulary packs 110 x 151,936 dlogits so. Here
  // dy [256, 70,000] packs to 18.5 M floats (AVX-512), shared by the 2 column blocks of k = 192 on 2 threads;
  // the cache is dirtied first by the same product on other values. The result must be the bits of
  // the same rows in two calls of 128 (9.3 M floats: the thread's kept buffer) and of one thread
  // (no shared packing at all).
  // (The driver's code, not a path's: one path, the best, keeps the test at ~1 s.)
  it(`a product whose shared packed operand comes from the cache of big buffers (${splitPaths[0] ?? 'none'}); memory() reports it, releaseHeap empties it`, { skip: splitPaths.length ? false : 'no AVX2 or AVX-512 here' }, async () => {
    const threads = cpuInfo().threads;
    const m = 256, n = 70_000, k = 192;
    const uniform = (len: number) => {
      const a = new Float32Array(len);
      for (let i = 0; i < len; i++) a[i] = rng.next() - 0.5;
      return a;
    };
    const dy = uniform(m * n), w = uniform(n * k);
    try {
      for (const path of splitPaths.slice(0, 1)) {
        setNumThreads(2);
        const dirty = new Float32Array(m * k);
        linearProduct('backwardInput', dy.reverse(), w, dirty, { m, n, k }, { path });
        dy.reverse();
        const whole = new Float32Array(m * k).fill(Number.NaN), split = new Float32Array(m * k).fill(Number.NaN), one = new Float32Array(m * k).fill(Number.NaN);
        linearProduct('backwardInput', dy, w, whole, { m, n, k }, { path });
        for (const r0 of [0, m / 2]) linearProduct('backwardInput', dy.subarray(r0 * n, (r0 + m / 2) * n), w, split.subarray(r0 * k, (r0 + m / 2) * k), { m: m / 2, n, k }, { path });
        setNumThreads(1);
        linearProduct('backwardInput', dy, w, one, { m, n, k }, { path });
        assert.deepEqual(whole, split, `${path}: one call against rows in two calls; seed ${seed}`);
        assert.deepEqual(whole, one, `${path}: 2 threads against 1; seed ${seed}`);
        assert.notDeepEqual(whole, dirty);
      }
      // the cache is the process's: any CPU model reports it: at least the packed dy's m x n =
      // 17.92 M floats (the AVX-512 packing pads them to 18.5 M; on a Zen 3, AVX2 only, the
      // cache held 70 MiB, 18.35 M floats)
      const model = await PolicyModel.random(presets.tiny, { seed });
      assert.ok(model.memory().matmulCache >= m * n * 4, `matmulCache ${model.memory().matmulCache}, less than the ${m} x ${n} floats of the packed dy`);
      await model.generate([[1, 2, 3]], { maxNewTokens: 1, temperature: 0, releaseHeap: true });
      assert.equal(model.memory().matmulCache, 0);
    } finally {
      setNumThreads(threads);
    }
  });

  // The cache itself (test/native/call_buf_check.cc, compiled with gemm_driver.cc): sizes,
  // alignment, smallest-fit reuse, the limit and its evictions, four threads at once.
  it('the cache of big buffers: reuse, limit, eviction, threads', { skip: haveCxx ? false : `no C++ compiler (${cxx})` }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-callbuf-'));
    try {
      const exe = join(dir, 'call-buf-check');
      compileCached({ compiler: cxx, flags: ['-O2', '-std=c++17', '-pthread', `-I${join(root, 'native/cpu')}`, `-I${join(root, 'native/model')}`, `-I${join(root, 'native/include')}`],
        sources: [join(root, 'test/native/call_buf_check.cc'), join(root, 'native/model/gemm_driver.cc'), join(root, 'native/cpu/threads.cc'), join(root, 'native/cpu/heap.cc')], out: exe, oneUnit: true });
      const r = spawnSync(exe, [String(seed)], { encoding: 'utf8', timeout: 120_000 });
      assert.equal(r.signal, null, 'timed out or killed');
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /^ok \d+ checks/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('MURPHY_GEMM_PATH sets the path auto takes (avx2 here), and a bad name fails with one line', async () => {
    const native = fileURLToPath(new URL('../../lib/native.ts', import.meta.url));
    const code = `import { linearProduct } from ${JSON.stringify(native)};\n`
      + 'const a = Float32Array.from({ length: 12 }, (_, i) => i - 5), b = Float32Array.from({ length: 12 }, (_, i) => 1 / (i + 1)), y = new Float32Array(9);\n'
      + "process.stdout.write(JSON.stringify({ ran: linearProduct('forward', a, b, y, { m: 3, n: 3, k: 4 }), y: Array.from(y) }));";
    const run = (value: string) => new Promise<{ out: string; err: string }>((resolve) => {
      execFile(process.execPath, [...TS_LOADER, '--input-type=module', '-e', code], { env: { ...process.env, MURPHY_GEMM_PATH: value } },
        (_e, out, err) => resolve({ out: String(out), err: String(err) }));
    });
    const [good, bad] = await Promise.all([run('avx2'), run('avx3')]);
    const r = JSON.parse(good.out) as { ran: string; y: number[] };
    assert.equal(r.ran, paths.includes('avx2') ? 'avx2' : 'baseline', good.err);  // a CPU without AVX2 falls back
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 3; j++) {
        let want = 0;
        for (let t = 0; t < 4; t++) want += (i * 4 + t - 5) * (1 / (j * 4 + t + 1));
        assert.ok(Math.abs(r.y[i * 3 + j] - want) <= 1e-5 * (1 + Math.abs(want)), `y[${i},${j}] = ${r.y[i * 3 + j]}, want ${want}`);
      }
    }
    assert.match(bad.err, /MURPHY_GEMM_PATH must be 'auto', .*'avx2'.*; got 'avx3'/);
  });

  // MURPHY_AMX=0 makes a process behave as on a kernel that refuses the tile state (Linux before
  // 5.16): no amx-bf16, and on a CPU built with AMX Auto takes the widening avx512 path, whose
  // packed bf16 products beat vdpbf16ps there (docs/kernels.md, "bf16 on AMX"); avx512-bf16 can
  // still be forced. Without AMX the variable changes nothing.
  it('MURPHY_AMX=0: no AMX, and Auto widens bf16 where the CPU has AMX; otherwise nothing changes', async () => {
    const native = fileURLToPath(new URL('../../lib/native.ts', import.meta.url));
    const code = `import { cpuInfo, gemmInfo } from ${JSON.stringify(native)};\n`
      + 'process.stdout.write(JSON.stringify({ amx: cpuInfo().amxBf16, ...gemmInfo() }));';
    const child = await new Promise<{ amx: boolean; best: string; paths: string[] }>((resolve, reject) => {
      execFile(process.execPath, [...TS_LOADER, '--input-type=module', '-e', code], { env: { ...process.env, MURPHY_AMX: '0' } },
        (e, out, err) => (e ? reject(new Error(`${e.message}: ${String(err)}`)) : resolve(JSON.parse(String(out)))));
    });
    assert.equal(child.amx, false);
    if (best === 'amx-bf16') {
      assert.equal(child.best, 'avx512');
      assert.deepEqual(child.paths, paths.filter((p) => p !== 'amx-bf16'));
    } else {
      assert.deepEqual({ best: child.best, paths: child.paths }, { best, paths });
    }
  });

  it('alignedArray places arrays of any length on 64-byte boundaries (as the model\'s weights are)', () => {
    const plain = [1, 3, 17, 1000].map((n) => addressMod64(new Float32Array(n)));
    for (const n of [1, 3, 17, 1000, 1 + rng.int(5000)]) {
      const f = alignedArray(Float32Array, n), h = alignedArray(Uint16Array, n);
      assert.equal(f.length, n);
      assert.equal(h.length, n);
      assert.equal(addressMod64(f), 0, `Float32Array(${n})`);
      assert.equal(addressMod64(h), 0, `Uint16Array(${n})`);
      assert.ok(f.every((x) => x === 0) && h.every((x) => x === 0));
    }
    assert.ok(plain.every((m) => m >= 0 && m < 64 && m % 4 === 0), `plain arrays at ${plain.join(', ')} mod 64`);
    assert.throws(() => addressMod64({} as ArrayBufferView), /addressMod64: pass a typed array/);
  });

  it('refuses bad input with one line naming it', () => {
    const z = new Float32Array(6);
    assert.throws(() => linearProduct('forward', z, z, new Float32Array(5), { m: 2, n: 2, k: 3 }), /'out' has 5 elements but 4/);
    assert.throws(() => linearProduct('backwardInput', z, new Uint16Array(6), z, { m: 2, n: 3, k: 2 }), /bf16 weights.*'forward' product only/);
    assert.throws(() => linearProduct('forward', z, z, z, { m: 2, n: 3, k: 2 }, { path: 'fast' as GemmPathName }), /'path' must be/);
    assert.throws(() => linearProduct('backwardWeight', z, z, z, { m: 1, n: 6, k: 1 }, { accumulate: false }), /always accumulates/);
    for (const repeat of [0, 1.5, -1, 1e6 + 1, Number.NaN]) {
      assert.throws(() => linearProduct('forward', z, z, z, { m: 2, n: 3, k: 2 }, { repeat }), /'repeat' must be an integer in \[1, 1000000\]/);
    }
    assert.throws(() => linearProduct('sideways' as LinearProductKind, z, z, z, { m: 2, n: 3, k: 2 }), /'product' must be 'forward', 'backwardInput' or 'backwardWeight'; got "sideways"/);
    for (const m of [-1, 2.5, Number.NaN, 2 ** 31 + 1]) {
      assert.throws(() => linearProduct('forward', z, z, z, { m, n: 3, k: 2 }), /'m' must be an integer in \[0, 2147483648\]/);
    }
    assert.throws(() => linearProduct('forward', z, z, z, { m: 2, n: 3, k: 2 }, { accumulate: 1 as unknown as boolean }), /'accumulate' must be true or false; got 1/);
  });

  it('the addon checks its positional arguments itself (a caller that skips lib/native.ts gets an error, not a bad read or write)', () => {
    const raw = nativeAddon().linearProduct!;
    const z = new Float32Array(6);
    const call = (...args: unknown[]) => () => (raw as unknown as (...a: unknown[]) => string)(...args);
    assert.equal(call('forward', z, z, new Float32Array(4), 2, 2, 3, false, 'auto', 1)(), nativeAddon().gemmInfo!().best);
    const refusals: [unknown[], RegExp][] = [
      [['forward', z, z, new Float32Array(5), 2, 2, 3, false, 'auto', 1], /'out' has 5 elements but 4 are needed/],
      [['forward', z, new Float32Array(5), z, 3, 2, 2, false, 'auto', 1], /'b' has 5 elements but 4 are needed/],
      [['forward', [1, 2, 3, 4, 5, 6], z, z, 2, 3, 2, false, 'auto', 1], /'a' must be a Float32Array/],
      [['forward', new Int32Array(6), z, z, 2, 3, 2, false, 'auto', 1], /'a' must be a Float32Array/],
      [['forward', z, z, z, 2, 3, 2, 0, 'auto', 1], /'accumulate' must be true or false/],
      [['forward', z, z, z, 2, 3, 2, false, 7, 1], /'path' must be a string/],
      [['forward', z, z, z, 2, 3, 2, false, 'fast', 1], /'path' must be 'auto'/],
      [['forward', z, z, z, 2, 3, 2, false, 'auto', 0], /'repeat' must be an integer in \[1, 1000000\]/],
      [['forward', z, z, z, 2, 3, 2, false, 'auto'], /'repeat' must be a number/],
      [['forward', z, z, z, -2, 3, 2, false, 'auto', 1], /'m' must be an integer/],
      [[{ product: 'forward', a: z, b: z, out: z, m: 2, n: 3, k: 2, accumulate: false, path: 'auto' }], /'product' must be 'forward'.*got ''/],
      [['backwardWeight', z, z, z, 1, 6, 1, false, 'auto', 1], /always accumulates/],
    ];
    for (const [args, re] of refusals) assert.throws(call(...args), re, JSON.stringify(args.map((a) => (ArrayBuffer.isView(a) ? a.constructor.name : a))));
    // A typed array whose buffer was transferred away (detached) is refused by name.
    const gone = new Float32Array(6);
    structuredClone(gone.buffer, { transfer: [gone.buffer] });
    assert.throws(call('forward', gone, z, z, 2, 3, 2, false, 'auto', 1), /'a' is a detached buffer/);
    // A view at an offset into a larger buffer reads from its own first element.
    const big = new Float32Array(16).fill(0), view = big.subarray(5, 11);
    view.set([1, 2, 3, 4, 5, 6]);
    const one = new Float32Array(3).fill(1), out = new Float32Array(2);
    call('forward', view, one, out, 2, 1, 3, false, 'reference', 1)();
    assert.deepEqual(Array.from(out), [6, 15]);
  });

  it('repeat runs the product that many times (an accumulating product adds it that many times)', () => {
    // Small integers: every sum is exact in fp32 on every path, so the comparison is exact.
    const m = 3, n = 5, k = 7, reps = 1 + rng.int(9);
    const a = Float32Array.from({ length: m * k }, (_, i) => (i % 5) - 2);
    const b = Float32Array.from({ length: n * k }, (_, i) => (i % 3) - 1);
    const once = new Float32Array(m * n), many = new Float32Array(m * n);
    linearProduct('forward', a, b, once, { m, n, k });
    linearProduct('forward', a, b, many, { m, n, k }, { accumulate: true, repeat: reps });
    assert.deepEqual(Array.from(many), Array.from(once, (x) => x * reps), `repeat ${reps}`);
    const plain = new Float32Array(m * n).fill(7);
    linearProduct('forward', a, b, plain, { m, n, k }, { repeat: reps });
    assert.deepEqual(Array.from(plain), Array.from(once), 'without accumulate each run overwrites');
  });
});
