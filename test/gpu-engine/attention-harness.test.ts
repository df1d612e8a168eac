// The GPU engine's attention kernels (native/gpu/kernels/attention.h: causal GQA over packed
// variable-length sequences, flash-style tiles, forward and backward), run on the CPU by the
// harness (the same kernel code over the same grid, block by block, phase by phase), against
// their spec attention_forward_cpu / attention_backward_cpu (native/model/attention.cc) on
// fresh random inputs (seed printed; MURPHY_SEED replays). Both storage types, blocks and
// threads in forward and in reverse order (identical bits required), random block sizes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kernelHarness } from '../../lib/native.js';
import { Rng, testSeed, worstRatio } from '../helpers/random.js';

type Out = Record<string, Float32Array>;
type Case = Record<string, unknown> & { op: string };
const harness = (c: Case): { kernel: Out; reference: Out } => kernelHarness(c);

const seed = testSeed('attention-harness');
const rng = new Rng(seed);

// Tolerances, |kernel - CPU op| <= atol + rtol |CPU op| (docs/kernels.md, "Attention"):
// f32 storage: only the fp32 summation order differs (online softmax vs two-pass, tiled vs
// whole-row dot products): relative 1e-5, absolute 1e-5 for sums that cancel (dq, dk, dv).
// bf16 storage: inputs rounded to bf16 once for both sides; the kernel's outputs are rounded
// to bf16 once (half an ulp: up to 2^-8 relative at the bottom of a binade), so relative
// 2^-8 + 1e-4 (the fp32 differences, with margin), absolute 1e-5.
const TOL = {
  f32: { atol: 1e-5, rtol: 1e-5 },
  bf16: { atol: 1e-5, rtol: 2 ** -8 + 1e-4 },
};

/** Sequence offsets for random lengths, including a length-1 sequence and lengths that are not multiples of any tile. */
function offsets(maxLen: number): Int32Array {
  const lens = [1, 1 + rng.int(maxLen), 2 + rng.int(maxLen), 17 + rng.int(maxLen)];
  const offs = [0];
  for (const l of lens) offs.push(offs[offs.length - 1]! + l);
  return Int32Array.from(offs);
}

function attnCase(heads: number, kvHeads: number, headDim: number, maxLen: number): Case {
  const ints = offsets(maxLen);
  const tokens = ints[ints.length - 1]!;
  return {
    op: 'attention_forward', tokens, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim), ints,
    block: [32, 64, 128, 256][rng.int(4)],
    inputs: {
      q: rng.normals(tokens * heads * headDim, 1), k: rng.normals(tokens * kvHeads * headDim, 1),
      v: rng.normals(tokens * kvHeads * headDim, 1), dout: rng.normals(tokens * heads * headDim, 1),
    },
  };
}

const describeCase = (c: Case): string =>
  `H=${c.heads} G=${c.kvHeads} D=${c.headDim} offsets=[${Array.from(c.ints as Int32Array).join(',')}] block=${c.block} seed ${seed}`;

/** Worst tolerance ratio over all outputs of a run (<= 1: within tolerance). */
function worstOf(r: { kernel: Out; reference: Out }, dtype: 'f32' | 'bf16'): { ratio: number; what: string } {
  let worst = { ratio: 0, what: '' };
  for (const name of Object.keys(r.reference)) {
    const k = r.kernel[name]!, ref = r.reference[name]!;
    assert.equal(k.length, ref.length, `${name}: length`);
    const w = worstRatio(k, ref, TOL[dtype].atol, TOL[dtype].rtol);
    if (w.ratio > worst.ratio) worst = { ratio: w.ratio, what: `${name}[${w.index}]: kernel ${k[w.index]} vs CPU op ${ref[w.index]}` };
  }
  return worst;
}

function check(c: Case): void {
  for (const op of ['attention_forward', 'attention_backward']) {
    for (const dtype of ['f32', 'bf16'] as const) {
      const fwd = harness({ ...c, op, dtype, order: 'forward' });
      const rev = harness({ ...c, op, dtype, order: 'reverse' });
      assert.deepEqual(Object.keys(fwd.kernel).sort(), Object.keys(fwd.reference).sort());
      for (const name of Object.keys(fwd.kernel)) {
        assert.ok(fwd.kernel[name]!.every(Number.isFinite), `${op} ${dtype} ${name}: non-finite output (${describeCase(c)})`);
        assert.deepEqual(rev.kernel[name], fwd.kernel[name], `${op} ${dtype} ${name}: reverse order changed the bits (${describeCase(c)})`);
      }
      const w = worstOf(fwd, dtype);
      assert.ok(w.ratio <= 1, `${op} ${dtype} ${w.what} (ratio ${w.ratio.toFixed(2)}; ${describeCase(c)})`);
    }
  }
}

