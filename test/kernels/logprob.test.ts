// Kernel 1 (log-prob gathering) against a float64 reference, finite differences and bad input.
//
// Tolerances. fp32 inputs: the kernel sums V exponentials in fp32 (vector-lane partial sums)
// and forms z/T - lse in fp32, so |logp - ref| <= 1e-5 (1 + |lse|) (a few fp32 ulps of the
// operands, with V = 151,936 terms). Gradients: relative 5e-5 of the entry plus 1e-7 |g|/T
// absolute, plus the cancellation in g (1 - p) / T where p is near 1 (checkBackward). bf16 inputs: the reference is computed from the same bf16 values, so the forward
// tolerances are unchanged; the bf16 gradient output adds bf16's rounding (2^-8 relative).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { logprobBackward, logprobForward, toBf16, type Tensor } from '../../lib/native.js';
import { Rng, testSeed } from '../helpers/random.js';
import { bf16BitsToNumber, logprobGradRef, logprobRef } from '../helpers/reference.js';

const rng = new Rng(testSeed('logprob'));

function f32(t: Tensor<'f32'> | Tensor<'bf16'>): Float32Array {
  assert.ok(t instanceof Float32Array);
  return t;
}

function case_(n: number, v: number, opts: { temp?: number; scale?: number; bf16?: boolean; negInf?: number; maskRows?: number[] } = {}) {
  const z = rng.normals(n * v, opts.scale ?? 3);
  for (let k = 0; k < (opts.negInf ?? 0) * n * v; k++) z[rng.int(n * v)] = -Infinity;
  for (const r of opts.maskRows ?? []) z.fill(-Infinity, r * v, (r + 1) * v);
  const targets = new Int32Array(n);
  for (let r = 0; r < n; r++) {
    targets[r] = rng.int(v);
    // keep the target finite unless the whole row is masked
    if (!(opts.maskRows ?? []).includes(r) && z[r * v + targets[r]] === -Infinity) z[r * v + targets[r]] = 0.5;
  }
  let logits: Float32Array | Uint16Array = z;
  let zRef: ArrayLike<number> = z;
  if (opts.bf16) {
    const b = toBf16(z) as Uint16Array;
    logits = b;
    zRef = Array.from(b, bf16BitsToNumber);
  }
  return { z: zRef, logits, targets, n, v, t: opts.temp ?? 1 };
}

function checkForward(c: ReturnType<typeof case_>, label: string) {
  const out = logprobForward({ logits: c.logits, targets: c.targets, nRows: c.n, vocab: c.v, temperature: c.t, entropy: true });
  const ref = logprobRef(c.z, c.targets, c.n, c.v, c.t);
  for (let r = 0; r < c.n; r++) {
    const tol = 1e-5 * (1 + Math.abs(ref.lse[r]));
    const lp = f32(out.logp)[r], ls = f32(out.lse)[r], h = f32(out.entropy!)[r];
    if (ref.lse[r] === -Infinity) {
      assert.equal(lp, -Infinity, `${label}: masked row ${r} logp`);
      assert.equal(ls, -Infinity, `${label}: masked row ${r} lse`);
      assert.equal(h, 0, `${label}: masked row ${r} entropy`);
      continue;
    }
    assert.ok(Math.abs(lp - ref.logp[r]) <= tol, `${label}: row ${r} logp ${lp} vs ${ref.logp[r]}`);
    assert.ok(Math.abs(ls - ref.lse[r]) <= tol, `${label}: row ${r} lse ${ls} vs ${ref.lse[r]}`);
    assert.ok(Math.abs(h - ref.entropy[r]) <= 1e-5 * (1 + Math.abs(ref.entropy[r])) * 4, `${label}: row ${r} entropy ${h} vs ${ref.entropy[r]}`);
  }
  return out;
}

function checkBackward(c: ReturnType<typeof case_>, label: string, bf16 = false) {
  const fwd = logprobForward({ logits: c.logits, targets: c.targets, nRows: c.n, vocab: c.v, temperature: c.t });
  const g = rng.normals(c.n, 1);
  if (c.n > 2) g[1] = 0; // a row with zero gradient
  const out = logprobBackward({ logits: c.logits, targets: c.targets, nRows: c.n, vocab: c.v, temperature: c.t, lse: fwd.lse, gradLogp: g });
  const ref = logprobGradRef(c.z, c.targets, g, c.n, c.v, c.t);
  const got = bf16 ? Array.from(out as Uint16Array, bf16BitsToNumber) : f32(out);
  let gmax = 0;
  for (const x of g) gmax = Math.max(gmax, Math.abs(x));
  // The kernel forms p = exp(z/T - lse) from two fp32 numbers of size ~|lse|, so p carries an
  // absolute error of a few ulps of |lse| times p; where p is near 1 (the target of a nearly
  // one-hot row) the entry g (1 - p) / T cancels and keeps that error: up to 8 ulps (2^-21
  // relative) of 1 + |lse|, times |g| p / T, on top of the tolerances above.
  const { lse } = logprobRef(c.z, c.targets, c.n, c.v, c.t);
  let ratio = 0, index = -1;
  for (let i = 0; i < ref.length; i++) {
    if (got[i] === ref[i]) continue;
    const r = Math.floor(i / c.v);
    const p = Math.exp(Number(c.z[i]) / c.t - lse[r]);
    const cancel = (Math.abs(g[r]) / c.t) * p * 2 ** -21 * (1 + Math.abs(lse[r]));
    const q = Math.abs(got[i] - ref[i]) / (1e-7 * gmax / c.t + (bf16 ? 1e-30 : 0) + cancel + (bf16 ? 4.5e-3 : 5e-5) * Math.abs(ref[i]));
    if (!(q <= ratio)) { ratio = Number.isNaN(q) ? Infinity : q; index = i; }
  }
  assert.ok(ratio <= 1, `${label}: gradient entry ${index}: ${got[index]} vs ${ref[index]} (ratio ${ratio})`);
}

