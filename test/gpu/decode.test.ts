// The device decode kernels (native/gpu/decode_kernels.cu: KV append into a paged pool, paged
// attention, sampling) on a device, against their CPU spec (a copy loop, native/model's
// attention against a KV cache, the CPU sampler of generate()) and against the CPU harness run
// of the same kernel code, on fresh random inputs. Skipped without a device (saying why).
// MURPHY_GPU_DRYRUN=1 runs the test logic with the harness in place of the GPU, at smaller sizes
// (MURPHY_GPU_SMALL=1: the smaller sizes on the device, for compute-sanitizer).
// Written before any GPU was available to its author: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Rng } from '../helpers/random.js';
import { announceSeed, dryRun, gpuOnly, onGpu, worst, type KernelCaseInput as Case, type KernelOutputs as Out } from './common.js';

const seed = announceSeed('gpu/decode');
const rng = new Rng(seed);

/** Small sizes: in a dry run, and under compute-sanitizer (MURPHY_GPU_SMALL=1, scripts/gpu-check.sh). */
const small = dryRun || process.env.MURPHY_GPU_SMALL === '1';

// Block sizes as the launchers (decode_kernels_cuda.h), so the harness run sums in the GPU's order.
type Tol = Record<string, { f32: [number, number]; bf16: [number, number] }>;
function check(c: Case, tol: Tol): Record<'f32' | 'bf16', Out> {
  const got = {} as Record<'f32' | 'bf16', Out>;
  for (const dtype of ['f32', 'bf16'] as const) {
    const r = onGpu({ ...c, dtype });
    for (const name of Object.keys(r.reference)) {
      const k = r.kernel[name]!;
      assert.equal(k.length, r.reference[name]!.length, `${c.op} ${dtype} ${name}: length`);
      const [atol, rtol] = tol[name]![dtype];
      for (const [what, ref] of [['CPU spec', r.reference[name]!], ['harness', r.harness[name]!]] as const) {
        const w = worst(k, ref, atol, rtol);
        assert.ok(w.ratio <= 1, `${c.op} ${dtype} ${name}[${w.index}]: GPU ${k[w.index]} vs ${what} ${ref[w.index]} (ratio ${w.ratio.toFixed(2)}, seed ${seed})`);
      }
    }
    got[dtype] = r.kernel;
  }
  return got;
}

const BF16_RTOL = 2 ** -8;
const ATTN_TOL: Tol = { out: { f32: [1e-5, 1e-4], bf16: [1e-5, BF16_RTOL + 1e-4] }, lse: { f32: [1e-5, 1e-5], bf16: [1e-5, 1e-5] } };
const SAMPLE_TOL: Tol = { token: { f32: [0, 0], bf16: [0, 0] }, logp: { f32: [1e-6, 1e-6], bf16: [1e-6, 1e-6] } };

function shuffled(n: number): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