describe('GPU attention kernels through the CPU harness, against attention_forward_cpu / attention_backward_cpu', () => {
  for (const headDim of [16, 64, 128]) {
    for (const ratio of [1, 2, 4]) {
      it(`head_dim ${headDim}, GQA ratio ${ratio} (varlen, lengths 1 and not multiples of the tile)`, () => {
        const kvHeads = 1 + rng.int(2);
        check(attnCase(kvHeads * ratio, kvHeads, headDim, headDim === 128 ? 40 : 60));
      });
    }
  }
  it('head_dim 256 (the largest the tiles are sized for), one short case', () => {
    check(attnCase(4, 2, 256, 12));
  });

  it('a deliberately broken kernel fails the comparison: wrong causal mask, wrong GQA head mapping', () => {
    for (const fault of ['causal', 'gqa']) {
      const c = attnCase(4, 2, 64, 40);
      for (const op of ['attention_forward', 'attention_backward']) {
        for (const dtype of ['f32', 'bf16'] as const) {
          const w = worstOf(harness({ ...c, op, dtype, fault }), dtype);
          assert.ok(w.ratio > 10, `${op} ${dtype} with fault '${fault}' passed the comparison (ratio ${w.ratio}; ${describeCase(c)})`);
        }
      }
    }
  });

  it('memory is linear in the tokens: the workspace is T x H floats, shared memory per block does not depend on T', () => {
    const plan = (tokens: number, headDim: number, seqLen: number): Record<string, number> => {
      const offs = [0];
      while (offs[offs.length - 1]! < tokens) offs.push(Math.min(tokens, offs[offs.length - 1]! + seqLen));
      const k = harness({ op: 'attention_plan', tokens, heads: 16, kvHeads: 8, headDim, scale: 1, ints: Int32Array.from(offs) }).kernel;
      return Object.fromEntries(Object.entries(k).map(([n, a]) => [n, a[0]!]));
    };
    for (const headDim of [64, 128, 256]) {
      const small = plan(1024, headDim, 1024), big = plan(65536, headDim, 65536), packed = plan(65536, headDim, 4096);
      for (const key of ['tile', 'chunk', 'forwardShared', 'dqShared', 'dkdvShared']) {
        assert.equal(big[key], small[key], `head_dim ${headDim}: ${key} changed with T`);
        assert.equal(packed[key], small[key], `head_dim ${headDim}: ${key} changed with the packing`);
      }
      assert.equal(small.workspaceFloats, 1024 * 16);
      assert.equal(big.workspaceFloats, 65536 * 16);
      assert.equal(big.nTiles, 65536 / small.tile!); // the tile table: one entry per query tile
      for (const key of ['forwardShared', 'dqShared', 'dkdvShared']) assert.ok(small[key]! <= 12288, `head_dim ${headDim}: ${key} ${small[key]} floats > 48 KiB`);
    }
    // the sizes chosen for the common head dims (docs/kernels.md)
    const tiles = [64, 128, 256].map((d) => { const p = plan(64, d, 64); return [p.tile, p.chunk]; });
    assert.deepEqual(tiles, [[32, 16], [16, 8], [8, 4]]);
    for (let d = 1; d <= 256; d += 1 + rng.int(9)) {
      const p = plan(64, d, 64);
      for (const key of ['forwardShared', 'dqShared', 'dkdvShared']) assert.ok(p[key]! <= 12288, `head_dim ${d}: ${key} ${p[key]} floats > 48 KiB`);
    }
  });

  it('bad shapes and offsets are one clear error', () => {
    const base = { op: 'attention_plan', tokens: 8, heads: 4, kvHeads: 2, headDim: 16, scale: 1, ints: Int32Array.of(0, 8) };
    assert.throws(() => harness({ ...base, heads: 3 }), /attention: n_heads 3 must be a positive multiple of n_kv 2/);
    assert.throws(() => harness({ ...base, headDim: 300 }), /attention: head_dim 300 outside 1\.\.256/);
    assert.throws(() => harness({ ...base, ints: Int32Array.of(0, 7) }), /attention: seq_offsets must start at 0 and end at tokens \(8\); got 0 \.\. 7/);
    assert.throws(() => harness({ ...base, ints: Int32Array.of(0, 5, 3, 8) }), /attention: seq_offsets must not decrease/);
    assert.throws(() => harness({ ...base, ints: new Int32Array(0) }), /need the sequence offsets/);
    assert.throws(() => harness({ ...base, op: 'attention_forward', fault: 'nope', inputs: {} }), /fault must be 'causal' or 'gqa'/);
  });
});
