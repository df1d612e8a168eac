// Kernel 1 (log-prob gathering) on the GPU against the CPU path, same random inputs.
//
// Tolerances. Both paths sum V exponentials in fp32, in different orders, and the GPU
// uses ex2.approx (2 ulp) in base 2: |logp_gpu - logp_cpu| <= 3e-5 (1 + |lse|), entropy
// 1e-4 (1 + H). Gradients: f32 relative 1e-4 plus 1e-5 |g|/T absolute; bf16 outputs may
// round to neighbouring bf16 values, so relative 2^-7 plus 1e-5 |g|/T.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { logprobBackward, logprobForward, toBf16, type Tensor } from '../../lib/native.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, empty, freeAll, gpuOnly, host, onDevice, dryRun, up, worst } from './common.js';

const rng = new Rng(announceSeed('gpu/logprob'));

interface Case {
  logits: Float32Array | Uint16Array;
  targets: Int32Array;
  n: number;
  v: number;
  t: number;
}

function makeCase(n: number, v: number, o: { temp?: number; scale?: number; bf16?: boolean; negInf?: number; maskRows?: number[] } = {}): Case {
  const z = rng.normals(n * v, o.scale ?? 3);
  const nInf = Math.floor((o.negInf ?? 0) * n * v);
  for (let k = 0; k < nInf; k++) z[rng.int(n * v)] = -Infinity;
  for (const r of o.maskRows ?? []) z.fill(-Infinity, r * v, (r + 1) * v);
  const targets = new Int32Array(n);
  for (let r = 0; r < n; r++) {
    targets[r] = rng.int(v);
    if (!(o.maskRows ?? []).includes(r) && z[r * v + targets[r]] === -Infinity) z[r * v + targets[r]] = 0.5;
  }
  return { logits: o.bf16 ? (toBf16(z) as Uint16Array) : z, targets, n, v, t: o.temp ?? 1 };
}

function f32(t: Tensor): Float32Array {
  const h = host(t);
  assert.ok(h instanceof Float32Array);
  return h;
}

function compare(c: Case, label: string, backward = true) {
  // CPU
  const cpu = logprobForward({ logits: c.logits, targets: c.targets, nRows: c.n, vocab: c.v, temperature: c.t, entropy: true });
  // GPU, same inputs
  const dLogits = up(c.logits), dTargets = up(c.targets);
  const gpu = logprobForward({ logits: dLogits as Tensor<'f32'>, targets: dTargets as Tensor<'i32'>, nRows: c.n, vocab: c.v, temperature: c.t, entropy: true });
  assert.ok(onDevice(gpu.logp), `${label}: outputs live on the device`);
  const cl = f32(cpu.logp), cs = f32(cpu.lse), ch = f32(cpu.entropy!);
  const gl = f32(gpu.logp), gs = f32(gpu.lse), gh = f32(gpu.entropy!);
  for (let r = 0; r < c.n; r++) {
    if (cs[r] === -Infinity) {
      assert.equal(gs[r], -Infinity, `${label}: masked row ${r} lse`);
      assert.equal(gl[r], -Infinity, `${label}: masked row ${r} logp`);
      assert.equal(gh[r], 0, `${label}: masked row ${r} entropy`);
      continue;
    }
    const tol = 3e-5 * (1 + Math.abs(cs[r]));
    assert.ok(Math.abs(gl[r] - cl[r]) <= tol, `${label}: row ${r} logp gpu ${gl[r]} cpu ${cl[r]}`);
    assert.ok(Math.abs(gs[r] - cs[r]) <= tol, `${label}: row ${r} lse gpu ${gs[r]} cpu ${cs[r]}`);
    assert.ok(Math.abs(gh[r] - ch[r]) <= 1e-4 * (1 + Math.abs(ch[r])), `${label}: row ${r} entropy gpu ${gh[r]} cpu ${ch[r]}`);
  }
  if (backward) {
    const g = rng.normals(c.n, 1);
    if (c.n > 2) g[1] = 0; // a zero upstream gradient gives a zero row
    const cg = logprobBackward({ logits: c.logits, targets: c.targets, nRows: c.n, vocab: c.v, temperature: c.t, lse: cpu.lse, gradLogp: g });
    const dG = up(g);
    const gg = logprobBackward({ logits: dLogits as Tensor<'f32'>, targets: dTargets as Tensor<'i32'>, nRows: c.n, vocab: c.v, temperature: c.t, lse: gpu.lse, gradLogp: dG as Tensor<'f32'> });
    let gmax = 0;
    for (let r = 0; r < c.n; r++) gmax = Math.max(gmax, Math.abs(g[r]));
    const bf16 = c.logits instanceof Uint16Array;
    const toNum = (t: Tensor) => {
      const h = host(t);
      if (h instanceof Uint16Array) return Float32Array.from(h, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]);
      return h as Float32Array;
    };
    const a = toNum(gg), b = toNum(cg);
    assert.equal(a.length, c.n * c.v);
    const w = worst(a, b, (1e-5 * gmax) / c.t, bf16 ? 2 ** -7 : 1e-4);
    assert.ok(w.ratio <= 1, `${label}: grad[${w.index}] gpu ${a[w.index]} cpu ${b[w.index]} (ratio ${w.ratio})`);
    if (c.n > 2) for (let j = 0; j < c.v; j++) assert.equal(a[1 * c.v + j], 0, `${label}: g = 0 row must be zero`);
    freeAll(dG, gg);
  }
  freeAll(dLogits, dTargets, gpu.logp, gpu.lse, gpu.entropy);
}