describe('logprobForward vs float64', () => {
  it('random shapes, f32', () => {
    for (let k = 0; k < 12; k++) {
      const c = case_(1 + rng.int(20), 1 + rng.int(3000), { temp: rng.uniform(0.3, 1.7) });
      checkForward(c, `n=${c.n} v=${c.v} T=${c.t.toFixed(3)}`);
    }
  });
  it('awkward shapes: N = 1, V = 1, V not a multiple of the vector width', () => {
    for (const [n, v] of [[1, 1], [7, 1], [1, 17], [3, 31], [5, 33], [2, 1023], [1, 65537]]) checkForward(case_(n, v), `n=${n} v=${v}`);
    // V = 1: logp is 0 within the exp's error at 0: the FMA copies take t = z a - fl(M a) (a = log2(e) / T,
    // one FMA), which leaves the max a residual of at most half an ulp of M a, and 2^t rounds near 1
    const one = logprobForward({ logits: new Float32Array([3.5]), targets: new Int32Array([0]), nRows: 1, vocab: 1 });
    assert.ok(Math.abs(f32(one.logp)[0]) <= 2e-7, `V = 1: logp ${f32(one.logp)[0]}`);
  });
  it('Qwen3 vocabulary, V = 151,936, f32 and bf16', () => {
    checkForward(case_(3, 151936, { scale: 4 }), 'qwen3 f32');
    checkForward(case_(3, 151936, { scale: 4, bf16: true }), 'qwen3 bf16');
  });
  it('a row whose max rises block after block (each block of 1,024 rescales the sums before it)', () => {
    for (const bf16 of [false, true]) {
      const c = case_(3, 20000 + rng.int(3000), { temp: rng.uniform(0.5, 1.5), bf16 });
      const z = Float64Array.from(c.z);
      // row 0 rises by 2 per block, row 1 by 40 (earlier blocks underflow to 0), row 2 falls
      const slope = [2, 40, -2];
      for (let r = 0; r < c.n; r++) for (let j = 0; j < c.v; j++) z[r * c.v + j] += slope[r] * Math.floor(j / 1024) + rng.uniform(0, 1);
      const logits = bf16 ? (toBf16(Float32Array.from(z)) as Uint16Array) : Float32Array.from(z);
      const zRef = bf16 ? Array.from(logits as Uint16Array, bf16BitsToNumber) : Array.from(logits as Float32Array);
      checkForward({ ...c, z: zRef, logits }, `rising max ${bf16 ? 'bf16' : 'f32'} v=${c.v} T=${c.t.toFixed(3)}`);
    }
  });
  it('bf16 inputs, random shapes', () => {
    for (let k = 0; k < 6; k++) {
      const c = case_(1 + rng.int(9), 1 + rng.int(5000), { bf16: true, temp: rng.uniform(0.5, 1.5) });
      checkForward(c, `bf16 n=${c.n} v=${c.v}`);
    }
  });
  it('-inf entries and fully masked rows', () => {
    checkForward(case_(6, 999, { negInf: 0.3, maskRows: [0, 4] }), '-inf');
    checkForward(case_(4, 257, { negInf: 0.5, maskRows: [2], bf16: true }), '-inf bf16');
  });
  it('writes into caller-provided output arrays', () => {
    const c = case_(4, 100);
    const out = { logp: new Float32Array(4), lse: new Float32Array(4), entropy: new Float32Array(4) };
    const r = logprobForward({ logits: c.logits, targets: c.targets, nRows: 4, vocab: 100, entropy: true, out });
    assert.equal(r.logp, out.logp);
    assert.equal(r.entropy, out.entropy);
    assert.deepEqual(out.lse, logprobForward({ logits: c.logits, targets: c.targets, nRows: 4, vocab: 100 }).lse);
  });
  it('large logits keep their precision', () => {
    const z = new Float32Array([1e4, 1e4 - 1, -1e4, 0, 88, 89]);
    const out = logprobForward({ logits: z, targets: new Int32Array([1]), nRows: 1, vocab: 6 });
    const ref = logprobRef(z, [1], 1, 6, 1);
    assert.ok(Math.abs(f32(out.logp)[0] - ref.logp[0]) < 1e-5);
  });
});

