import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { computeAdvantages, groupAdvantages, marsCredit, sampleStd, MurphyError } from '../../lib/murphy/index.js';
import { handTree, treeArb } from './helpers.js';

const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} vs ${b}`);

test('groupAdvantages by hand: group, none, batch std; eps', () => {
  // [1, 0, 0]: mean 1/3, unbiased std sqrt(1/3)
  const s = Math.sqrt(1 / 3);
  const a = groupAdvantages([1, 0, 0], 'group', 0);
  [2 / 3 / s, -1 / 3 / s, -1 / 3 / s].forEach((w, i) => near(a[i]!, w));
  const b = groupAdvantages([1, 0, 0], 'group', 1e-4);
  near(b[0]!, 2 / 3 / (s + 1e-4));
  const c = groupAdvantages([1, 0, 0], 'none');
  [2 / 3, -1 / 3, -1 / 3].forEach((w, i) => near(c[i]!, w));
  const d = groupAdvantages([1, 0], 0.5, 0); // batch std given
  [1, -1].forEach((w, i) => near(d[i]!, w));
  assert.deepEqual(groupAdvantages([0.5, 0.5, 0.5]), [0, 0, 0]);
  assert.deepEqual(groupAdvantages([0.7]), [0]);
  assert.deepEqual(groupAdvantages([]), []);
  assert.throws(() => groupAdvantages([0, NaN]), /NaN/);
});

test('sampleStd is the unbiased std', () => {
  near(sampleStd([1, 2, 3, 4]), Math.sqrt(5 / 3));
  assert.equal(sampleStd([3]), 0);
});

test('computeAdvantages on a hand tree: groups, zero-variance count, pruned nodes', () => {
  // group 0: [1, 1(via MaRS), .5]; group 1 (children of node1): [1, 0, 0]; group 2: [.5,.5,.5] zero variance
  const t = handTree(2, [1, [0, [1, 0, 0]], [0.5, [0.5, 0.5, 0.5]]]);
  marsCredit(t);
  const r = computeAdvantages([t], { eps: 0 });
  assert.equal(r.groups, 3);
  assert.equal(r.zeroVarianceGroups, 1);
  assert.equal(r.samples, 9);
  const s0 = sampleStd([1, 1, 0.5]);
  near(t.nodes[0]!.advantage, (1 - 2.5 / 3) / s0);
  near(t.nodes[2]!.advantage, (0.5 - 2.5 / 3) / s0);
  assert.deepEqual([6, 7, 8].map((i) => t.nodes[i]!.advantage), [0, 0, 0]);
  // Pruning node 3 removes it from its group's statistics and zeroes its advantage.
  t.nodes[3]!.pruned = true;
  const r2 = computeAdvantages([t], { eps: 0, scale: 'none' });
  assert.equal(t.nodes[3]!.advantage, 0);
  assert.equal(r2.zeroVarianceGroups, 2); // [0, 0] left in group 1
  assert.equal(r2.samples, 8);
});

test('batch scaling uses one std over every kept sample', () => {
  const t1 = handTree(1, [1, 0]);
  const t2 = handTree(1, [1, 1, 0, 0]);
  marsCredit(t1);
  marsCredit(t2);
  const r = computeAdvantages([t1, t2], { scale: 'batch', eps: 0 });
  const s = sampleStd([1, 0, 1, 1, 0, 0]);
  near(r.batchStd, s);
  near(t1.nodes[0]!.advantage, 0.5 / s);
  near(t2.nodes[3]!.advantage, -0.5 / s);
});

test('errors: credit missing, bad options', () => {
  const t = handTree(1, [1, 0]);
  assert.throws(() => computeAdvantages([t]), /assign credit first/);
  marsCredit(t);
  assert.throws(() => computeAdvantages([t], { scale: 'x' as never }), MurphyError);
  assert.throws(() => computeAdvantages([t], { eps: -1 }), /eps/);
});

test('property: advantages of every group sum to zero; zero-variance groups are all zero', () => {
  fc.assert(
    fc.property(treeArb, fc.constantFrom('group', 'batch', 'none') as fc.Arbitrary<'group' | 'batch' | 'none'>, (t, scale) => {
      marsCredit(t);
      computeAdvantages([t], { scale });
      for (const g of t.groups) {
        const adv = g.nodes.map((i) => t.nodes[i]!.advantage);
        const cr = g.nodes.map((i) => t.nodes[i]!.credit);
        const sum = adv.reduce((a, b) => a + b, 0);
        const scaleMax = Math.max(1, ...adv.map(Math.abs));
        if (Math.abs(sum) > 1e-9 * scaleMax * adv.length) return false;
        if (Math.max(...cr) === Math.min(...cr) && adv.some((x) => x !== 0)) return false;
      }
      return true;
    }),
    { numRuns: 300 },
  );
});
