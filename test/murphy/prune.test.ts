import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { interPrune, intraPrune, marsCredit, maxVarianceSubset, subsetVariance, computeAdvantages, MurphyError } from '../../lib/murphy/index.js';
import { handTree, treeArb } from './helpers.js';

function bruteMaxVariance(values: number[], m: number): number {
  let best = -Infinity;
  const n = values.length;
  for (let mask = 0; mask < 1 << n; mask++) {
    let c = 0;
    for (let i = 0; i < n; i++) if (mask & (1 << i)) c++;
    if (c !== m) continue;
    const idx = [];
    for (let i = 0; i < n; i++) if (mask & (1 << i)) idx.push(i);
    best = Math.max(best, subsetVariance(values, idx));
  }
  return best;
}

test('maxVarianceSubset by hand', () => {
  assert.deepEqual(maxVarianceSubset([0.5, 0, 1, 0.25], 2), [1, 2]); // the two extremes
  assert.deepEqual(maxVarianceSubset([0, 0, 0, 1], 2), [0, 3]);
  // [0, .1, .9, 1] m=3: k=1: {0,.1,1} var; k=2: {0,.9,1}: symmetric → tie, smallest k wins
  assert.deepEqual(maxVarianceSubset([0, 0.1, 0.9, 1], 3), [0, 1, 3]);
  // ties among equal values prefer lower indices
  assert.deepEqual(maxVarianceSubset([1, 1, 1, 0, 0], 2), [0, 3]);
  assert.deepEqual(maxVarianceSubset([0.3, 0.1], 5), [0, 1]);
  assert.deepEqual(maxVarianceSubset([0.3, 0.1], 0), []);
  assert.throws(() => maxVarianceSubset([0, NaN, 1], 2), /NaN/);
  assert.throws(() => maxVarianceSubset([0, 1], -1), MurphyError);
});

test('property: max-variance down-sampling matches brute force over all subsets', () => {
  const vals = fc.array(fc.oneof(fc.constantFrom(0, 0.25, 0.5, 1), fc.double({ min: 0, max: 1, noNaN: true })), { minLength: 1, maxLength: 10 });
  fc.assert(
    fc.property(vals, fc.nat(10), (values, mm) => {
      const m = Math.min(values.length, mm);
      const pick = maxVarianceSubset(values, m);
      if (pick.length !== m || new Set(pick).size !== m) return false;
      if (pick.some((i) => i < 0 || i >= values.length)) return false;
      const best = bruteMaxVariance(values, m);
      return Math.abs(subsetVariance(values, pick) - best) <= 1e-12;
    }),
    { numRuns: 400 },
  );
});

test('IntraP on a hand tree keeps m per group and reports savings', () => {
  const t = handTree(2, [1, [0, [1, 0.5, 0, 0]], [0.5, [0.5, 0.5, 0.5, 0.5]], 0.25]);
  marsCredit(t); // group0 credits [1, 1, .5, .25]
  const r = intraPrune([t], { keep: 2 });
  const kept = (g: number) => t.groups[g]!.nodes.filter((i) => !t.nodes[i]!.pruned);
  assert.deepEqual(kept(0), [0, 3]); // 1 and .25: the extremes (lowest index among tied 1s)
  assert.deepEqual(kept(1), [4, 6]); // 1 and the first 0
  assert.deepEqual(kept(2), [8, 9]);
  assert.equal(r.samples, 6);
  assert.equal(r.completionTokens, 6 * 5);
  assert.equal(r.promptTokens, 2 * 10 + 2 * 20 + 2 * 20);
  assert.equal(t.nodes[1]!.prunedBy, 'intra');
  assert.throws(() => intraPrune([t], { keep: 0 }), /keep/);
});

test('InterP keeps the b expanded groups with most spread; zero-variance first to go', () => {
  // Expanded groups: g1 spread of [1,0,0]; g2 [0.5,0.5,0.5] zero; g3 [0.25, 0.75, 0.5]
  const t = handTree(2, [[0, [1, 0, 0]], [0.5, [0.5, 0.5, 0.5]], [0.2, [0.25, 0.75, 0.5]]]);
  marsCredit(t);
  const r = interPrune([t], { perProblem: 2 });
  assert.deepEqual(t.groups.map((g) => g.pruned), [false, false, true, false]);
  assert.equal(r.groups, 1);
  assert.equal(r.samples, 3);
  assert.equal(r.completionTokens, 15);
  assert.equal(r.promptTokens, 60);
  const r1 = interPrune([t], { perProblem: 1 });
  assert.deepEqual(t.groups.map((g) => g.pruned), [false, false, true, true]);
  assert.equal(r1.groups, 1);
  assert.equal(t.nodes[10]!.prunedBy, 'inter');
});

test('InterP per batch and dropZeroVariance', () => {
  const a = handTree(2, [[0, [1, 0]], [0, [0, 0]]], 'a');
  const b = handTree(2, [[0, [0.5, 0]]], 'b');
  for (const t of [a, b]) marsCredit(t);
  interPrune([a, b], { perBatch: 1 });
  assert.deepEqual(a.groups.map((g) => g.pruned), [false, false, true]);
  assert.deepEqual(b.groups.map((g) => g.pruned), [false, true]);
  const c = handTree(2, [[0, [1, 0]], [0, [0, 0]]], 'c');
  marsCredit(c);
  interPrune([c], { dropZeroVariance: true });
  assert.deepEqual(c.groups.map((g) => g.pruned), [false, false, true]);
  assert.throws(() => interPrune([c], { perProblem: -1 }), /perProblem/);
});

test('property: pruning never adds samples; IntraP groups have <= m kept; advantages still sum to zero', () => {
  fc.assert(
    fc.property(treeArb, fc.integer({ min: 2, max: 3 }), fc.integer({ min: 0, max: 4 }), (t, m, b) => {
      marsCredit(t);
      const before = t.nodes.length;
      const r1 = interPrune([t], { perProblem: b });
      const r2 = intraPrune([t], { keep: m });
      const kept = t.nodes.filter((n) => !n.pruned).length;
      if (kept !== before - r1.samples - r2.samples || kept > before) return false;
      for (const g of t.groups) if (g.nodes.filter((i) => !t.nodes[i]!.pruned).length > m) return false;
      if (t.groups.filter((g) => g.parent !== null && !g.pruned).length > b) return false;
      if (t.groups[0]!.pruned) return false;
      computeAdvantages([t]);
      for (const g of t.groups) {
        const s = g.nodes.filter((i) => !t.nodes[i]!.pruned).reduce((a, i) => a + t.nodes[i]!.advantage, 0);
        if (Math.abs(s) > 1e-9) return false;
      }
      return t.nodes.filter((n) => n.pruned).every((n) => n.advantage === 0);
    }),
    { numRuns: 300 },
  );
});