describe('logprobBackward vs float64', () => {
  it('random shapes, f32', () => {
    for (let k = 0; k < 10; k++) {
      const c = case_(1 + rng.int(12), 1 + rng.int(2000), { temp: rng.uniform(0.3, 1.7) });
      checkBackward(c, `n=${c.n} v=${c.v}`);
    }
  });
  it('V = 151,936, -inf and masked rows, bf16', () => {
    checkBackward(case_(2, 151936, { scale: 4 }), 'qwen3');
    checkBackward(case_(5, 300, { negInf: 0.3, maskRows: [3] }), '-inf');
    checkBackward(case_(4, 4099, { bf16: true }), 'bf16', true);
  });
  it('matches finite differences of the forward pass', () => {
    const n = 3, v = 11, t = 0.7;
    const z = rng.normals(n * v, 1);
    const targets = Int32Array.from({ length: n }, () => rng.int(v));
    const g = rng.normals(n, 1);
    const L = (zz: Float32Array) => {
      const lp = f32(logprobForward({ logits: zz, targets, nRows: n, vocab: v, temperature: t }).logp);
      let s = 0;
      for (let r = 0; r < n; r++) s += g[r] * lp[r];
      return s;
    };
    const fwd = logprobForward({ logits: z, targets, nRows: n, vocab: v, temperature: t });
    const grad = f32(logprobBackward({ logits: z, targets, nRows: n, vocab: v, temperature: t, lse: fwd.lse, gradLogp: g }));
    const h = 1e-2;
    for (let i = 0; i < n * v; i++) {
      const zp = z.slice(), zm = z.slice();
      zp[i] += h;
      zm[i] -= h;
      const fd = (L(zp) - L(zm)) / (2 * h);
      // central differences: O(h^2) truncation plus fp32 rounding of L / h
      assert.ok(Math.abs(fd - grad[i]) <= 2e-3 * (1 + Math.abs(grad[i])), `entry ${i}: fd ${fd} vs ${grad[i]}`);
    }
  });
});

describe('logprob bad input', () => {
  const z = new Float32Array(12);
  it('out-of-range target ids are an error naming the row', () => {
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array([0, 1, 4]), nRows: 3, vocab: 4 }), /target id 4 at row 2 is outside the vocabulary \[0, 4\)/);
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array([-1, 1, 2]), nRows: 3, vocab: 4 }), /target id -1 at row 0/);
  });
  it('NaN in the logits is reported', () => {
    const bad = new Float32Array(12);
    bad[7] = NaN;
    assert.throws(() => logprobForward({ logits: bad, targets: new Int32Array([0, 1, 2]), nRows: 3, vocab: 4 }), /NaN in the logits of row 1/);
  });
  it('wrong lengths, dtypes and parameters are errors', () => {
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array([0, 1]), nRows: 3, vocab: 4 }), /'targets' has 2 elements but 3 are needed/);
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array(4), nRows: 4, vocab: 4 }), /'logits' has 12 elements but 16 are needed/);
    assert.throws(() => logprobForward({ logits: z, dtype: 'bf16', targets: new Int32Array(3), nRows: 3, vocab: 4 }), /'logits' must be a Uint16Array \(bf16 bits\)/);
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array(3), nRows: 3, vocab: 4, temperature: 0 }), /logprobForward: 'temperature' must be a number > 0; got 0/);
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array(3), nRows: 3, vocab: 2 ** 31 }), /'vocab' must be an integer in \[1, 2147483647\]/);
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array(3), nRows: 2 ** 42, vocab: 4 }), /'nRows' must be an integer/);
    assert.throws(() => logprobForward({ logits: z, targets: new Int32Array(3), nRows: 1.5, vocab: 4 }), /'nRows' must be an integer/);
    assert.throws(() => logprobForward({ logits: new Float64Array(12) as unknown as Float32Array, targets: new Int32Array(3), nRows: 3, vocab: 4 }), /'logits' must be a Float32Array/);
  });
  it('a detached buffer is an error, not a crash', () => {
    const d = new Float32Array(12);
    structuredClone(d.buffer, { transfer: [d.buffer] });
    assert.throws(() => logprobForward({ logits: d, targets: new Int32Array(3), nRows: 3, vocab: 4 }), /'logits' is a detached buffer/);
  });
  it('backward checks its output array', () => {
    const fwd = logprobForward({ logits: z, targets: new Int32Array(3), nRows: 3, vocab: 4 });
    assert.throws(() => logprobBackward({ logits: z, targets: new Int32Array(3), nRows: 3, vocab: 4, lse: fwd.lse, gradLogp: new Float32Array(3), out: new Float32Array(11) }), /'gradLogits' has 11 elements but 12 are needed/);
    // the logits themselves (in place) are a valid output; an output overlapping them otherwise is not
    const shared = new Float32Array(13);
    assert.throws(() => logprobBackward({ logits: shared.subarray(0, 12), targets: new Int32Array(3), nRows: 3, vocab: 4, lse: fwd.lse, gradLogp: new Float32Array(3), out: shared.subarray(1, 13) }), /gradLogits overlaps the logits without being them; pass the logits themselves \(in place\) or a separate buffer/);
  });
});
