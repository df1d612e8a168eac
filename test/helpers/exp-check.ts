// Measures the log-prob kernels' exp (native/cpu/logprob_simd.inc, lp_exp2) against the float64
// exp, through logprobBackward: with T = 1, lse = 0 and dL/dlogp = -1 the gradient entry j != y
// is exactly exp(z[j]) as the kernel computes it. Run as a script it prints the figures as JSON,
// so that a test can run it under MURPHY_SIMD=avx2|baseline (the other compiled copies).
import { cpuInfo, logprobBackward, logprobForward, toBf16 } from '../../lib/native.js';
import { Rng } from './random.js';
import { bf16BitsToNumber, logprobGradRef, logprobRef } from './reference.js';

export interface ExpErrors {
  simd: string;
  /** max |got / exp(x) - 1| over the sample, and where */
  maxRel: number;
  maxRelAt: number;
  /** max relative error divided by expBound(x) (<= 1 passes) */
  worstBoundRatio: number;
  worstBoundAt: number;
  /** [x, the kernel's exp(x)] for the edge values, as strings (JSON has no inf or NaN) */
  edges: [string, string][];
  count: number;
  /** bf16 logits through this copy's forward (with entropy) and backward: worst error / tolerance (<= 1 passes) */
  bf16Forward: number;
  bf16Backward: number;
}

export const EXP_EDGES = [
  -Infinity, -1e30, -1000, -104, -88.5, -87.8, -87.6, -87.33, -87, -80, -20, -1, -1e-3, -1e-30, 0, 1e-30, 1e-3, 1, 20, 80, 88, 88.3, 88.5, 89, 1e30, Infinity, NaN,
];

/** The bound stated in docs/kernels.md: relative error <= 2e-7 + 8e-8 |x| for x in [-87, 88]. */
export const expBound = (x: number) => 2e-7 + 8e-8 * Math.abs(x);

/** Kernel exp over `xs` (vector lanes and the scalar tail both run: the row is not a multiple of the width). */
export function kernelExp(xs: ArrayLike<number>): Float32Array {
  const v = xs.length + 1; // entry 0 is the target, whose gradient has the +g/T term
  const z = new Float32Array(v);
  z[0] = 0;
  for (let i = 0; i < xs.length; i++) z[i + 1] = xs[i];
  const out = logprobBackward({
    logits: z, targets: new Int32Array([0]), nRows: 1, vocab: v, temperature: 1,
    lse: new Float32Array([0]), gradLogp: new Float32Array([-1]),
  }) as Float32Array;
  return out.subarray(1);
}

export function measureExp(seed: number, samples = 1 << 20): ExpErrors {
  const rng = new Rng(seed);
  // uniform over [-87, 88], and a quarter log-spaced in -[1e-13, 87] (small and mid magnitudes)
  const xs = new Float32Array(samples + 33);
  for (let i = 0; i < samples; i++) xs[i] = i % 4 === 3 ? -Math.exp(rng.uniform(-30, Math.log(87))) : rng.uniform(-87, 88);
  const got = kernelExp(xs);
  let maxRel = 0, maxRelAt = 0, worst = 0, worstAt = 0;
  for (let i = 0; i < samples; i++) {
    const x = xs[i];
    const rel = Math.abs(got[i] / Math.exp(x) - 1);
    if (rel > maxRel) { maxRel = rel; maxRelAt = x; }
    const r = rel / expBound(x);
    if (r > worst) { worst = r; worstAt = x; }
  }
  const e = kernelExp(EXP_EDGES);
  const bf = bf16Check(rng);
  return {
    ...bf,
    simd: cpuInfo().simd, maxRel, maxRelAt, worstBoundRatio: worst, worstBoundAt: worstAt,
    edges: EXP_EDGES.map((x, i) => [String(x), String(e[i])]), count: samples,
  };
}

/**
 * bf16 logits (the unpack / pack paths of each copy) vs float64, with the tolerances of
 * test/kernels/logprob.test.ts: |logp - ref| and |lse - ref| <= 1e-5 (1 + |lse|), entropy 4x that;
 * gradient entries 4.5e-3 relative (bf16 output) plus 1e-7 |g| / T.
 */
function bf16Check(rng: Rng): { bf16Forward: number; bf16Backward: number } {
  const n = 3, v = 1000 + rng.int(100), t = rng.uniform(0.5, 1.5);
  const z = rng.normals(n * v, 3);
  for (let k = 0; k < 50; k++) z[rng.int(n * v)] = -Infinity;
  const targets = Int32Array.from({ length: n }, () => rng.int(v));
  for (let r = 0; r < n; r++) z[r * v + targets[r]!] = 1;
  const logits = toBf16(z) as Uint16Array;
  const zr = Array.from(logits, bf16BitsToNumber);
  const f = logprobForward({ logits, targets, nRows: n, vocab: v, temperature: t, entropy: true });
  const ref = logprobRef(zr, targets, n, v, t);
  let fw = 0;
  for (let r = 0; r < n; r++) {
    const tol = 1e-5 * (1 + Math.abs(ref.lse[r]!));
    fw = Math.max(fw, Math.abs((f.logp as Float32Array)[r]! - ref.logp[r]!) / tol, Math.abs((f.lse as Float32Array)[r]! - ref.lse[r]!) / tol,
      Math.abs((f.entropy as Float32Array)[r]! - ref.entropy[r]!) / (4e-5 * (1 + Math.abs(ref.entropy[r]!))));
  }
  const g = rng.normals(n, 1);
  const out = logprobBackward({ logits, targets, nRows: n, vocab: v, temperature: t, lse: f.lse, gradLogp: g }) as Uint16Array;
  const gref = logprobGradRef(zr, targets, g, n, v, t);
  let gmax = 0;
  for (const x of g) gmax = Math.max(gmax, Math.abs(x));
  let bw = 0;
  for (let i = 0; i < n * v; i++) bw = Math.max(bw, Math.abs(bf16BitsToNumber(out[i]!) - gref[i]!) / (1e-7 * gmax / t + 4.5e-3 * Math.abs(gref[i]!)));
  return { bf16Forward: fw, bf16Backward: bw };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  process.stdout.write(JSON.stringify(measureExp(Number(process.argv[2] ?? 1))));
}
