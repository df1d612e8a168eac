// Kernel 3 (fused multi-tensor AdamW) on the GPU against the CPU path, same inputs.
//
// Parameters and moments: both paths evaluate the same fp32 expressions in the same
// order, but the global norm is summed in a different order and the compilers may fuse
// multiply-adds differently, so they agree to a few ulps: relative 2e-6 (+ tiny absolute
// terms scaled by lr and the gradient size). The bf16 copy is checked bit-exactly:
//   round to nearest even: bf16 == RNE(the f32 param the same device wrote);
//   stochastic: bf16 == f32_to_bf16_stochastic(p, hash_u32(seed ^ (tensor *
//   0x9E3779B97F4A7C15), index)) recomputed here in BigInt, on both CPU and GPU, and
//   GPU bits == CPU bits wherever the two f32 params are bit-identical.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adamw, toBf16, type AdamWOptions, type AdamWTensor, type Tensor } from '../../lib/native.js';
import { Rng } from '../helpers/random.js';
import { numberToBf16Bits } from '../helpers/reference.js';
import { announceSeed, bf16Stochastic, f32Bits, freeAll, gpuOnly, hashU32, host, tensorSeed, up, worst } from './common.js';

const rng = new Rng(announceSeed('gpu/adamw'));

interface HostT {
  param: Float32Array;
  grad: Float32Array | Uint16Array;
  m: Float32Array;
  v: Float32Array;
  paramBf16?: Uint16Array;
  decay: boolean;
}

function makeSet(sizes: number[], o: { gscale?: number; bf16Grad?: (i: number) => boolean; copy?: (i: number) => boolean } = {}): HostT[] {
  return sizes.map((n, i) => ({
    param: rng.normals(n, 0.1),
    grad: newGrad(n, o.gscale ?? 1, o.bf16Grad?.(i) ?? false),
    m: rng.normals(n, 0.01),
    v: Float32Array.from(rng.normals(n, 0.01), (x) => x * x),
    paramBf16: (o.copy?.(i) ?? true) ? new Uint16Array(n) : undefined,
    decay: i % 3 !== 2,
  }));
}

function newGrad(n: number, scale: number, bf16: boolean): Float32Array | Uint16Array {
  const g = rng.normals(n, scale);
  return bf16 ? (toBf16(g) as Uint16Array) : g;
}

function clone(ts: HostT[]): HostT[] {
  return ts.map((t) => ({ param: t.param.slice(), grad: t.grad.slice(), m: t.m.slice(), v: t.v.slice(), paramBf16: t.paramBf16?.slice(), decay: t.decay }));
}

function toDev(ts: HostT[]): AdamWTensor[] {
  return ts.map((t) => ({
    param: up(t.param) as Tensor<'f32'>,
    grad: up(t.grad) as Tensor<'f32'>,
    m: up(t.m) as Tensor<'f32'>,
    v: up(t.v) as Tensor<'f32'>,
    ...(t.paramBf16 ? { paramBf16: up(t.paramBf16) as Tensor<'bf16'> } : {}),
    decay: t.decay,
  }));
}

function freeDev(ts: AdamWTensor[]) {
  for (const t of ts) freeAll(t.param, t.grad, t.m, t.v, t.paramBf16);
}

function asHost(ts: HostT[]): AdamWTensor[] {
  return ts.map((t) => ({ param: t.param, grad: t.grad as Float32Array, m: t.m, v: t.v, ...(t.paramBf16 ? { paramBf16: t.paramBf16 } : {}), decay: t.decay }));
}

