// Kernel 2 (clipped GRPO surrogate + KL) against a float64 reference written as TRL computes
// it, finite differences, and bad input.
//
// Tolerances: the kernel computes each token in fp32 (exp via a polynomial, rel. error < 2e-7)
// and sums in fp32 within runs of up to 64K tokens, fp64 across runs. Per-token loss and
// gradient: relative 1e-5 (+1e-7 absolute scaled by the weight); total loss: 1e-5 relative to
// the sum of |terms|.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { grpoLoss, type GrpoLossInput, type LossType } from '../../lib/native.js';
import { grpoCase, type GrpoCase, type GrpoCaseOptions } from '../helpers/grpo-case.js';
import { Rng, testSeed, worstRatio } from '../helpers/random.js';
import { grpoRef } from '../helpers/reference.js';

const rng = new Rng(testSeed('grpo_loss'));

const makeCase = (nSeqs: number, maxLen: number, o: GrpoCaseOptions = {}): GrpoCase => grpoCase(rng, nSeqs, maxLen, o);

function check(c: GrpoCase, params: { epsLow: number; epsHigh: number; dualClip: number; beta: number; lossType: LossType; normLength: number }, label: string) {
  const out = grpoLoss({ ...c.input, ...params, tokenLoss: true });
  const ref = grpoRef({
    logp: c.input.logp as Float32Array, oldLogp: c.input.oldLogp as Float32Array, refLogp: c.input.refLogp as Float32Array | undefined,
    advantages: c.input.advantages as Float32Array, mask: c.input.mask as Uint8Array | undefined, offsets: c.offsets, ...params,
  });
  let absSum = 0, wmax = 0;
  for (let t = 0; t < ref.tokenLoss.length; t++) absSum += Math.abs(ref.tokenLoss[t]);
  for (const g of ref.grad) wmax = Math.max(wmax, Math.abs(g));
  const scale = params.lossType === 'dapo' ? 1 / Math.max(1, ref.nActive) : 1;
  assert.ok(Math.abs(out.loss - ref.loss) <= 1e-5 * (absSum * scale + 1e-3), `${label}: loss ${out.loss} vs ${ref.loss}`);
  const tl = worstRatio(out.tokenLoss as Float32Array, ref.tokenLoss, 1e-6, 1e-5);
  assert.ok(tl.ratio <= 1, `${label}: token loss ${tl.index}: ${(out.tokenLoss as Float32Array)[tl.index]} vs ${ref.tokenLoss[tl.index]}`);
  // The gradient jumps where the ratio crosses a clip bound (1 - epsLow, 1 + epsHigh, the dual
  // bound c). A ratio within float rounding of a bound may take either branch in fp32 (the
  // kernel) and in float64 (the reference): MURPHY_SEED=1008240580 gives r = 0.88301528 in
  // float64, below 1 - epsLow = 0.88301530, but equal to it in fp32. Such tokens (at most a
  // couple per case; the 280K-token case may have a few more: MURPHY_SEED=1715768314 gives 3)
  // are left out of the gradient comparison; the loss, which is continuous there, still covers
  // them. The bound on their number keeps the exclusion from hiding a real fault.
  const got = Float32Array.from(out.gradLogp as Float32Array);
  const want = Float64Array.from(ref.grad);
  const bounds = [1 - params.epsLow, 1 + params.epsHigh, ...(params.dualClip > 0 ? [params.dualClip] : [])];
  const lp = c.input.logp as Float32Array, old = c.input.oldLogp as Float32Array;
  let ambiguous = 0;
  for (let t = 0; t < want.length; t++) {
    const r = Math.exp(lp[t] - old[t]);
    if (!bounds.some((b) => Math.abs(r - b) <= 1e-6 * b)) continue;
    ambiguous++;
    got[t] = 0;
    want[t] = 0;
  }
  assert.ok(ambiguous <= 2 + want.length * 5e-5, `${label}: ${ambiguous} of ${want.length} tokens within float rounding of a clip bound`);
  const gr = worstRatio(got, want, 1e-7 * wmax + 1e-30, 1e-5);
  assert.ok(gr.ratio <= 1, `${label}: grad ${gr.index}: ${got[gr.index]} vs ${want[gr.index]}`);
  assert.equal(out.stats.nActive, ref.nActive);
  for (const k of ['clipLowFrac', 'clipHighFrac', 'dualClipFrac'] as const) assert.ok(Math.abs(out.stats[k] - ref[k]) <= 1e-12 + 2 / Math.max(1, ref.nActive), `${label}: ${k}`);
  assert.ok(Math.abs(out.stats.meanRatio - ref.meanRatio) <= 1e-5 * (1 + ref.meanRatio), `${label}: meanRatio`);
  assert.ok(Math.abs(out.stats.meanKl - ref.meanKl) <= 1e-5 * (1 + ref.meanKl), `${label}: meanKl ${out.stats.meanKl} vs ${ref.meanKl}`);
  return out;
}

