import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { deserializeTree, serializeTree, treeToJSON, marsCredit, computeAdvantages, intraPrune, MurphyError } from '../../lib/murphy/index.js';
import { handTree, treeArb } from './helpers.js';

test('JSON holds every node field the report needs', () => {
  const t = handTree(2, [1, [0, [1, 0]]]);
  t.nodes[2]!.logprobs = [-1, -2, -3, -4, -5];
  t.nodes[2]!.tests = [{ name: 't1', passed: true }, { passed: false, message: 'AssertionError' }];
  const o = treeToJSON(t);
  assert.equal(o.version, 1);
  const n = o.nodes[2]!;
  assert.deepEqual(
    { turn: n.turn, parent: n.parent, group: n.group, promptTokens: n.promptTokens, completionTokens: n.completionTokens, credit: n.credit, advantage: n.advantage, pruned: n.pruned },
    { turn: 2, parent: 1, group: 1, promptTokens: 20, completionTokens: 5, credit: null, advantage: null, pruned: false },
  );
  marsCredit(t);
  computeAdvantages([t]);
  const o2 = treeToJSON(t, { tokenIds: false });
  assert.equal(o2.nodes[1]!.credit, 1);
  assert.equal(o2.nodes[2]!.completionIds, undefined);
  assert.equal(o2.groups[1]!.promptIds, undefined);
  assert.equal(o2.groups[1]!.promptTokens, 20);
  const back = deserializeTree(JSON.stringify(o2));
  assert.deepEqual(back.nodes[2]!.completionIds, []);
  assert.equal(back.nodes[1]!.credit, 1);
});

test('property: serialization round-trips (before and after credit, pruning, advantages)', () => {
  fc.assert(
    fc.property(treeArb, fc.boolean(), (t, process) => {
      if (process) {
        marsCredit(t);
        intraPrune([t], { keep: 2 });
        computeAdvantages([t]);
      }
      const s = serializeTree(t);
      const back = deserializeTree(s);
      assert.deepEqual(back, t); // problem is null in both
      return serializeTree(back) === s;
    }),
    { numRuns: 200 },
  );
});

test('malformed JSON and trees are rejected clearly', () => {
  assert.throws(() => deserializeTree('{'), /invalid JSON/);
  assert.throws(() => deserializeTree('{"version":2}'), /unsupported version 2/);
  const good = treeToJSON(handTree(2, [[0, [1]]]));
  const bad1 = structuredClone(good);
  bad1.nodes[1]!.group = 0;
  assert.throws(() => deserializeTree(bad1), /node 1 listed in group 1 but says group 0/);
  const bad2 = structuredClone(good);
  bad2.nodes[0]!.reward = 2;
  assert.throws(() => deserializeTree(bad2), MurphyError);
  const bad3 = structuredClone(good);
  (bad3.nodes[0] as unknown as Record<string, unknown>).turn = 'one';
  assert.throws(() => deserializeTree(bad3), /node 0 turn must be an integer/);
  const bad4 = structuredClone(good);
  bad4.groups[1]!.parent = 7;
  assert.throws(() => deserializeTree(bad4), /parent node 7 does not exist/);
});