describe('gpu logprob vs cpu', () => {
  it('tiny shapes: N=1, V=1, V=2, V=3', gpuOnly, () => {
    compare(makeCase(1, 1), 'N1V1');
    compare(makeCase(1, 7), 'N1V7');
    compare(makeCase(5, 1), 'N5V1');
    compare(makeCase(3, 2), 'N3V2');
    compare(makeCase(4, 3, { bf16: true }), 'N4V3 bf16');
  });
  it('V not a multiple of 8 (unaligned rows: scalar head + vector body + tail)', gpuOnly, () => {
    for (const v of [13, 1001, 4099, 8191, 12345]) {
      compare(makeCase(6, v), `f32 V=${v}`);
      compare(makeCase(6, v, { bf16: true }), `bf16 V=${v}`);
    }
  });
  it('V = 151936 (Qwen3), f32 and bf16, temperature 0.7', gpuOnly, () => {
    compare(makeCase(3, 151936, { temp: 0.7 }), 'qwen f32');
    compare(makeCase(3, 151936, { bf16: true, scale: 5 }), 'qwen bf16');
  });
  it('many rows (grid larger than one wave), small V', gpuOnly, () => {
    compare(makeCase(5000, 37, { temp: 1.3 }), 'N5000 V37');
  });
  it('-inf entries and fully masked rows', gpuOnly, () => {
    compare(makeCase(6, 5003, { negInf: 0.3, maskRows: [0, 4] }), 'f32 -inf');
    compare(makeCase(6, 5003, { negInf: 0.9, maskRows: [2], bf16: true }), 'bf16 -inf');
    compare(makeCase(4, 64, { negInf: 0.99, maskRows: [3] }), 'mostly -inf');
    compare(makeCase(2, 9000, { maskRows: [0, 1] }), 'all rows masked');
  });
  it('large logits (scale 40) keep lse accurate', gpuOnly, () => {
    compare(makeCase(4, 32000, { scale: 40 }), 'scale 40');
  });
  it('N = 0 is a no-op', gpuOnly, () => {
    const d = empty('f32', 0), t = empty('i32', 0);
    const out = logprobForward({ logits: d, targets: t, nRows: 0, vocab: 10 });
    assert.equal(out.logp.length, 0);
    freeAll(d, t, out.logp, out.lse);
  });
  it('bad input: target out of range, NaN and +inf rows, mixed host/device arrays', gpuOnly, () => {
    const c = makeCase(4, 1000);
    const dL = up(c.logits) as Tensor<'f32'>;
    const bad = Int32Array.from(c.targets);
    bad[2] = 1000;
    let dT = up(bad) as Tensor<'i32'>;
    assert.throws(() => logprobForward({ logits: dL, targets: dT, nRows: 4, vocab: 1000 }), /target id 1000 at row 2 is outside the vocabulary \[0, 1000\)/);
    freeAll(dT);
    bad[2] = 0;
    bad[1] = -5;
    dT = up(bad) as Tensor<'i32'>;
    assert.throws(() => logprobForward({ logits: dL, targets: dT, nRows: 4, vocab: 1000 }), /target id -5 at row 1/);
    const lse = empty('f32', 4), g = empty('f32', 4);
    assert.throws(() => logprobBackward({ logits: dL, targets: dT, nRows: 4, vocab: 1000, lse, gradLogp: g }), /target id -5 at row 1/);
    freeAll(dT, dL);
    for (const [val, row] of [[NaN, 3], [Infinity, 1]] as const) {
      for (const bf16 of [false, true]) {
        const z = rng.normals(4 * 1000, 1);
        z[row * 1000 + 17] = val;
        const logits = bf16 ? (toBf16(z) as Uint16Array) : z;
        const dz = up(logits) as Tensor<'f32'>, dt = up(c.targets) as Tensor<'i32'>;
        assert.throws(() => logprobForward({ logits: dz, targets: dt, nRows: 4, vocab: 1000 }), new RegExp(`NaN in the logits of row ${row}`));
        // the CPU says the same
        assert.throws(() => logprobForward({ logits, targets: c.targets, nRows: 4, vocab: 1000 }), new RegExp(`NaN in the logits of row ${row}`));
        freeAll(dz, dt);
      }
    }
    const dz = up(c.logits) as Tensor<'f32'>;
    if (!dryRun) assert.throws(() => logprobForward({ logits: dz, targets: c.targets, nRows: 4, vocab: 1000 }), /same place/);
    assert.throws(() => logprobForward({ logits: dz, targets: empty('i32', 4), nRows: 4, vocab: 1000, temperature: -1 }), /'temperature' must be a number > 0; got -1/);
    freeAll(dz, lse, g);
  });
});
