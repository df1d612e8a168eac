// Kernel 2 (clipped GRPO surrogate + KL) on the GPU against the CPU path, same inputs.
//
// Tolerances: both compute each token in fp32 from the same formula (the CPU's exp is a
// polynomial with relative error < 2e-7, the GPU's expf < 2 ulp), so per-token loss and
// gradient agree to relative 1e-5; the total loss is summed in different orders (fp32
// within runs, fp64 across), so it agrees to 2e-5 of sum_t w_t |l_t|.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { grpoLoss, type GrpoLossInput, type LossType, type Tensor } from '../../lib/native.js';
import { grpoCase, type GrpoCase, type GrpoCaseOptions } from '../helpers/grpo-case.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, freeAll, gpuOnly, host, onDevice, up, worst } from './common.js';

const rng = new Rng(announceSeed('gpu/grpo_loss'));

const makeCase = (nSeqs: number, maxLen: number, o: GrpoCaseOptions = {}): GrpoCase => grpoCase(rng, nSeqs, maxLen, o);

type Params = { epsLow: number; epsHigh: number; dualClip: number; beta: number; lossType: LossType; normLength: number };

/** The aggregation weight of each token (as in grpo_loss.h), to scale the loss tolerance. */
function weights(c: GrpoCase, p: Params): Float64Array {
  const mask = c.input.mask as Uint8Array | undefined;
  const T = c.offsets[c.offsets.length - 1], S = c.offsets.length - 1;
  let active = 0;
  for (let t = 0; t < T; t++) active += !mask || mask[t] ? 1 : 0;
  const w = new Float64Array(T);
  for (let s = 0; s < S; s++) {
    let n = 0;
    for (let t = c.offsets[s]; t < c.offsets[s + 1]; t++) n += !mask || mask[t] ? 1 : 0;
    for (let t = c.offsets[s]; t < c.offsets[s + 1]; t++) {
      if (mask && !mask[t]) continue;
      w[t] = p.lossType === 'dapo' ? 1 / Math.max(1, active) : p.lossType === 'grpo' ? 1 / (S * Math.max(1, n)) : 1 / (S * p.normLength);
    }
  }
  return w;
}

function toDevice(c: GrpoCase): GrpoLossInput {
  const i = c.input;
  return {
    logp: up(i.logp as Float32Array) as Tensor<'f32'>,
    oldLogp: up(i.oldLogp as Float32Array) as Tensor<'f32'>,
    advantages: up(i.advantages as Float32Array) as Tensor<'f32'>,
    seqOffsets: up(i.seqOffsets as BigInt64Array) as Tensor<'i64'>,
    ...(i.refLogp ? { refLogp: up(i.refLogp as Float32Array) as Tensor<'f32'> } : {}),
    ...(i.mask ? { mask: up(i.mask as Uint8Array) as Tensor<'u8'> } : {}),
  };
}

