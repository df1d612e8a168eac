// Kernel 3 (fused AdamW) against PyTorch (committed fixture, made by
// test/fixtures/make_adamw_fixture.py with torch.optim.AdamW + clip_grad_norm_) and against a
// float64 reference on fresh random inputs.
//
// Tolerances: per element the update is a handful of fp32 operations, so weights and moments
// agree with PyTorch's fp32 to a few ulps: relative 2e-6 plus an absolute 1e-7 scaled by lr.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { adamw, toBf16, type AdamWTensor } from '../../lib/native.js';
import { Rng, testSeed, worstRatio } from '../helpers/random.js';
import { bf16BitsToNumber, numberToBf16Bits } from '../helpers/reference.js';

const rng = new Rng(testSeed('adamw'));

interface FixtureStep {
  grads: Record<string, number[]>;
  grad_norm: number | null;
  param: Record<string, number[]>;
  m: Record<string, number[]>;
  v: Record<string, number[]>;
}
interface FixtureCase {
  config: { lr: number; beta1: number; beta2: number; eps: number; weight_decay: number; max_grad_norm: number; steps: number };
  decay: Record<string, boolean>;
  init: Record<string, number[]>;
  steps: FixtureStep[];
}
const fixture = JSON.parse(readFileSync(new URL('../fixtures/adamw_torch.json', import.meta.url), 'utf8')) as { torch_version: string; cases: FixtureCase[] };

describe(`adamw vs torch.optim.AdamW (PyTorch ${fixture.torch_version})`, () => {
  fixture.cases.forEach((c, ci) => {
    it(`case ${ci}: lr ${c.config.lr}, wd ${c.config.weight_decay}, clip ${c.config.max_grad_norm}, ${c.config.steps} steps`, () => {
      const names = Object.keys(c.init);
      const state = Object.fromEntries(names.map((k) => [k, {
        param: Float32Array.from(c.init[k]), m: new Float32Array(c.init[k].length), v: new Float32Array(c.init[k].length),
      }]));
      c.steps.forEach((s, si) => {
        const tensors: AdamWTensor[] = names.map((k) => ({ ...state[k], grad: Float32Array.from(s.grads[k]), decay: c.decay[k] }));
        const r = adamw(tensors, { lr: c.config.lr, beta1: c.config.beta1, beta2: c.config.beta2, eps: c.config.eps, weightDecay: c.config.weight_decay, step: si + 1, maxGradNorm: c.config.max_grad_norm });
        assert.equal(r.skipped, false);
        if (s.grad_norm !== null) assert.ok(Math.abs(r.gradNorm - s.grad_norm) <= 1e-5 * s.grad_norm, `step ${si}: grad norm ${r.gradNorm} vs ${s.grad_norm}`);
        const gmax = Math.max(...names.flatMap((k) => s.grads[k].map(Math.abs)));
        for (const k of names) {
          const pmax = Math.max(...s.param[k].map(Math.abs));
          // absolute parts: a few fp32 ulps of the operands that can cancel (p and lr for the
          // weights, g for the moments)
          const atol = { param: 2e-7 * (pmax + c.config.lr), m: 2e-7 * gmax, v: 2e-7 * gmax * gmax };
          for (const f of ['param', 'm', 'v'] as const) {
            const w = worstRatio(state[k][f], s[f][k], atol[f], 2e-6);
            assert.ok(w.ratio <= 1, `step ${si} ${k}.${f}[${w.index}]: ${state[k][f][w.index]} vs torch ${s[f][k][w.index]}`);
          }
        }
      });
    });
  });
});

