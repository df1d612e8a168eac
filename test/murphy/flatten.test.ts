import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  flattenSamples, treeStats, batchStats, marsCredit, computeAdvantages, intraPrune, interPrune, processTrees,
  grpoBaselineConfig, computeMatchedGroupSize, computeMatchedGrpoConfig, FakeSampler, FakeExecutor, FakePromptBuilder, MurphyError,
} from '../../lib/murphy/index.js';
import { buildAndProcess, handTree } from './helpers.js';

test('flattenSamples: kept nodes with prompt, completion, logprobs, advantage, ids', () => {
  const t = handTree(2, [1, [0, [1, 0, 0]], 0.5], 'prob');
  t.nodes[4]!.logprobs = [-1, -1, -1, -1, -1];
  marsCredit(t);
  intraPrune([t], { keep: 2 });
  computeAdvantages([t]);
  const s = flattenSamples([t]);
  assert.deepEqual(s.map((x) => x.nodeId), t.nodes.filter((n) => !n.pruned).map((n) => n.id));
  const four = s.find((x) => x.nodeId === 4);
  if (four) assert.deepEqual(four.logprobs, [-1, -1, -1, -1, -1]);
  const x = s.find((q) => q.turn === 2)!;
  assert.equal(x.groupId, 'prob#1');
  assert.equal(x.problemId, 'prob');
  assert.equal(x.promptIds, t.groups[1]!.promptIds);
  assert.equal(x.completionIds, t.nodes[x.nodeId]!.completionIds);
  assert.equal(x.advantage, t.nodes[x.nodeId]!.advantage);
  const nz = flattenSamples([t], { dropZeroAdvantage: true });
  assert.ok(nz.every((q) => q.advantage !== 0));
  const fresh = handTree(1, [1, 0]);
  assert.throws(() => flattenSamples([fresh]), /compute advantages first/);
});

test('treeStats by hand', () => {
  // S = 3: root0 passes; root1 fails -> [0 -> [1, 0], 0]; root2 fails -> [0.5, 0.5] (each -> [0, 0])
  const t = handTree(3, [1, [0, [[0, [1, 0]], [0, [0, 0]]]], [0.5, [[0.5, [0, 0]], [0.5, [0, 0]]]]]);
  marsCredit(t);
  interPrune([t], { perProblem: 3 });
  const s = treeStats(t);
  assert.deepEqual(s.nodesPerTurn, [3, 4, 8]);
  assert.deepEqual(s.passRatePerTurn, [1 / 3, 0, 1 / 8]);
  assert.equal(s.expanded, 2 + 4);
  assert.equal(s.fixedNextTurn, 1); // node 3 (turn 2) has a passing child
  assert.equal(s.fixedLater, 2); // + root1 via its grandchild
  assert.equal(s.solved, true);
  assert.equal(s.completionTokensSampled, 15 * 5);
  assert.equal(s.groupsPrunedInter, 3); // 6 expanded groups, keep 3
  assert.equal(s.prunedInter, 6);
  assert.equal(s.samplesKept, 9);
  assert.equal(s.completionTokensKept, 45);
});

test('batchStats, processTrees defaults and GRPO baselines', async () => {
  const r = await buildAndProcess(Array.from({ length: 20 }, (_, i) => i), { sampler: new FakeSampler({ passProbByTurn: [0.3, 0.3] }), executor: new FakeExecutor(), prompts: new FakePromptBuilder() }, { groupSize: 4, maxTurns: 2, seed: 3 });
  const b = r.stats;
  assert.equal(b.trees, 20);
  assert.equal(b.avgCompletionsPerProblem, r.trees.reduce((s, t) => s + t.nodes.length, 0) / 20);
  assert.ok(b.avgCompletionsPerProblem > 4);
  assert.equal(r.samples.length, b.samplesKept);
  assert.equal(r.report.intraP.samples, 0);
  assert.equal(r.report.interP.samples, 0);
  assert.equal(computeMatchedGroupSize(r.trees), Math.round(b.avgCompletionsPerProblem));
  assert.equal(computeMatchedGroupSize(7.5), 8);
  assert.throws(() => computeMatchedGroupSize([]), MurphyError);
  const base = { groupSize: 4, maxTurns: 2, seed: 3 };
  assert.deepEqual(grpoBaselineConfig(base), { groupSize: 4, maxTurns: 1, seed: 3 });
  const cm = computeMatchedGrpoConfig(base, 9.2);
  assert.deepEqual(cm, { groupSize: 9, followUpGroupSize: 9, maxTurns: 1, seed: 3 });
  const g = await buildAndProcess([0, 1], { sampler: new FakeSampler(), executor: new FakeExecutor(), prompts: new FakePromptBuilder() }, cm);
  assert.ok(g.trees.every((t) => t.nodes.length === 9 && t.groups.length === 1));
  // processTrees with pruning reports savings
  const rep = processTrees(r.trees, { intraP: { keep: 2 }, interP: { perProblem: 1 }, credit: 'mers', scaleRewards: 'batch' });
  assert.ok(rep.intraP.samples > 0);
  assert.equal(batchStats(r.trees).samplesKept, b.samplesKept - rep.intraP.samples - rep.interP.samples);
});