const base = { epsLow: 0.2, epsHigh: 0.28, dualClip: 0, beta: 0, lossType: 'dapo' as LossType, normLength: 64 };

describe('grpoLoss vs float64 (TRL formulas)', () => {
  for (const lossType of ['dapo', 'grpo', 'dr_grpo'] as LossType[]) {
    it(`aggregation '${lossType}', with masks, KL and dual clip`, () => {
      for (let k = 0; k < 6; k++) {
        const c = makeCase(1 + rng.int(30), 80, { ref: k % 2 === 0, mask: k % 3 !== 0 });
        check(c, { ...base, lossType, beta: k % 2 === 0 ? rng.uniform(0, 0.2) : 0, dualClip: k % 2 ? 3 : 0, epsLow: rng.uniform(0.05, 0.3) }, `${lossType} #${k}`);
      }
    });
  }
  it('large batch crossing the 64K-token chunking, all modes', () => {
    const c = makeCase(400, 700, { ref: true, mask: true });
    for (const lossType of ['dapo', 'grpo', 'dr_grpo'] as LossType[]) check(c, { ...base, lossType, beta: 0.05, normLength: 700 }, `large ${lossType}`);
  });
  it('extreme advantages and ratios', () => {
    const c = makeCase(20, 50, { advScale: 1e4, drift: 3 });
    const out = check(c, { ...base, dualClip: 3 }, 'extreme');
    assert.ok(out.stats.clipHighFrac > 0 && out.stats.clipLowFrac > 0, 'both clips are exercised');
    assert.ok(out.stats.dualClipFrac > 0, 'the dual clip is exercised');
  });
  it('one token, empty sequences, all tokens masked', () => {
    check({ input: { logp: new Float32Array([-1]), oldLogp: new Float32Array([-1.5]), advantages: new Float32Array([2]), seqOffsets: new BigInt64Array([0n, 1n]) }, offsets: [0, 1] }, base, 'one token');
    check({ input: { logp: new Float32Array([-1, -2]), oldLogp: new Float32Array([-1, -2]), advantages: new Float32Array([1, 1]), seqOffsets: new BigInt64Array([0n, 0n, 2n, 2n]) }, offsets: [0, 0, 2, 2] }, { ...base, lossType: 'grpo' }, 'empty seqs');
    const out = grpoLoss({ logp: new Float32Array(3), oldLogp: new Float32Array(3), advantages: new Float32Array(3), mask: new Uint8Array(3), seqOffsets: new BigInt64Array([0n, 3n]) });
    assert.equal(out.loss, 0);
    assert.equal(out.stats.nActive, 0);
    // no tokens at all with beta > 0: the empty refLogp is accepted (a random draw of the test above once made this case)
    const none = grpoLoss({ logp: new Float32Array(0), oldLogp: new Float32Array(0), advantages: new Float32Array(0), refLogp: new Float32Array(0), seqOffsets: new BigInt64Array([0n, 0n]), beta: 0.1 });
    assert.equal(none.loss, 0);
    assert.equal(none.gradLogp.length, 0);
  });
  it('writes into caller-provided output arrays', () => {
    const c = makeCase(5, 40, { ref: true });
    const gradLogp = new Float32Array(c.input.logp.length).fill(NaN);
    const tokenLoss = new Float32Array(c.input.logp.length).fill(NaN);
    const a = grpoLoss({ ...c.input, ...base, beta: 0.1, tokenLoss: true, out: { gradLogp, tokenLoss } });
    const b = grpoLoss({ ...c.input, ...base, beta: 0.1, tokenLoss: true });
    assert.equal(a.gradLogp, gradLogp);
    assert.equal(a.tokenLoss, tokenLoss);
    assert.deepEqual(gradLogp, b.gradLogp);
    assert.deepEqual(tokenLoss, b.tokenLoss);
    assert.throws(() => grpoLoss({ ...c.input, out: { gradLogp: new Float32Array(1) } }), /'gradLogp' has 1 elements but \d+ are needed/);
  });
  // The statistics are quotients: 49 ratios of exactly 1 averaged as sum * (1 / 49) gave
  // 0.9999999999999999 (CI, engine.test.ts's on-policy loss). The counts listed are those n
  // below 200 where n * (1 / n) != 1, and one drawn at random.
  it('on-policy tokens average to a ratio of exactly 1 and fractions of exactly 1 for any token count', () => {
    for (const n of [49, 98, 103, 107, 161, 187, 1 + rng.int(5000)]) {
      const logp = Float32Array.from({ length: n }, () => -5 * rng.next());
      const advantages = new Float32Array(n).fill(1);
      const on = grpoLoss({ logp, oldLogp: logp, advantages, seqOffsets: new BigInt64Array([0n, BigInt(n)]) });
      assert.equal(on.stats.meanRatio, 1, `n = ${n}`);
      // every token's ratio e^1 is above 1 + epsHigh with a positive advantage: all clipped high
      const high = grpoLoss({ logp, oldLogp: logp.map((x) => x - 1), advantages, seqOffsets: new BigInt64Array([0n, BigInt(n)]) });
      assert.equal(high.stats.clipHighFrac, 1, `n = ${n}`);
    }
  });
  it('hand-computed example', () => {
    // r = (e^0.1, 1, e^-0.5); A = (1, 1, -1); eps 0.2:
    // l = (-e^0.1, -1, -(max(e^-0.5, 0.8) * -1) = 0.8) -> mean = (-1.10517 - 1 + 0.8) / 3
    const out = grpoLoss({ logp: new Float32Array([-1, -2, -3]), oldLogp: new Float32Array([-1.1, -2, -2.5]), advantages: new Float32Array([1, 1, -1]), seqOffsets: new BigInt64Array([0n, 2n, 3n]) });
    assert.ok(Math.abs(out.loss - (-Math.exp(0.1) - 1 + 0.8) / 3) < 1e-6);
    const g = out.gradLogp as Float32Array;
    assert.ok(Math.abs(g[0] + Math.exp(0.1) / 3) < 1e-6 && Math.abs(g[1] + 1 / 3) < 1e-6 && g[2] === 0);
    assert.ok(Math.abs(out.stats.clipLowFrac - 1 / 3) < 1e-12);
  });
});

