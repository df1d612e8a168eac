import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { marsCredit, mersCredit, assignCredit, MurphyError } from '../../lib/murphy/index.js';
import { handTree, treeArb } from './helpers.js';

const credits = (t: { nodes: { credit: number }[] }) => t.nodes.map((n) => n.credit);
const approx = (got: number[], want: number[]) => {
  assert.equal(got.length, want.length);
  got.forEach((g, i) => assert.ok(Math.abs(g - want[i]!) < 1e-12, `node ${i}: got ${g}, want ${want[i]}`));
};

test('all pass: credit = reward, both methods', () => {
  const t = handTree(2, [1, 1, 1]);
  approx(credits(marsCredit(t)), [1, 1, 1]);
  approx(credits(mersCredit(t)), [1, 1, 1]);
});

test('all fail, S = 2', () => {
  // Three failed roots, each expanded into three failures.
  const t = handTree(2, [[0, [0, 0, 0]], [0, [0, 0, 0]], [0, [0, 0, 0]]]);
  approx(credits(marsCredit(t)), new Array(12).fill(0));
  approx(credits(mersCredit(t)), new Array(12).fill(0));
});

test('one success among failures (S = 2)', () => {
  // node0 passes; node1 fails, children [1, 0, 0]; node2 r = 0.5, children all 0.5.
  const t = handTree(2, [1, [0, [1, 0, 0]], [0.5, [0.5, 0.5, 0.5]]]);
  // MaRS: node1 = max(0, max(1,0,0)) = 1; node2 = max(.5, .5) = .5
  approx(credits(marsCredit(t)), [1, 1, 0.5, 1, 0, 0, 0.5, 0.5, 0.5]);
  // MeRS (S=2, t=1): node1 = (0 + mean(1,0,0)) / 2 = 1/6; node2 = (.5 + .5)/2 = .5
  approx(credits(mersCredit(t)), [1, 1 / 6, 0.5, 1, 0, 0, 0.5, 0.5, 0.5]);
});

test('one child (G\' = 1)', () => {
  const t = handTree(2, [[0.25, [0.75]]]);
  approx(credits(marsCredit(t)), [0.75, 0.75]);
  approx(credits(mersCredit(t)), [(0.25 + 0.75) / 2, 0.75]);
});

test('depth 3, gamma = 1 and gamma < 1', () => {
  // root r=0 -> [a: 0 -> [0.25, 1], b: 1]
  const spec = [[0, [[0, [0.25, 1]], 1]]] as Parameters<typeof handTree>[1];
  // ids: 0 root, 1 a, 2 b, 3 (0.25), 4 (1)
  approx(credits(marsCredit(handTree(3, spec))), [1, 1, 1, 0.25, 1]);
  // gamma 0.9: a = max(0, .9*1) = .9; root = max(0, .9*max(.9, 1)) = .9
  approx(credits(marsCredit(handTree(3, spec), { gamma: 0.9 })), [0.9, 0.9, 1, 0.25, 1]);
  // MeRS S=3: a (t=2) = (0 + 1*mean(.25,1))/2 = .3125; root (t=1) = (0 + 2*mean(.3125,1))/3 = .4375
  approx(credits(mersCredit(handTree(3, spec))), [0.4375, 0.3125, 1, 0.25, 1]);
  // gamma .5: a = (0 + .5*.625)/2 = .15625; root = (0 + 2*.5*mean(.15625,1))/3 = .578125/3
  approx(credits(mersCredit(handTree(3, spec), { gamma: 0.5 })), [0.578125 / 3, 0.15625, 1, 0.25, 1]);
});

test('pass-rate rewards and ties', () => {
  // Partial credit: node r=.5 with children [.25, .75, .75] (tie for max)
  const t = handTree(2, [[0.5, [0.25, 0.75, 0.75]], [0.8, [0.1, 0.2, 0.3]]]);
  approx(credits(marsCredit(t)), [0.75, 0.8, 0.25, 0.75, 0.75, 0.1, 0.2, 0.3]);
  // MeRS: (.5 + (1.75/3))/2 ; (.8 + .2)/2 = .5
  approx(credits(mersCredit(t)), [(0.5 + 1.75 / 3) / 2, 0.5, 0.25, 0.75, 0.75, 0.1, 0.2, 0.3]);
});

test('MeRS: leaf before S keeps its own reward; S = 1 tree is all leaves', () => {
  const t = handTree(1, [0, 0.5, 1]);
  approx(credits(mersCredit(t)), [0, 0.5, 1]);
  approx(credits(marsCredit(t)), [0, 0.5, 1]);
});

test('assignCredit dispatches and rejects bad options', () => {
  const t = handTree(2, [[0, [1, 0]]]);
  approx(credits(assignCredit(t, { method: 'mers' })), [0.25, 1, 0]);
  approx(credits(assignCredit(t)), [1, 1, 0]);
  assert.throws(() => assignCredit(t, { method: 'x' as never }), MurphyError);
  assert.throws(() => marsCredit(t, { gamma: 1.5 }), /gamma/);
  assert.throws(() => mersCredit(t, { gamma: NaN }), /gamma/);
});

test('bad trees are rejected with clear errors', () => {
  const nan = handTree(2, [[0, [1, 0]]]);
  nan.nodes[1]!.reward = NaN;
  assert.throws(() => marsCredit(nan), /node 1 reward NaN not in \[0, 1\]/);
  const deep = handTree(1, [[0, [1]]]); // child at turn 2 > S = 1
  assert.throws(() => marsCredit(deep), /turn 2 outside \[1, 1\]/);
  const broken = handTree(2, [[0, [1, 0]]]);
  broken.nodes[0]!.childGroup = null;
  assert.throws(() => mersCredit(broken), /does not point back/);
  const s0 = handTree(2, [1]);
  s0.maxTurns = 0;
  assert.throws(() => marsCredit(s0), /maxTurns must be an integer >= 1/);
  const emptyGroup = handTree(2, [[0, [1]]]);
  emptyGroup.groups[1]!.nodes = [];
  assert.throws(() => marsCredit(emptyGroup), /group 1 has no nodes/);
});

test('property: MaRS credit >= own reward, <= 1; MeRS within [0, 1]', () => {
  fc.assert(
    fc.property(treeArb, fc.double({ min: 0, max: 1, noNaN: true }), (t, gamma) => {
      marsCredit(t, { gamma });
      for (const n of t.nodes) {
        if (!(n.credit >= n.reward && n.credit <= 1)) return false;
        if (n.childGroup === null && n.credit !== n.reward) return false;
      }
      mersCredit(t, { gamma });
      for (const n of t.nodes) if (!(n.credit >= 0 && n.credit <= 1 + 1e-12)) return false;
      return true;
    }),
    { numRuns: 300 },
  );
});

test('property: MaRS with gamma = 1 equals the best reward in the subtree', () => {
  fc.assert(
    fc.property(treeArb, (t) => {
      marsCredit(t);
      const best = (id: number): number => {
        const n = t.nodes[id]!;
        if (n.childGroup === null) return n.reward;
        return Math.max(n.reward, ...t.groups[n.childGroup]!.nodes.map(best));
      };
      return t.nodes.every((n) => n.credit === best(n.id));
    }),
    { numRuns: 200 },
  );
});