/** Checks the bf16 copy bit-exactly against the f32 params the same path wrote. */
function checkBf16(label: string, ts: { p: Float32Array; b?: Uint16Array }[], opts: AdamWOptions) {
  for (let k = 0; k < ts.length; k++) {
    const { p, b } = ts[k];
    if (!b) continue;
    const seed = tensorSeed(opts.seed ?? 0, k);
    // every element of small tensors, a random sample of large ones
    const idx = p.length <= 20000 ? Array.from({ length: p.length }, (_, i) => i) : Array.from({ length: 5000 }, () => rng.int(p.length));
    for (const i of idx) {
      const want = opts.stochasticRounding ? bf16Stochastic(p[i], hashU32(seed, BigInt(i))) : numberToBf16Bits(p[i]);
      if (b[i] !== want)
        assert.fail(`${label}: tensor ${k} [${i}] bf16 0x${b[i].toString(16)} but ${opts.stochasticRounding ? 'stochastic' : 'RNE'} rounding of ${p[i]} gives 0x${want.toString(16)}`);
    }
  }
}

function compareStep(label: string, cpuT: HostT[], devT: AdamWTensor[], opts: AdamWOptions) {
  const rc = adamw(asHost(cpuT), opts);
  const rg = adamw(devT, opts);
  assert.equal(rg.skipped, rc.skipped, `${label}: skipped`);
  if (Number.isFinite(rc.gradNorm)) {
    assert.ok(Math.abs(rg.gradNorm - rc.gradNorm) <= 1e-5 * rc.gradNorm + 1e-12, `${label}: gradNorm gpu ${rg.gradNorm} cpu ${rc.gradNorm}`);
    assert.ok(Math.abs(rg.clipCoef - rc.clipCoef) <= 1e-5 * rc.clipCoef, `${label}: clipCoef gpu ${rg.clipCoef} cpu ${rc.clipCoef}`);
  } else {
    assert.ok(!Number.isFinite(rg.gradNorm), `${label}: gradNorm gpu ${rg.gradNorm} cpu ${rc.gradNorm}`);
    assert.equal(rg.clipCoef, rc.clipCoef, `${label}: clipCoef`);
  }
  const lr = opts.lr;
  const gpuSide: { p: Float32Array; b?: Uint16Array }[] = [];
  const cpuSide: { p: Float32Array; b?: Uint16Array }[] = [];
  let same = 0, compared = 0, agree = 0;
  for (let k = 0; k < cpuT.length; k++) {
    const c = cpuT[k], d = devT[k];
    const p = host<Float32Array>(d.param), m = host<Float32Array>(d.m), v = host<Float32Array>(d.v);
    let gs = 0;
    const g = c.grad instanceof Uint16Array ? Float32Array.from(c.grad, (h) => new Float32Array(new Uint32Array([h << 16]).buffer)[0]) : c.grad;
    for (const x of g) gs = Math.max(gs, Math.abs(x));
    const wp = worst(p, c.param, 1e-5 * lr + 1e-30, 2e-6);
    assert.ok(wp.ratio <= 1, `${label}: tensor ${k} param[${wp.index}] gpu ${p[wp.index]} cpu ${c.param[wp.index]}`);
    const wm = worst(m, c.m, 1e-6 * gs + 1e-30, 2e-6);
    assert.ok(wm.ratio <= 1, `${label}: tensor ${k} m[${wm.index}] gpu ${m[wm.index]} cpu ${c.m[wm.index]}`);
    const wv = worst(v, c.v, 1e-6 * gs * gs + 1e-30, 2e-6);
    assert.ok(wv.ratio <= 1, `${label}: tensor ${k} v[${wv.index}] gpu ${v[wv.index]} cpu ${c.v[wv.index]}`);
    const b = d.paramBf16 ? host<Uint16Array>(d.paramBf16) : undefined;
    gpuSide.push({ p, b });
    cpuSide.push({ p: c.param, b: c.paramBf16 });
    if (b && c.paramBf16)
      for (let i = 0; i < p.length; i++) {
        if (f32Bits(p[i]) !== f32Bits(c.param[i])) continue;
        same++;
        compared++;
        if (b[i] === c.paramBf16[i]) agree++;
      }
  }
  assert.equal(agree, compared, `${label}: GPU and CPU bf16 copies differ where their f32 params are identical`);
  if (!rc.skipped) {
    // a skipped step writes nothing, the bf16 copy included
    checkBf16(`${label} (gpu)`, gpuSide, opts);
    checkBf16(`${label} (cpu)`, cpuSide, opts);
  }
  return { rc, rg, same };
}

