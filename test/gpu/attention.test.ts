// The GPU engine's attention kernels (native/gpu/attention.cu: varlen causal GQA, forward and
// backward) on a device, against the CPU ops attention_forward_cpu / attention_backward_cpu
// and against the CPU harness run of the same kernel code, on fresh random inputs. Skipped
// without a device (saying why). MURPHY_GPU_DRYRUN=1 runs the test logic with the harness in
// place of the GPU. Written before any GPU was available to its author: it has not yet run on
// a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Rng } from '../helpers/random.js';
import { announceSeed, dryRun, gpuOnly, onGpu, worst, type KernelCaseInput as Case, type KernelOutputs as Out } from './common.js';

const seed = announceSeed('gpu/attention');
const rng = new Rng(seed);


// Longer sequences than in npm test, so the fp32 sums are longer: f32 relative and absolute
// 1e-4 against both. bf16: against the CPU op (unrounded) relative 2^-8 + 1e-4; against the
// harness (also rounded to bf16) one bf16 ulp, 2^-7 + 1e-4: the device's fp32 arithmetic
// (fused multiply-adds, its expf) may round an output to the neighbouring bf16 value.
const TOL = {
  f32: { op: [1e-4, 1e-4], harness: [1e-4, 1e-4] },
  bf16: { op: [1e-4, 2 ** -8 + 1e-4], harness: [1e-4, 2 ** -7 + 1e-4] },
} as const;

function check(c: Case): void {
  for (const op of ['attention_forward', 'attention_backward']) {
    for (const dtype of ['f32', 'bf16'] as const) {
      const r = onGpu({ ...c, op, dtype });
      for (const name of Object.keys(r.reference)) {
        const k = r.kernel[name]!;
        assert.equal(k.length, r.reference[name]!.length, `${op} ${dtype} ${name}: length`);
        for (const [what, ref, [atol, rtol]] of [['CPU op', r.reference[name]!, TOL[dtype].op], ['harness', r.harness[name]!, TOL[dtype].harness]] as const) {
          const w = worst(k, ref, atol, rtol);
          assert.ok(w.ratio <= 1, `${op} ${dtype} ${name}[${w.index}]: GPU ${k[w.index]} vs ${what} ${ref[w.index]} (ratio ${w.ratio.toFixed(2)}; H=${c.heads} G=${c.kvHeads} D=${c.headDim}; seed ${seed})`);
        }
      }
    }
  }
}

function attnCase(lens: number[], heads: number, kvHeads: number, headDim: number): Case {
  const offs = [0];
  for (const l of lens) offs.push(offs[offs.length - 1]! + l);
  const tokens = offs[offs.length - 1]!;
  return {
    op: 'attention_forward', tokens, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim), ints: Int32Array.from(offs),
    inputs: {
      q: rng.normals(tokens * heads * headDim, 1), k: rng.normals(tokens * kvHeads * headDim, 1),
      v: rng.normals(tokens * kvHeads * headDim, 1), dout: rng.normals(tokens * heads * headDim, 1),
    },
  };
}

// (The CPU harness runs every case too, single-threaded: the sizes stay at a few seconds.)
describe('GPU attention kernels vs the CPU ops and the CPU harness', () => {
  it('Qwen3 shapes: head_dim 128, 16 q / 8 kv heads, packed sequences of random lengths', gpuOnly, () => {
    check(attnCase([1, 1 + rng.int(300), 17 + rng.int(200), 100 + rng.int(100)], 16, 8, 128));
  });
  it('GQA ratio 4 (Qwen3-8B: 32 / 8), head_dim 64 and 256', gpuOnly, () => {
    check(attnCase([1 + rng.int(150), 33, 1 + rng.int(150)], 8, 2, 64));
    check(attnCase([1 + rng.int(60), 1 + rng.int(60)], 4, 1, 256));
  });
  it('one long sequence (many key tiles per block: hundreds of phases)', gpuOnly, () => {
    check(attnCase([600 + rng.int(400)], 2, 1, 128));
  });
});