describe('grpoLoss gradient by finite differences', () => {
  for (const lossType of ['dapo', 'grpo', 'dr_grpo'] as LossType[]) {
    it(lossType, () => {
      // small drift keeps ratios away from the clip kinks, where the loss is not differentiable
      const c = makeCase(4, 6, { ref: true, mask: true, drift: 0.05 });
      const p = { ...base, lossType, beta: 0.1, epsLow: 0.5, epsHigh: 0.5, normLength: 8 };
      const out = grpoLoss({ ...c.input, ...p });
      const logp = c.input.logp as Float32Array;
      // The loss is summed in fp32, so each evaluation carries a rounding error of ~|loss| x 2^-24
      // and a central difference over 2h carries that over 2h: with h = 1e-3 it was 6e-5 for a
      // loss of -1.58, more than the 1e-3 relative the comparison allows (MURPHY_SEED=715699691,
      // token 3: fd 0.0090599 vs 0.0091208; with h = 1e-2, 0.0091267). h = 1e-2 moves a ratio by
      // 1%, far from the clip bounds at 0.5 and 1.5; the step is taken as the fp32 values differ,
      // and the rounding term is in the bound.
      const h = 1e-2;
      for (let t = 0; t < logp.length; t++) {
        const lp = logp.slice(), lm = logp.slice();
        lp[t] += h;
        lm[t] -= h;
        const step = lp[t]! - lm[t]!;
        const fd = (grpoLoss({ ...c.input, ...p, logp: lp }).loss - grpoLoss({ ...c.input, ...p, logp: lm }).loss) / step;
        const g = (out.gradLogp as Float32Array)[t]!;
        const rounding = (4 * Math.max(1, Math.abs(out.loss)) * 2 ** -24) / step;
        assert.ok(Math.abs(fd - g) <= 1e-3 * (Math.abs(g) + 0.05) + rounding, `token ${t}: fd ${fd} vs ${g}`);
      }
    });
  }
});

