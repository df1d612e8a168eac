// The GPU engine's decoder kernels (native/gpu/kernels/model_kernels.h), run on the CPU by the
// harness (the same kernel code over the same grid, block by block, phase by phase), against
// their spec, the CPU ops of native/model/, on fresh random inputs. Both storage types (f32,
// bf16), blocks and threads in forward and in reverse order (identical bits required: a
// kernel whose threads depend on each other within a phase, or whose blocks overlap, differs).
// This checks the index arithmetic, masking and reductions; what only a GPU can show (races
// between real threads, launch limits, speed) is left to `npm run test:gpu` on a device.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kernelHarness } from '../../lib/native.js';
import { Rng, testSeed, worstRatio } from '../helpers/random.js';

type Out = Record<string, Float32Array>;
interface Case {
  op: string;
  dtype?: 'f32' | 'bf16';
  order?: 'forward' | 'reverse';
  block?: number;
  [k: string]: unknown;
}
const harness = (c: Case): { kernel: Out; reference: Out } => kernelHarness(c);

const seed = testSeed('kernel-harness');
const rng = new Rng(seed);
const BF16_RTOL = 2 ** -8; // the kernel's output is rounded to bf16 once (half an ulp is 2^-9)

function check(c: Case, tol: { f32: [number, number]; bf16: [number, number] }): void {
  for (const dtype of ['f32', 'bf16'] as const) {
    const fwd = harness({ ...c, dtype, order: 'forward' });
    const rev = harness({ ...c, dtype, order: 'reverse' });
    assert.deepEqual(Object.keys(fwd.kernel).sort(), Object.keys(fwd.reference).sort());
    for (const name of Object.keys(fwd.reference)) {
      const k = fwd.kernel[name]!, r = fwd.reference[name]!;
      assert.equal(k.length, r.length);
      assert.ok(k.every(Number.isFinite), `${c.op} ${dtype} ${name}: non-finite output (seed ${seed})`);
      assert.deepEqual(rev.kernel[name], k, `${c.op} ${dtype} ${name}: reverse order changed the bits (seed ${seed})`);
      const [atol, rtol] = tol[dtype];
      const w = worstRatio(k, r, atol, rtol);
      assert.ok(w.ratio <= 1, `${c.op} ${dtype} ${name}[${w.index}]: kernel ${k[w.index]} vs CPU op ${r[w.index]} (ratio ${w.ratio.toFixed(2)}, seed ${seed})`);
    }
  }
}
const blockSize = (): number => [32, 64, 128, 256][rng.int(4)]!;

