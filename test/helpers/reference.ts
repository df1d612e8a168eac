// Float64 references for the kernels: plain loops, written from the formulas,
// independent of the native code (only the statistics' names come from it).
import type { GrpoLossStats } from '../../lib/native.js';

// One f32 scratch word seen as float and as bits, shared by the two conversions below (a pair of
// typed arrays made per call cost ~0.5 us, 1.5 s over the 3M values of test/kernels/convert).
const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

export function bf16BitsToNumber(h: number): number {
  U32[0] = h << 16;
  return F32[0];
}

/** f32 -> bf16 bits, round to nearest even, computed with integer arithmetic on the f32 bits. */
export function numberToBf16Bits(x: number): number {
  F32[0] = x;
  const u = U32[0];
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
  const lower = u & 0xffff;
  let upper = u >>> 16;
  if (lower > 0x8000 || (lower === 0x8000 && (upper & 1) === 1)) upper += 1;
  return upper & 0xffff;
}

export interface LogprobRef {
  logp: Float64Array;
  lse: Float64Array;
  entropy: Float64Array;
}

export function logprobRef(z: ArrayLike<number>, targets: ArrayLike<number>, n: number, v: number, t: number): LogprobRef {
  const logp = new Float64Array(n), lse = new Float64Array(n), entropy = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    let m = -Infinity;
    for (let j = 0; j < v; j++) m = Math.max(m, z[r * v + j] / t);
    if (m === -Infinity) {
      logp[r] = lse[r] = -Infinity;
      entropy[r] = 0;
      continue;
    }
    let s = 0;
    for (let j = 0; j < v; j++) s += Math.exp(z[r * v + j] / t - m);
    lse[r] = m + Math.log(s);
    logp[r] = z[r * v + targets[r]] / t - lse[r];
    let h = 0;
    for (let j = 0; j < v; j++) {
      const x = z[r * v + j] / t;
      if (x === -Infinity) continue;
      const p = Math.exp(x - lse[r]);
      h -= p * (x - lse[r]);
    }
    entropy[r] = h;
  }
  return { logp, lse, entropy };
}

export function logprobGradRef(
  z: ArrayLike<number>, targets: ArrayLike<number>, g: ArrayLike<number>, n: number, v: number, t: number,
): Float64Array {
  const { lse } = logprobRef(z, targets, n, v, t);
  const out = new Float64Array(n * v);
  for (let r = 0; r < n; r++) {
    if (lse[r] === -Infinity || g[r] === 0) continue;
    for (let j = 0; j < v; j++) {
      const p = Math.exp(z[r * v + j] / t - lse[r]);
      out[r * v + j] = (g[r] * ((j === targets[r] ? 1 : 0) - p)) / t;
    }
  }
  return out;
}

export interface GrpoRefInput {
  logp: ArrayLike<number>;
  oldLogp: ArrayLike<number>;
  refLogp?: ArrayLike<number>;
  advantages: ArrayLike<number>;
  mask?: ArrayLike<number>;
  offsets: number[];
  epsLow: number;
  epsHigh: number;
  dualClip: number;
  beta: number;
  lossType: 'dapo' | 'grpo' | 'dr_grpo';
  normLength: number;
}

/** The reference's loss, dL/dlogp, per-token loss and the statistics grpoLoss reports. */
export interface GrpoRef extends GrpoLossStats {
  loss: number;
  grad: Float64Array;
  tokenLoss: Float64Array;
}

/** Written as TRL's GRPOTrainer computes it (torch.min of the two surrogates, then the loss type). */
export function grpoRef(x: GrpoRefInput): GrpoRef {
  const T = x.logp.length;
  const S = x.offsets.length - 1;
  const on = (t: number) => (x.mask ? x.mask[t] !== 0 : true);
  const tokenLoss = new Float64Array(T);
  const dl = new Float64Array(T); // dl_t / dlogp_t
  let low = 0, high = 0, dual = 0, active = 0, ratioSum = 0, klSum = 0;
  for (let t = 0; t < T; t++) {
    if (!on(t)) continue;
    const A = x.advantages[t];
    const r = Math.exp(x.logp[t] - x.oldLogp[t]);
    const rc = Math.min(Math.max(r, 1 - x.epsLow), 1 + x.epsHigh);
    const u = -r * A, c = -rc * A;
    let pg = Math.max(u, c);
    let d = u >= c || (r > 1 - x.epsLow && r < 1 + x.epsHigh) ? -r * A : 0;
    if (x.dualClip > 1 && A < 0 && -x.dualClip * A < pg) {
      pg = -x.dualClip * A;
      d = 0;
      dual++;
    }
    let kl = 0, dkl = 0;
    if (x.refLogp) {
      const e = x.refLogp[t] - x.logp[t];
      kl = Math.exp(e) - e - 1;
      dkl = 1 - Math.exp(e);
    }
    tokenLoss[t] = pg + x.beta * kl;
    dl[t] = d + x.beta * dkl;
    active++;
    ratioSum += r;
    klSum += kl;
    if (A < 0 && r < 1 - x.epsLow) low++;
    if (A > 0 && r > 1 + x.epsHigh) high++;
  }
  const w = new Float64Array(T);
  for (let s = 0; s < S; s++) {
    let cnt = 0;
    for (let t = x.offsets[s]; t < x.offsets[s + 1]; t++) cnt += on(t) ? 1 : 0;
    for (let t = x.offsets[s]; t < x.offsets[s + 1]; t++) {
      if (!on(t)) continue;
      if (x.lossType === 'dapo') w[t] = 1 / Math.max(1, active);
      else if (x.lossType === 'grpo') w[t] = 1 / (S * Math.max(1, cnt));
      else w[t] = 1 / (S * x.normLength);
    }
  }
  let loss = 0;
  const grad = new Float64Array(T);
  for (let t = 0; t < T; t++) {
    loss += w[t] * tokenLoss[t];
    grad[t] = w[t] * dl[t];
  }
  const inv = active ? 1 / active : 0;
  return {
    loss, grad, tokenLoss,
    clipLowFrac: low * inv, clipHighFrac: high * inv, dualClipFrac: dual * inv, meanRatio: ratioSum * inv,
    meanKl: klSum * inv, nActive: active,
  };
}