const sizes = [0, 1, 3, 4, 5, 8191, 8192, 8193, 70001, 300000];

describe('gpu adamw vs cpu', () => {
  for (const [name, extra] of [
    ['no clipping, round to nearest', { maxGradNorm: 0 }],
    ['clipping active, round to nearest', { maxGradNorm: 0.5 }],
    ['clipping inactive (large max norm)', { maxGradNorm: 1e6 }],
    ['clipping + stochastic rounding', { maxGradNorm: 1.0, stochasticRounding: true }],
    ['stochastic rounding, no clipping, big seed', { maxGradNorm: 0, stochasticRounding: true }],
  ] as [string, Partial<AdamWOptions>][]) {
    it(`${name}: 10 tensors (sizes 0..300001), f32/bf16 grads, decay on/off, 3 steps`, gpuOnly, () => {
      const set = makeSet(sizes, { gscale: 0.05, bf16Grad: (i) => i % 2 === 1, copy: (i) => i !== 4 });
      const cpuT = clone(set), devT = toDev(set);
      let totalSame = 0;
      for (let step = 1; step <= 3; step++) {
        if (step > 1) {
          // the same fresh gradients on both sides
          for (let k = 0; k < set.length; k++) {
            const g = newGrad(set[k].param.length, 0.05, k % 2 === 1);
            cpuT[k].grad = g;
            freeAll(devT[k].grad);
            devT[k].grad = up(g) as Tensor<'f32'>;
          }
        }
        const opts: AdamWOptions = {
          lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, step, seed: name.includes('big seed') ? 2 ** 52 + 12345 : 1000 + step, ...extra,
        };
        const { rc, same } = compareStep(`${name} step ${step}`, cpuT, devT, opts);
        totalSame += same;
        if (extra.maxGradNorm === 0.5) assert.ok(rc.clipCoef < 1, 'clipping is exercised');
      }
      console.log(`# ${name}: bf16 copies compared bit-for-bit at ${totalSame} elements with identical f32 params`);
      freeDev(devT);
    });
  }
  it('non-finite gradient: skipped with clipping (nothing changes), reported without', gpuOnly, () => {
    const set = makeSet([10, 20000], { gscale: 0.1 });
    (set[1].grad as Float32Array)[12345] = Infinity;
    const cpuT = clone(set), devT = toDev(set);
    const before = host<Float32Array>(devT[1].param).slice();
    const r = compareStep('skip', cpuT, devT, { lr: 1e-3, step: 1, maxGradNorm: 1 });
    assert.equal(r.rg.skipped, true);
    assert.equal(r.rg.clipCoef, 0);
    assert.deepEqual(host<Float32Array>(devT[1].param), before, 'a skipped step leaves the params unchanged');
    const r2 = adamw(devT, { lr: 1e-3, step: 1, maxGradNorm: 0 });
    assert.equal(r2.skipped, false);
    assert.ok(!Number.isFinite(r2.gradNorm));
    freeDev(devT);
  });
  it('many small tensors (one chunk each) and empty calls', gpuOnly, () => {
    const set = makeSet(Array.from({ length: 300 }, () => rng.int(50)), { gscale: 1 });
    const cpuT = clone(set), devT = toDev(set);
    compareStep('many small', cpuT, devT, { lr: 3e-4, step: 7, maxGradNorm: 2, weightDecay: 0.05 });
    freeDev(devT);
    const r = adamw([], { lr: 1e-3, step: 1, maxGradNorm: 1 });
    assert.equal(r.gradNorm, 0);
    assert.equal(r.skipped, false);
  });
  it('bad input is reported as on the CPU', gpuOnly, () => {
    const devT = toDev(makeSet([16]));
    assert.throws(() => adamw(devT, { lr: 1e-3, step: 0 }), /'?step'? must be/);
    assert.throws(() => adamw(devT, { lr: 1e-3, step: 1, beta1: 1 }), /beta1/);
    assert.throws(() => adamw(devT, { lr: -1, step: 1 }), /lr/);
    freeDev(devT);
  });
});