describe('GPU decoder kernels through the CPU harness, against native/model CPU ops', () => {
  it('RMSNorm forward (rows of a length that is not a multiple of the block)', () => {
    const rows = 3 + rng.int(6), n = 100 + rng.int(900);
    const x = rng.normals(rows * n, 2), w = rng.normals(n, 1);
    check({ op: 'rmsnorm_forward', rows, n, eps: 1e-6, block: blockSize(), inputs: { x, w } },
      { f32: [1e-6, 1e-5], bf16: [1e-6, BF16_RTOL] });
  });
  it('RMSNorm backward (input and weight gradients)', () => {
    const rows = 3 + rng.int(6), n = 100 + rng.int(900);
    const x = rng.normals(rows * n, 2), w = rng.normals(n, 1), dy = rng.normals(rows * n, 1);
    const rstd = harness({ op: 'rmsnorm_forward', rows, n, eps: 1e-6, inputs: { x, w } }).reference.rstd!;
    check({ op: 'rmsnorm_backward', rows, n, block: blockSize(), inputs: { x, w, dy, rstd } },
      { f32: [1e-5, 1e-4], bf16: [1e-5, BF16_RTOL + 1e-4] });
  });
  it('residual add fused with RMSNorm (Qwen3: h = x + d, y = norm(h)) and RMSNorm fused with the add (OLMo-2: h = x + norm(a))', () => {
    const rows = 3 + rng.int(6), n = 100 + rng.int(900);
    const x = rng.normals(rows * n, 2), d = rng.normals(rows * n, 1), w = rng.normals(n, 1);
    check({ op: 'residual_rmsnorm_forward', rows, n, eps: 1e-6, block: blockSize(), inputs: { x, d, w } },
      { f32: [1e-6, 1e-5], bf16: [1e-6, BF16_RTOL] });
    check({ op: 'rmsnorm_residual_forward', rows, n, eps: 1e-6, block: blockSize(), inputs: { x, a: d, w } },
      { f32: [1e-5, 1e-5], bf16: [1e-5, BF16_RTOL] });
  });
  it('RMSNorm as Qwen3\'s per-head q/k norm (rows = tokens x heads, n = head_dim)', () => {
    const tokens = 5 + rng.int(10), heads = 1 + rng.int(8), n = 128;
    check({ op: 'rmsnorm_forward', rows: tokens * heads, n, eps: 1e-6, block: 128, inputs: { x: rng.normals(tokens * heads * n, 1), w: rng.normals(n, 1) } },
      { f32: [1e-6, 1e-5], bf16: [1e-6, BF16_RTOL] });
  });
  for (const op of ['rope_forward', 'rope_backward']) {
    it(`RoPE ${op.split('_')[1]} (Hugging Face rotate_half; random positions)`, () => {
      const tokens = 2 + rng.int(10), heads = 1 + rng.int(4), headDim = [32, 64, 128][rng.int(3)]!, maxPos = 4096;
      const pos = Int32Array.from({ length: tokens }, () => rng.int(maxPos));
      check({ op, tokens, heads, headDim, maxPos, theta: 1e6, block: blockSize(), ints: pos, inputs: { x: rng.normals(tokens * heads * headDim, 1) } },
        { f32: [1e-6, 1e-5], bf16: [1e-6, BF16_RTOL] });
    });
  }
  it('SwiGLU forward and backward', () => {
    const n = 1000 + rng.int(3000);
    const g = rng.normals(n, 3), u = rng.normals(n, 1), da = rng.normals(n, 1);
    check({ op: 'swiglu_forward', n, block: blockSize(), inputs: { g, u } }, { f32: [1e-6, 1e-5], bf16: [1e-6, BF16_RTOL + 1e-5] });
    check({ op: 'swiglu_backward', n, block: blockSize(), inputs: { g, u, da } }, { f32: [1e-6, 1e-5], bf16: [1e-6, BF16_RTOL + 1e-5] });
  });
  it('embedding gather and gradient scatter (repeated ids accumulate in token order)', () => {
    const vocab = 20 + rng.int(40), dim = 50 + rng.int(300), tokens = 30 + rng.int(40);
    const ids = Int32Array.from({ length: tokens }, () => rng.int(Math.min(vocab, 8))); // many repeats
    check({ op: 'embedding_forward', vocab, dim, tokens, block: blockSize(), ints: ids, inputs: { table: rng.normals(vocab * dim, 1) } },
      { f32: [0, 0], bf16: [0, 0] }); // a copy: exact
    check({ op: 'embedding_backward', vocab, dim, tokens, block: blockSize(), ints: ids, inputs: { dy: rng.normals(tokens * dim, 1) } },
      { f32: [0, 0], bf16: [0, 0] }); // the same additions in the same order: exact
  });
  it('cuBLASLt layout plan of the three linear products (row-major tensors, column-major BLAS), executed on the CPU', () => {
    const M = 1 + rng.int(40), N = 1 + rng.int(40), K = 1 + rng.int(40);
    const x = rng.normals(M * K, 1), w = rng.normals(N * K, 1), dy = rng.normals(M * N, 1);
    for (const accumulate of [false, true]) {
      const cases: [string, Record<string, Float32Array>][] = [
        ['lt_linear_forward', { x, w, y: rng.normals(M * N, 1) }],
        ['lt_linear_backward_input', { dy, w, dx: rng.normals(M * K, 1) }],
        ['lt_linear_backward_weight', { dy, x, dw: rng.normals(N * K, 1) }], // always accumulates
      ];
      for (const [op, inputs] of cases) {
        const r = harness({ op, rows: M, n: N, dim: K, accumulate, inputs });
        const w8 = worstRatio(r.kernel.out!, r.reference.out!, 1e-5, 1e-5);
        assert.ok(w8.ratio <= 1, `${op} M=${M} N=${N} K=${K} accumulate=${accumulate}: [${w8.index}] plan ${r.kernel.out![w8.index]} vs CPU op ${r.reference.out![w8.index]} (seed ${seed})`);
      }
    }
  });
  it('bad cases are one clear error', () => {
    assert.throws(() => harness({ op: 'rmsnorm_forward', rows: 2, n: 4, inputs: { x: new Float32Array(8) } }), /kernelHarness\(rmsnorm_forward\): missing input 'w'/);
    assert.throws(() => harness({ op: 'embedding_forward', vocab: 4, dim: 2, tokens: 1, ints: Int32Array.of(4), inputs: { table: new Float32Array(8) } }), /token id 4 outside \[0, vocab\)/);
    assert.throws(() => harness({ op: 'swiglu_forward', n: 4, block: 2048, inputs: { g: new Float32Array(4), u: new Float32Array(4) } }), /block size 2048 outside 1\.\.1024/);
    assert.throws(() => harness({ op: 'attention' }), /unknown op 'attention'/);
  });
});
