// The sampler's processed distribution (docs/kernels.md, "Device decode kernels"), in float64,
// as the tests' independent reference: softmax(z / T) restricted to min-p, then top-k, then the
// smallest top-p prefix, renormalised. Shared by the decode kernel, paged step and generation tests.
import assert from 'node:assert/strict';

export interface SamplerOptions { temperature: number; topK: number; topP: number; minP: number }

export interface ProcessedDistribution {
  /** Token ids by descending logit (ties: lower id first). */
  order: number[];
  /** The first `keep` of `order` are the kept set. */
  keep: number;
  /** (z - max z) / T per token id. */
  x: number[];
  /** log of the kept set's sum of exp(x). */
  logS: number;
}

export function processedDistribution(z: ArrayLike<number>, o: SamplerOptions): ProcessedDistribution {
  const V = z.length;
  let m = -Infinity;
  for (let i = 0; i < V; i++) m = Math.max(m, z[i]!);
  const x = Array.from({ length: V }, (_, i) => (z[i]! - m) / o.temperature);
  const order = Array.from({ length: V }, (_, i) => i).sort((i, j) => z[j]! - z[i]! || i - j);
  let keep = o.minP > 0 ? order.filter((i) => x[i]! >= Math.log(o.minP)).length : V;
  if (o.topK > 0) keep = Math.min(keep, o.topK);
  if (o.topP < 1) {
    const total = order.slice(0, keep).reduce((s, i) => s + Math.exp(x[i]!), 0);
    let acc = 0, n = 0;
    while (n < keep && acc < o.topP * total) acc += Math.exp(x[order[n++]!]!);
    keep = n;
  }
  const logS = Math.log(order.slice(0, keep).reduce((s, i) => s + Math.exp(x[i]!), 0));
  return { order, keep, x, logS };
}

/** log p(token) under the processed distribution (for a token outside the kept set: its value had it been kept), and whether it is kept. */
export function processedLogp(z: ArrayLike<number>, token: number, o: SamplerOptions): { logp: number; kept: boolean } {
  const d = processedDistribution(z, o);
  return { logp: d.x[token]! - d.logS, kept: d.order.indexOf(token) < d.keep };
}

const CHI2_999 = [0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322]; // chi-square 0.999 quantiles by degrees of freedom

/**
 * counts[token] of N draws against the processed distribution: no draw outside the kept set,
 * at least two kept tokens, and Pearson's chi-square below its 0.999 quantile.
 */
export function assertChiSquare(counts: readonly number[], d: ProcessedDistribution, what: string): void {
  const N = counts.reduce((a, b) => a + b, 0);
  let chi = 0;
  d.order.forEach((tok, i) => {
    if (i >= d.keep) assert.equal(counts[tok], 0, `token ${tok} is outside the kept set but was drawn (${what})`);
    else {
      const e = N * Math.exp(d.x[tok]! - d.logS);
      chi += (counts[tok]! - e) ** 2 / e;
    }
  });
  assert.ok(d.keep >= 2, 'the case keeps at least two tokens');
  assert.ok(d.keep - 1 < CHI2_999.length, `no chi-square quantile for ${d.keep - 1} degrees of freedom`);
  assert.ok(chi < CHI2_999[d.keep - 1]!, `chi-square ${chi.toFixed(2)} >= ${CHI2_999[d.keep - 1]} with ${d.keep - 1} degrees of freedom (${what}, counts ${counts})`);
}