/** float64 AdamW as the formulas in native/include/murphy/adamw.h state them. */
function refStep(ts: { p: Float64Array; m: Float64Array; v: Float64Array; g: ArrayLike<number>; decay: boolean }[], o: { lr: number; b1: number; b2: number; eps: number; wd: number; step: number; maxNorm: number }) {
  let sq = 0;
  for (const t of ts) for (let i = 0; i < t.g.length; i++) sq += t.g[i] * t.g[i];
  const norm = Math.sqrt(sq);
  const coef = o.maxNorm > 0 ? Math.min(1, o.maxNorm / (norm + 1e-6)) : 1;
  const bc1 = 1 - o.b1 ** o.step, bc2 = 1 - o.b2 ** o.step;
  for (const t of ts) {
    for (let i = 0; i < t.p.length; i++) {
      const g = coef * t.g[i];
      if (t.decay) t.p[i] *= 1 - o.lr * o.wd;
      t.m[i] = o.b1 * t.m[i] + (1 - o.b1) * g;
      t.v[i] = o.b2 * t.v[i] + (1 - o.b2) * g * g;
      t.p[i] -= (o.lr / bc1) * t.m[i] / (Math.sqrt(t.v[i]) / Math.sqrt(bc2) + o.eps);
    }
  }
  return { norm, coef };
}