describe('GPU decode kernels vs the CPU spec and the CPU harness', () => {
  it('KV append (exact)', gpuOnly, () => {
    const G = 8, D = 128, bs = 16, nBlocks = small ? 16 : 512, nNew = small ? 40 : 2000;
    const slots = Int32Array.from(shuffled(nBlocks * bs).slice(0, nNew), (s) => (rng.int(20) === 0 ? -1 : s));
    const pool = nBlocks * bs * G * D;
    const exact = { f32: [0, 0] as [number, number], bf16: [0, 0] as [number, number] };
    check({
      op: 'kv_append', block: 256, params: { kvHeads: G, headDim: D, nBlocks, blockSize: bs },
      inputs: { k: rng.normals(nNew * G * D), v: rng.normals(nNew * G * D), kPool: rng.normals(pool), vPool: rng.normals(pool) }, intInputs: { slots },
    }, { kPool: exact, vPool: exact });
  });

  it('paged attention: contexts to 2,600 over several partitions, shared prefix blocks, decode and chunks, GQA 16/8 x 128', gpuOnly, () => {
    const H = 16, G = 8, D = 128, bs = 16, partition = small ? 64 : 512;
    // (kernelCuda also runs the harness and the CPU spec: a few seconds at these sizes)
    const ctx = small ? [200, 131, 65] : [2000 + rng.int(600), 1200 + rng.int(300), 1 + rng.int(400), 1030];
    const qlen = ctx.map((n, i) => (i % 2 ? 1 : Math.min(n, 4)));
    const maxBlocks = Math.max(...ctx.map((n) => Math.ceil(n / bs)));
    const shared = Math.min(...ctx.map((n) => Math.floor((n - 1) / bs)));
    const nBlocks = ctx.reduce((s, n) => s + Math.ceil(n / bs), 0) + 4;
    const free = shuffled(nBlocks);
    const table = new Int32Array(ctx.length * maxBlocks).fill(-1);
    ctx.forEach((n, s) => {
      for (let b = 0; b < Math.ceil(n / bs); b++) table[s * maxBlocks + b] = s > 0 && b < shared ? table[b]! : free.pop()!;
    });
    const nNew = qlen.reduce((a, b) => a + b, 0), pool = nBlocks * bs * G * D;
    check({
      op: 'paged_attention', block: 128, params: { heads: H, kvHeads: G, headDim: D, blockSize: bs, nBlocks, maxBlocks, partition },
      inputs: { q: rng.normals(nNew * H * D), kPool: rng.normals(pool), vPool: rng.normals(pool) },
      intInputs: { blockTable: table, contextLens: Int32Array.from(ctx), queryLens: Int32Array.from(qlen) },
    }, ATTN_TOL);
  });

  it('sampling: the CPU sampler\'s tokens for the same seeds, Qwen3-sized vocabulary, mixed options per row', gpuOnly, () => {
    // (kernelCuda also runs the harness on the CPU: about 0.3 s per row of this vocabulary)
    const V = small ? 2000 : 151_936, rows = small ? 12 : 16;
    const o = Array.from({ length: rows }, (_, r) => [[0, 0, 1, 0], [1, 0, 1, 0], [0.7, 50, 0.95, 0], [1, 0, 0.9, 0.05], [0.6, 20, 1, 0]][r % 5]!);
    check({
      op: 'sample', block: 512, params: { vocab: V },
      inputs: { logits: rng.normals(rows * V, 3), temperature: Float32Array.from(o, (x) => x[0]!), topP: Float32Array.from(o, (x) => x[2]!), minP: Float32Array.from(o, (x) => x[3]!) },
      intInputs: { topK: Int32Array.from(o, (x) => x[1]!), seed: Int32Array.from(o, () => rng.int(2 ** 31)), sampleIndex: Int32Array.from(o, () => rng.int(8)), step: Int32Array.from(o, () => rng.int(2048)) },
    }, SAMPLE_TOL);
  });

  it('sampling: chi-square on a small vocabulary over many seeds (fixed seeds, significance 0.001)', gpuOnly, () => {
    const V = 6, N = small ? 2000 : 20_000, T = 0.9;
    const row = Float32Array.of(0.5, 1.5, -0.5, 1.0, 0.0, 1.4);
    const logits = new Float32Array(N * V);
    for (let r = 0; r < N; r++) logits.set(row, r * V);
    const c: Case = {
      op: 'sample', dtype: 'f32', block: 32, params: { vocab: V }, // block: the harness run's (small, for its speed)
      inputs: { logits, temperature: new Float32Array(N).fill(T), topP: new Float32Array(N).fill(1), minP: new Float32Array(N) },
      intInputs: { topK: new Int32Array(N), seed: Int32Array.from({ length: N }, (_, r) => 7 + r), sampleIndex: new Int32Array(N), step: new Int32Array(N) },
    };
    const r = onGpu(c);
    assert.deepEqual(r.kernel.token, r.reference.token, 'GPU and CPU sampler differ');
    const m = Math.max(...row), p = Array.from(row, (z) => Math.exp((z - m) / T)), S = p.reduce((a, b) => a + b, 0);
    const counts = new Array<number>(V).fill(0);
    for (const t of r.kernel.token) counts[t]!++;
    const chi = counts.reduce((s, n, i) => s + (n - N * p[i]! / S) ** 2 / (N * p[i]! / S), 0);
    assert.ok(chi < 20.515, `chi-square ${chi.toFixed(2)} >= 20.515 (5 degrees of freedom, 0.001): counts ${counts}`);
  });
});