describe('grpoLoss bad input', () => {
  const ok = { logp: new Float32Array(3), oldLogp: new Float32Array(3), advantages: new Float32Array(3), seqOffsets: new BigInt64Array([0n, 3n]) };
  it('NaN and infinity are reported with the token', () => {
    const lp = new Float32Array([0, NaN, 0]);
    assert.throws(() => grpoLoss({ ...ok, logp: lp }), /non-finite loss at token 1 \(logp=nan/);
    assert.throws(() => grpoLoss({ ...ok, oldLogp: new Float32Array([0, 0, -Infinity]) }), /non-finite loss at token 2/);
    // a NaN on a masked token is ignored
    assert.doesNotThrow(() => grpoLoss({ ...ok, logp: lp, mask: new Uint8Array([1, 0, 1]) }));
  });
  it('bad sequence offsets, lengths and parameters', () => {
    assert.throws(() => grpoLoss({ ...ok, seqOffsets: new BigInt64Array([0n, 2n]) }), /seqOffsets must start at 0 and end at nTokens = 3/);
    assert.throws(() => grpoLoss({ ...ok, seqOffsets: new BigInt64Array([0n, 2n, 1n, 3n]) }), /non-decreasing/);
    assert.throws(() => grpoLoss({ ...ok, seqOffsets: new BigInt64Array([0n]) }), /at least two entries/);
    assert.throws(() => grpoLoss({ ...ok, advantages: new Float32Array(2) }), /'advantages' has 2 elements but 3 are needed/);
    assert.throws(() => grpoLoss({ ...ok, mask: new Float32Array(3) as unknown as Uint8Array }), /'mask' must be a Uint8Array/);
    assert.throws(() => grpoLoss({ ...ok, beta: 0.1 }), /needs refLogp/);
    assert.throws(() => grpoLoss({ ...ok, dualClip: 0.5 }), /'dualClip' must be a number > 1, or 0 \(off\); got 0\.5/);
    assert.throws(() => grpoLoss({ ...ok, lossType: 'dr_grpo' }), /needs normLength > 0/);
    assert.throws(() => grpoLoss({ ...ok, lossType: 'ppo' as LossType }), /'lossType' \(config key "lossType", --loss-type\) must be one of dapo, grpo, dr_grpo; got "ppo"/);
    // the range is the config key's: named with its key and flag, checked before any native code
    assert.throws(() => grpoLoss({ ...ok, epsLow: 1.5 }), /'epsLow' \(config key "epsilon", --epsilon\) must be a number > 0 and < 1; got 1\.5/);
    assert.throws(() => grpoLoss({ ...ok, epsLow: 1 }), /'epsLow' \(config key "epsilon", --epsilon\)/);
  });
});