describe('adamw vs float64 on random inputs', () => {
  it('many tensors (some larger than one 64K chunk), bf16 gradients, bf16 weight copy', () => {
    const sizes = [1, 7, 70000, 1000, 131073, 33];
    const o = { lr: rng.uniform(1e-4, 1e-2), b1: 0.9, b2: 0.98, eps: 1e-8, wd: rng.uniform(0, 0.2), maxNorm: 5, step: 0 };
    const ref = sizes.map((n, i) => ({ p: Float64Array.from(rng.normals(n, 0.3)), m: new Float64Array(n), v: new Float64Array(n), g: new Float32Array(n) as ArrayLike<number>, decay: i % 2 === 0 }));
    const got = ref.map((r) => ({ param: Float32Array.from(r.p), m: new Float32Array(r.p.length), v: new Float32Array(r.p.length), paramBf16: new Uint16Array(r.p.length), decay: r.decay }));
    for (let step = 1; step <= 3; step++) {
      const grads = sizes.map((n, i) => {
        const g = rng.normals(n, step === 2 ? 0.001 : 0.05);
        return i === 1 ? (toBf16(g) as Uint16Array) : g; // one tensor with bf16 gradients
      });
      ref.forEach((r, i) => (r.g = grads[i] instanceof Uint16Array ? Array.from(grads[i] as Uint16Array, bf16BitsToNumber) : grads[i]));
      // the reference starts from the kernel's fp32 state so errors do not compound
      ref.forEach((r, i) => { r.p = Float64Array.from(got[i].param); r.m = Float64Array.from(got[i].m); r.v = Float64Array.from(got[i].v); });
      const rr = refStep(ref, { ...o, step });
      const res = adamw(got.map((t, i) => ({ ...t, grad: grads[i] })), { lr: o.lr, beta1: o.b1, beta2: o.b2, eps: o.eps, weightDecay: o.wd, step, maxGradNorm: o.maxNorm });
      assert.ok(Math.abs(res.gradNorm - rr.norm) <= 1e-5 * rr.norm, `step ${step}: norm ${res.gradNorm} vs ${rr.norm}`);
      // coef = maxNorm / norm inherits the norm's relative error (the fp32 sums of 64K-element
      // chunks: how the compiler vectorises them moves it, e.g. in the sanitizer build)
      assert.ok(Math.abs(res.clipCoef - rr.coef) <= 1e-5 * rr.coef, `step ${step}: coef ${res.clipCoef} vs ${rr.coef}`);
      got.forEach((t, i) => {
        let gmax = 0, pmax = 0;
        for (let k = 0; k < ref[i].g.length; k++) gmax = Math.max(gmax, Math.abs(ref[i].g[k]));
        for (const x of ref[i].p) pmax = Math.max(pmax, Math.abs(x));
        const atol = { param: 2e-7 * (pmax + o.lr), m: 2e-7 * gmax, v: 2e-7 * gmax * gmax + 1e-30 };
        for (const [f, want] of [['param', ref[i].p], ['m', ref[i].m], ['v', ref[i].v]] as const) {
          const w = worstRatio(t[f], want, atol[f], 3e-6);
          assert.ok(w.ratio <= 1, `step ${step} tensor ${i} ${f}[${w.index}]: ${t[f][w.index]} vs ${want[w.index]}`);
        }
        // the bf16 copy is exactly the round-to-nearest-even of the fp32 weights
        for (let k = 0; k < t.param.length; k += 97) assert.equal(t.paramBf16[k], numberToBf16Bits(t.param[k]), `bf16 copy of tensor ${i}[${k}]`);
      });
    }
  });

  it('stochastic rounding: reproducible with a seed, within one bf16 step, unbiased', () => {
    const n = 200000;
    const mk = () => ({ param: new Float32Array(n).fill(1 + 1 / 3), grad: new Float32Array(n), m: new Float32Array(n), v: new Float32Array(n), paramBf16: new Uint16Array(n), decay: false });
    const a = mk(), b = mk(), c = mk();
    const opts = { lr: 0, step: 1, stochasticRounding: true };
    adamw([a], { ...opts, seed: 42 });
    adamw([b], { ...opts, seed: 42 });
    adamw([c], { ...opts, seed: 43 });
    assert.deepEqual(a.paramBf16, b.paramBf16, 'same seed, same bits');
    assert.notDeepEqual(a.paramBf16, c.paramBf16, 'other seed, other bits');
    const x = Math.fround(1 + 1 / 3);
    const down = bf16BitsToNumber(numberToBf16Bits(x) - (bf16BitsToNumber(numberToBf16Bits(x)) > x ? 1 : 0));
    const up = bf16BitsToNumber(numberToBf16Bits(down) + 1);
    let sum = 0;
    for (const h of a.paramBf16) {
      const y = bf16BitsToNumber(h);
      assert.ok(y === down || y === up, `rounded to a neighbour: ${y}`);
      sum += y;
    }
    // mean within 5 standard errors of the true value
    const p = (x - down) / (up - down);
    const se = (up - down) * Math.sqrt(p * (1 - p) / n);
    assert.ok(Math.abs(sum / n - x) < 5 * se, `mean ${sum / n} vs ${x}`);
  });

  it('a non-finite gradient norm with clipping skips the step and changes nothing', () => {
    const t = { param: new Float32Array([1, 2, 3]), grad: new Float32Array([0.1, NaN, 0.2]), m: new Float32Array(3), v: new Float32Array(3) };
    const r = adamw([t], { lr: 0.1, step: 1, maxGradNorm: 1 });
    assert.equal(r.skipped, true);
    assert.ok(Number.isNaN(r.gradNorm));
    assert.deepEqual(Array.from(t.param), [1, 2, 3]);
    assert.deepEqual(Array.from(t.m), [0, 0, 0]);
  });

  it('bad input names the tensor and the problem', () => {
    const ok = () => ({ param: new Float32Array(4), grad: new Float32Array(4), m: new Float32Array(4), v: new Float32Array(4) });
    assert.throws(() => adamw([ok(), { ...ok(), m: new Float32Array(3) }], { lr: 0.1, step: 1 }), /'tensors\[1\]\.m' has 3 elements but 4 are needed/);
    assert.throws(() => adamw([{ ...ok(), grad: new Int32Array(4) as unknown as Float32Array }], { lr: 0.1, step: 1 }), /'tensors\[0\]\.grad' must be a Float32Array/);
    assert.throws(() => adamw([ok()], { lr: 0.1, step: 0 }), /adamw: 'step' must be an integer >= 1 and <= \d+; got 0/);
    assert.throws(() => adamw([ok()], { lr: -1, step: 1 }), /adamw: 'lr' must be a number >= 0; got -1/);
    assert.throws(() => adamw([ok()], { lr: 0.1, step: 1, beta2: 1 }), /'beta2' \(config key "adamBeta2", --adam-beta2\) must be a number >= 0 and < 1; got 1/);
    assert.throws(() => adamw([ok()], { lr: NaN, step: 1 }), /adamw: 'lr' must be a number >= 0; got NaN/);
  });
});