function compare(c: GrpoCase, p: Params, label: string) {
  const cpu = grpoLoss({ ...c.input, ...p, tokenLoss: true });
  const d = toDevice(c);
  const gpu = grpoLoss({ ...d, ...p, tokenLoss: true });
  assert.ok(onDevice(gpu.gradLogp), `${label}: gradient lives on the device`);
  const cg = host<Float32Array>(cpu.gradLogp), gg = host<Float32Array>(gpu.gradLogp);
  const ct = host<Float32Array>(cpu.tokenLoss!), gt = host<Float32Array>(gpu.tokenLoss!);
  const w = weights(c, p);
  let wabs = 0, gmax = 0, lmax = 0;
  for (let t = 0; t < w.length; t++) {
    wabs += w[t] * Math.abs(ct[t]);
    gmax = Math.max(gmax, Math.abs(cg[t]));
    lmax = Math.max(lmax, Math.abs(ct[t]));
  }
  assert.ok(Math.abs(gpu.loss - cpu.loss) <= 2e-5 * wabs + 1e-9, `${label}: loss gpu ${gpu.loss} cpu ${cpu.loss}`);
  const tl = worst(gt, ct, 1e-7 * lmax + 1e-30, 1e-5);
  assert.ok(tl.ratio <= 1, `${label}: token loss [${tl.index}] gpu ${gt[tl.index]} cpu ${ct[tl.index]}`);
  // Tokens whose ratio sits within 1e-5 (relative) of a clip or dual-clip boundary may
  // legitimately take the other branch on the other device (exp differs by an ulp), where
  // the gradient jumps between -rA and 0: compare the gradient everywhere else.
  const lp = c.input.logp as Float32Array, old = c.input.oldLogp as Float32Array;
  const lo = Math.fround(1 - p.epsLow), hi = Math.fround(1 + p.epsHigh);
  const near = (r: number, b: number) => b > 0 && Math.abs(r - b) <= 1e-5 * b;
  const ggc = Float32Array.from(gg), cgc = Float32Array.from(cg);
  let edge = 0;
  for (let t = 0; t < ggc.length; t++) {
    const r = Math.exp(lp[t] - old[t]);
    if (near(r, lo) || near(r, hi) || near(r, p.dualClip)) {
      ggc[t] = cgc[t] = 0;
      edge++;
    }
  }
  assert.ok(edge <= 1e-3 * ggc.length + 5, `${label}: ${edge} tokens at a clip boundary`);
  const gr = worst(ggc, cgc, 1e-7 * gmax + 1e-30, 1e-5);
  assert.ok(gr.ratio <= 1, `${label}: grad [${gr.index}] gpu ${gg[gr.index]} cpu ${cg[gr.index]}`);
  const mask = c.input.mask as Uint8Array | undefined;
  if (mask) for (let t = 0; t < mask.length; t++) if (!mask[t]) assert.ok(gg[t] === 0 && gt[t] === 0, `${label}: masked token ${t} must be 0`);
  assert.equal(gpu.stats.nActive, cpu.stats.nActive, `${label}: nActive`);
  const n = Math.max(1, cpu.stats.nActive);
  for (const k of ['clipLowFrac', 'clipHighFrac', 'dualClipFrac'] as const)
    assert.ok(Math.abs(gpu.stats[k] - cpu.stats[k]) <= 1e-12 + 2 / n, `${label}: ${k} gpu ${gpu.stats[k]} cpu ${cpu.stats[k]}`);
  assert.ok(Math.abs(gpu.stats.meanRatio - cpu.stats.meanRatio) <= 1e-5 * (1 + Math.abs(cpu.stats.meanRatio)), `${label}: meanRatio`);
  assert.ok(Math.abs(gpu.stats.meanKl - cpu.stats.meanKl) <= 1e-5 * (1 + Math.abs(cpu.stats.meanKl)), `${label}: meanKl`);
  freeAll(d.logp, d.oldLogp, d.advantages, d.seqOffsets, d.refLogp, d.mask, gpu.gradLogp, gpu.tokenLoss);
  return gpu;
}

const base: Params = { epsLow: 0.2, epsHigh: 0.28, dualClip: 0, beta: 0, lossType: 'dapo', normLength: 64 };
const modes: LossType[] = ['dapo', 'grpo', 'dr_grpo'];

