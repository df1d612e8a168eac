// The GPU engine's decoder kernels (native/gpu/model_kernels.cu) and cuBLASLt GEMMs
// (native/gpu/lt_gemm.cu) on a device, against the CPU ops of native/model/ and against the
// CPU harness run of the same kernel code, on fresh random inputs. Skipped without a device
// (saying why). MURPHY_GPU_DRYRUN=1 runs the test logic with the harness in place of the GPU.
// Written before any GPU was available to its author: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findCublasLt } from '../../lib/gpu/cublaslt.js';
import { kernelHarness } from '../../lib/native.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, dryRun, gpuOnly, onGpu, skipReason, worst, type KernelCaseInput as Case, type KernelOutputs as Out } from './common.js';

const rng = new Rng(announceSeed('gpu/model-kernels'));


const BF16_RTOL = 2 ** -8;
const TOL = { f32: [1e-5, 1e-4] as [number, number], bf16: [1e-5, BF16_RTOL + 1e-4] as [number, number] };

function check(c: Case, tol = TOL): void {
  for (const dtype of ['f32', 'bf16'] as const) {
    const r = onGpu({ ...c, dtype });
    for (const name of Object.keys(r.reference)) {
      const k = r.kernel[name]!;
      assert.equal(k.length, r.reference[name]!.length, `${c.op} ${dtype} ${name}: length`);
      const [atol, rtol] = tol[dtype];
      for (const [what, ref] of [['CPU op', r.reference[name]!], ['harness', r.harness[name]!]] as const) {
        const w = worst(k, ref, atol, rtol);
        assert.ok(w.ratio <= 1, `${c.op} ${dtype} ${name}[${w.index}]: GPU ${k[w.index]} vs ${what} ${ref[w.index]} (ratio ${w.ratio.toFixed(2)})`);
      }
    }
  }
}

describe('GPU decoder kernels vs the CPU ops and the CPU harness', () => {
  it('RMSNorm forward and backward, large rows', gpuOnly, () => {
    const rows = 64 + rng.int(64), n = 2048 + rng.int(2048);
    const x = rng.normals(rows * n, 2), w = rng.normals(n, 1), dy = rng.normals(rows * n, 1);
    check({ op: 'rmsnorm_forward', rows, n, eps: 1e-6, inputs: { x, w } });
    const rstd = kernelHarness({ op: 'rmsnorm_forward', rows, n, eps: 1e-6, inputs: { x, w } }).reference.rstd!;
    check({ op: 'rmsnorm_backward', rows, n, inputs: { x, w, dy, rstd } });
  });
  it('residual + RMSNorm fused both ways', gpuOnly, () => {
    const rows = 64 + rng.int(64), n = 2048 + rng.int(2048);
    const x = rng.normals(rows * n, 2), d = rng.normals(rows * n, 1), w = rng.normals(n, 1);
    check({ op: 'residual_rmsnorm_forward', rows, n, eps: 1e-6, inputs: { x, d, w } });
    check({ op: 'rmsnorm_residual_forward', rows, n, eps: 1e-6, inputs: { x, a: d, w } });
  });
  it('RoPE forward and backward', gpuOnly, () => {
    const tokens = 256 + rng.int(256), heads = 16, headDim = 128, maxPos = 40960;
    const pos = Int32Array.from({ length: tokens }, () => rng.int(maxPos));
    for (const op of ['rope_forward', 'rope_backward']) {
      check({ op, tokens, heads, headDim, maxPos, theta: 1e6, ints: pos, inputs: { x: rng.normals(tokens * heads * headDim, 1) } });
    }
  });
  it('SwiGLU forward and backward', gpuOnly, () => {
    const n = 1_000_000 + rng.int(1000);
    const g = rng.normals(n, 3), u = rng.normals(n, 1), da = rng.normals(n, 1);
    check({ op: 'swiglu_forward', n, inputs: { g, u } });
    check({ op: 'swiglu_backward', n, inputs: { g, u, da } });
  });
  it('embedding gather and scatter (exact)', gpuOnly, () => {
    const vocab = 1000, dim = 1024, tokens = 2048;
    const ids = Int32Array.from({ length: tokens }, () => rng.int(64));
    const exact = { f32: [0, 0] as [number, number], bf16: [0, 0] as [number, number] };
    check({ op: 'embedding_forward', vocab, dim, tokens, ints: ids, inputs: { table: rng.normals(vocab * dim, 1) } }, exact);
    check({ op: 'embedding_backward', vocab, dim, tokens, ints: ids, inputs: { dy: rng.normals(tokens * dim, 1) } }, exact);
  });
});

/** Rounds each value to bf16 (nearest even) and back, so the CPU reference sees the GPU's inputs. */
function bf16Round(a: Float32Array): Float32Array {
  const u = new Uint32Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength));
  for (let i = 0; i < u.length; i++) {
    const x = u[i]!;
    u[i] = (((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) << 16) >>> 0;
  }
  return new Float32Array(u.buffer);
}

const lt = skipReason || dryRun ? null : findCublasLt({ install: true });
const ltOnly = { skip: skipReason || (lt && !lt.found ? lt.reason! : false) };

describe('cuBLASLt GEMMs of the linear products (bf16 in, fp32 accumulate and out)', () => {
  it('forward, input gradient, weight gradient, with and without accumulation', ltOnly, () => {
    // (a dry run executes the plan with a plain CPU loop: small shapes only)
    const shapes = dryRun ? [[1, 1, 1], [17, 33, 65]] : [[1, 1, 1], [17, 33, 65], [512, 1024, 768], [4096, 2048, 2048]];
    for (const [M, N, K] of shapes as [number, number, number][]) {
      const x = bf16Round(rng.normals(M * K, 1)), w = bf16Round(rng.normals(N * K, 0.05)), dy = bf16Round(rng.normals(M * N, 1));
      for (const accumulate of [false, true]) {
        const cases: [string, Record<string, Float32Array>][] = [
          ['lt_linear_forward', { x, w, y: rng.normals(M * N, 1) }],
          ['lt_linear_backward_input', { dy, w, dx: rng.normals(M * K, 1) }],
          ['lt_linear_backward_weight', { dy, x, dw: rng.normals(N * K, 1) }],
        ];
        for (const [op, inputs] of cases) {
          const r = onGpu({ op, rows: M, n: N, dim: K, accumulate, inputs });
          const w8 = worst(r.kernel.out!, r.reference.out!, 1e-3, 1e-3);
          assert.ok(w8.ratio <= 1, `${op} ${M}x${N}x${K} accumulate=${accumulate}: [${w8.index}] GPU ${r.kernel.out![w8.index]} vs CPU op ${r.reference.out![w8.index]}`);
        }
      }
    }
  });
});
