// The TS/C++ contract: every option resolved in TypeScript from one table of defaults and
// ranges (the config schema's where the option is a config key), unknown keys refused, and
// the addon reading every field as required (no defaults filled in C++).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveConfig } from '../../lib/config/index.js';
import { adamw, grpoLoss, MurphyNativeError } from '../../lib/native.js';
import { nativeAddon } from '../../lib/native/loader.js';
import {
  resolveAdamWKernelOptions, resolveAdamWOptions, resolveGenerateOptions, resolveGrpoLossOptions, resolveTrainOptions,
} from '../../lib/native/options.js';

const lossInput = () => ({
  logp: new Float32Array([-1, -2, -3]), oldLogp: new Float32Array([-1, -2, -3]), advantages: new Float32Array([1, -1, 0.5]),
  seqOffsets: new BigInt64Array([0n, 3n]),
});
const tensor = () => ({ param: new Float32Array(4), grad: new Float32Array(4).fill(0.5), m: new Float32Array(4), v: new Float32Array(4) });

describe('native options', () => {
  it('resolve to the documented defaults (written out here, not read from the schema)', () => {
    assert.deepEqual(resolveGrpoLossOptions('t', {}), { epsLow: 0.2, epsHigh: 0.2, dualClip: 0, beta: 0, lossType: 'dapo', normLength: 0 });
    assert.deepEqual(resolveGrpoLossOptions('t', { epsLow: 0.1 }), { epsLow: 0.1, epsHigh: 0.1, dualClip: 0, beta: 0, lossType: 'dapo', normLength: 0 });
    // one set of AdamW defaults for the model and the kernel (weightDecay 0, maxGradNorm 1)
    const adam = { lr: 0.5, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, maxGradNorm: 1 };
    assert.deepEqual(resolveAdamWOptions('t', { lr: 0.5 }), adam);
    assert.deepEqual(resolveAdamWKernelOptions({ lr: 0.5, step: 3 }), { ...adam, step: 3, stochasticRounding: false, seed: 0 });
    assert.deepEqual(resolveTrainOptions({}, 0.5), {
      crossEntropy: false, temperature: 1, chunkTokens: 256, keepLogitsMb: 1024, gradScale: 0.5, epsLow: 0.2, epsHigh: 0.2, dualClip: 0, beta: 0, lossType: 'dapo', normLength: 0,
    });
    assert.deepEqual(resolveGenerateOptions({ maxNewTokens: 4 }, 2), { maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, minP: 0, n: 1, seed: 0, seeds: null, stopIds: [], topLogprobs: 0, releaseHeap: false, logprobs: true, cancel: null, onStep: null });
  });

  it('refuse unknown keys, missing required ones, and values out of range, naming the config key and flag', () => {
    assert.throws(() => grpoLoss({ ...lossInput(), epsilon: 0.2 } as never), /grpoLoss: unknown option 'epsilon' \(known: epsLow, epsHigh/);
    assert.throws(() => adamw([tensor()], { lr: 0.1, step: 1, weight_decay: 0.1 } as never), /adamw: unknown option 'weight_decay'/);
    assert.throws(() => adamw([tensor()], { step: 1 } as never), /adamw: 'lr' is required: a number >= 0/);
    assert.throws(() => resolveAdamWOptions('optimizerStep', { lr: 1, beta1: 1 }), /'beta1' \(config key "adamBeta1", --adam-beta1\) must be a number >= 0 and < 1; got 1/);
    assert.throws(() => resolveGenerateOptions({ maxNewTokens: 4, topP: 0 }, 1), /'topP' \(config key "topP", --top-p\) must be a number > 0 and <= 1; got 0/);
    assert.throws(() => resolveGenerateOptions({ maxNewTokens: 4, minP: 1.5 }, 1), /'minP' \(config key "minP", --min-p\) must be a number >= 0 and <= 1; got 1.5/);
    assert.throws(() => resolveTrainOptions({ epsLow: 0.2, temprature: 1 }, 1), /accumulate: unknown option 'temprature'/);
    for (const err of [() => grpoLoss({ ...lossInput(), epsLow: 2 }), () => resolveTrainOptions({}, -1)]) {
      assert.throws(err, (e: unknown) => e instanceof MurphyNativeError && e.code === 'EINVAL');
    }
  });

  it('the config refuses --epsilon 1 when it is resolved, before any work (the range the kernel uses)', () => {
    assert.throws(() => resolveConfig({ flags: { epsilon: 1 } }), /config key "epsilon" \(--epsilon\) in command-line flags: must be a number > 0 and < 1; got 1/);
    assert.throws(() => resolveConfig({ flags: { adamBeta2: 1 } }), /config key "adamBeta2" \(--adam-beta2\).*< 1; got 1/);
    assert.equal(resolveConfig({ flags: { epsilon: 0.99 } }).epsilon, 0.99);
  });

  it('the addon reads every option as required: a missing field is an error, not a default', () => {
    const raw = nativeAddon() as unknown as { grpoLoss(o: object): unknown; adamw(t: object[], h: object): unknown };
    const full = { ...resolveGrpoLossOptions('t', {}), ...lossInput() };
    assert.doesNotThrow(() => raw.grpoLoss(full));
    const { epsLow: _e, ...noEps } = full;
    assert.throws(() => raw.grpoLoss(noEps), /'epsLow' is missing from the resolved options/);
    const hyper = resolveAdamWKernelOptions({ lr: 0.1, step: 1 });
    const { weightDecay: _w, ...noWd } = hyper;
    assert.throws(() => raw.adamw([{ ...tensor(), decay: true }], noWd), /'weightDecay' is missing/);
    assert.throws(() => raw.adamw([tensor()], hyper), /'decay' is missing/);
  });

  it('the AdamW kernel runs with the model defaults: no weight decay, clipping at norm 1', () => {
    const n = 64;
    const w0 = Float32Array.from({ length: n }, (_, i) => Math.cos(i));
    const g = Float32Array.from({ length: n }, (_, i) => Math.sin(i) * 10); // norm well above 1
    const run = (o: { weightDecay?: number; maxGradNorm?: number }) => {
      const t = { param: Float32Array.from(w0), grad: g, m: new Float32Array(n), v: new Float32Array(n) };
      return { r: adamw([t], { lr: 0.01, step: 1, ...o }), p: t.param };
    };
    const byDefault = run({});
    const explicit = run({ weightDecay: 0, maxGradNorm: 1 });
    assert.ok(byDefault.r.clipCoef < 1, 'the default maxGradNorm (1) clips');
    assert.equal(byDefault.r.clipCoef, explicit.r.clipCoef);
    assert.deepEqual(byDefault.p, explicit.p);
    assert.notDeepEqual(run({ weightDecay: 0.01, maxGradNorm: 0 }).p, byDefault.p, 'the old kernel defaults differ');
  });
});