describe('gpu grpoLoss vs cpu', () => {
  for (const lossType of modes) {
    it(`aggregation '${lossType}': masks, KL, dual clip, empty sequences`, gpuOnly, () => {
      for (let k = 0; k < 8; k++) {
        const c = makeCase(1 + rng.int(40), 120, { ref: k % 2 === 0, mask: k % 3 !== 0, emptyFrac: k % 4 === 1 ? 0.3 : 0 });
        compare(c, { ...base, lossType, beta: k % 2 === 0 ? rng.uniform(0, 0.2) : 0, dualClip: k % 2 ? 3 : 0, epsLow: rng.uniform(0.05, 0.3) }, `${lossType} #${k}`);
      }
    });
  }
  it('large batch (tiles crossing many sequences), all modes', gpuOnly, () => {
    const c = makeCase(600, 1000, { ref: true, mask: true });
    for (const lossType of modes) compare(c, { ...base, lossType, beta: 0.05, normLength: 1000 }, `large ${lossType}`);
    const c2 = makeCase(600, 1000, {});
    for (const lossType of modes) compare(c2, { ...base, lossType, normLength: 1000 }, `large no mask ${lossType}`);
  });
  it('one long sequence (S = 1, 200K tokens) and many tiny ones', gpuOnly, () => {
    const long = makeCase(1, 1, { mask: true });
    const T = 200_000;
    const mk = (f: () => number) => Float32Array.from({ length: T }, f);
    const old = mk(() => -Math.abs(rng.normal()));
    long.input = {
      logp: Float32Array.from(old, (x) => x + rng.normal() * 0.3), oldLogp: old, advantages: mk(() => 0.7),
      mask: Uint8Array.from({ length: T }, () => (rng.next() < 0.5 ? 1 : 0)), seqOffsets: new BigInt64Array([0n, BigInt(T)]),
    };
    long.offsets = [0, T];
    for (const lossType of modes) compare(long, { ...base, lossType, normLength: 4096 }, `long ${lossType}`);
    const tiny = makeCase(5000, 3, { mask: true, ref: true, emptyFrac: 0.2 });
    for (const lossType of modes) compare(tiny, { ...base, lossType, beta: 0.1, normLength: 3 }, `tiny ${lossType}`);
  });
  it('extreme advantages and ratios, dual clip', gpuOnly, () => {
    const c = makeCase(30, 60, { advScale: 1e4, drift: 3 });
    const out = compare(c, { ...base, dualClip: 3 }, 'extreme');
    assert.ok(out.stats.clipHighFrac > 0 && out.stats.clipLowFrac > 0, 'both clips are exercised');
    assert.ok(out.stats.dualClipFrac > 0, 'the dual clip is exercised');
    for (const lossType of modes) compare(c, { ...base, lossType, dualClip: 1.5, epsHigh: 0.2 }, `extreme ${lossType}`); // symmetric clip (TRL's epsilon_high unset); 0 is refused since the options are validated
  });
  it('all tokens masked, one token, zero tokens', gpuOnly, () => {
    const masked: GrpoCase = {
      input: { logp: new Float32Array(5), oldLogp: new Float32Array(5), advantages: new Float32Array(5).fill(1), mask: new Uint8Array(5), seqOffsets: new BigInt64Array([0n, 2n, 5n]) },
      offsets: [0, 2, 5],
    };
    for (const lossType of modes) {
      const out = compare(masked, { ...base, lossType }, `masked ${lossType}`);
      assert.equal(out.loss, 0);
      assert.equal(out.stats.nActive, 0);
    }
    compare({ input: { logp: new Float32Array([-1]), oldLogp: new Float32Array([-1.5]), advantages: new Float32Array([2]), seqOffsets: new BigInt64Array([0n, 1n]) }, offsets: [0, 1] }, base, 'one token');
    const z = { logp: new Float32Array(0), oldLogp: new Float32Array(0), advantages: new Float32Array(0), seqOffsets: new BigInt64Array([0n, 0n]) };
    const out = compare({ input: z, offsets: [0, 0] }, base, 'zero tokens');
    assert.equal(out.loss, 0);
  });
  it('bad input: non-finite values, bad offsets, beta without refLogp', gpuOnly, () => {
    const ok: GrpoCase = {
      input: { logp: new Float32Array([-1, -1, -1]), oldLogp: new Float32Array([-1, -1, -1]), advantages: new Float32Array([1, 1, 1]), seqOffsets: new BigInt64Array([0n, 3n]) },
      offsets: [0, 3],
    };
    const run = (patch: Partial<GrpoLossInput>, p: Partial<Params> = {}) => {
      const d = toDevice({ input: { ...ok.input, ...patch }, offsets: ok.offsets });
      try {
        return grpoLoss({ ...d, ...p });
      } finally {
        freeAll(d.logp, d.oldLogp, d.advantages, d.seqOffsets, d.refLogp, d.mask);
      }
    };
    assert.throws(() => run({ logp: new Float32Array([-1, NaN, -1]) }), /non-finite loss at token 1 \(logp=nan/);
    assert.throws(() => run({ oldLogp: new Float32Array([0, 0, -Infinity]) }), /non-finite loss at token 2/);
    assert.doesNotThrow(() => run({ logp: new Float32Array([-1, NaN, -1]), mask: new Uint8Array([1, 0, 1]) }));
    assert.throws(() => run({ seqOffsets: new BigInt64Array([0n, 2n]) }), /seqOffsets must start at 0 and end at nTokens = 3/);
    assert.throws(() => run({ seqOffsets: new BigInt64Array([0n, 2n, 1n, 3n]) }), /non-decreasing/);
    assert.throws(() => run({}, { beta: 0.1 }), /needs refLogp/);
    assert.throws(() => run({}, { dualClip: 0.5 }), /'dualClip' must be a number > 1, or 0 \(off\)/);
    assert.throws(() => run({}, { lossType: 'dr_grpo', normLength: 0 }), /needs normLength > 0/);
  });
});
