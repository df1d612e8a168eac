import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  buildTrees, buildTree, runMurphy, serializeTree, validateTree, pathToNode,
  FakeExecutor, FakePromptBuilder, FakeSampler, asyncExecutor, asyncSampler,
  DEFAULT_NO_CODE_FEEDBACK, FAKE_FEEDBACK_TOKEN, MurphyError,
  type Completion, type Executor, type Sampler, type SampleParams,
} from '../../lib/murphy/index.js';
import { ScriptSampler, constExecutor } from './helpers.js';

const prompts = new FakePromptBuilder(3, 2);

test('builds a hand-checked S = 2 tree', async () => {
  const sampler = new ScriptSampler([
    ['4/4', '0/4', '2/4'], // turn 1
    ['1/4', '4/4', '0/4'], // children of node 1
    ['2/4', '2/4', '2/4'], // children of node 2
  ]);
  const exec = new FakeExecutor();
  const t = await buildTree({ id: 'add' }, { sampler, executor: exec, prompts }, { groupSize: 3 });
  validateTree(t);
  assert.equal(t.problemId, 'add');
  assert.equal(t.maxTurns, 2);
  assert.equal(t.nodes.length, 9);
  assert.deepEqual(t.nodes.map((n) => n.reward), [1, 0, 0.5, 0.25, 1, 0, 0.5, 0.5, 0.5]);
  assert.deepEqual(t.nodes.map((n) => n.passed), [true, false, false, false, true, false, false, false, false]);
  assert.deepEqual(t.nodes.map((n) => n.turn), [1, 1, 1, 2, 2, 2, 2, 2, 2]);
  assert.deepEqual(t.nodes.map((n) => n.parent), [null, null, null, 1, 1, 1, 2, 2, 2]);
  assert.deepEqual(t.nodes.map((n) => n.childGroup), [null, 1, 2, null, null, null, null, null, null]);
  assert.deepEqual(t.groups.map((g) => [g.turn, g.parent, g.nodes]), [[1, null, [0, 1, 2]], [2, 1, [3, 4, 5]], [2, 2, [6, 7, 8]]]);
  assert.equal(t.nodes[4]!.feedback, 'All 4 tests passed.');
  assert.equal(t.nodes[1]!.feedback, 'Failed 4 of 4 tests: AssertionError');
  assert.equal(t.nodes[2]!.code, '# fake 2/4\n');
  assert.deepEqual(t.nodes[5]!.logprobs, [-0.5, -0.25, -0.125]);
  // Follow-up prompt = parent prompt ids + the parent's completion ids + feedback turn ids.
  const p0 = t.groups[0]!.promptIds;
  const p1 = t.groups[1]!.promptIds;
  assert.deepEqual(p1.slice(0, p0.length), p0);
  assert.deepEqual(p1.slice(p0.length, p0.length + 3), t.nodes[1]!.completionIds);
  assert.equal(p1[p0.length + 3], FAKE_FEEDBACK_TOKEN);
  assert.equal(p1.length, p0.length + 3 + 1 + 2);
  assert.deepEqual(sampler.calls.map((c) => c.n), [3, 3, 3]);
  assert.equal(exec.calls, 9);
  assert.deepEqual(pathToNode(t, 7).map((n) => n.id), [2, 7]);
});

test('S = 1 never expands; S = 3 with G\' != G expands failures at turns 1 and 2', async () => {
  const one = await buildTree('p', { sampler: new ScriptSampler([['0/2', '1/2']]), executor: new FakeExecutor(), prompts }, { groupSize: 2, maxTurns: 1 });
  assert.equal(one.nodes.length, 2);
  assert.equal(one.groups.length, 1);
  const sampler = new ScriptSampler([['0/2', '2/2'], ['0/2'], ['2/2']]);
  const three = await buildTree('p', { sampler, executor: new FakeExecutor(), prompts }, { groupSize: 2, followUpGroupSize: 1, maxTurns: 3 });
  assert.deepEqual(three.nodes.map((n) => [n.turn, n.parent, n.reward]), [[1, null, 0], [1, null, 1], [2, 0, 0], [3, 2, 1]]);
  assert.deepEqual(sampler.calls.map((c) => c.n), [2, 1, 1]);
  // Two feedback markers in the turn-3 prompt.
  assert.equal(three.groups[2]!.promptIds.filter((x) => x === FAKE_FEEDBACK_TOKEN).length, 2);
});

test('success threshold, binary rewards, and completions without code', async () => {
  const mk = () => new ScriptSampler([['2/4', '3/4'], ['4/4', '4/4']]);
  const a = await buildTree('p', { sampler: mk(), executor: new FakeExecutor(), prompts }, { groupSize: 2, maxTurns: 2, successThreshold: 0.6 });
  assert.deepEqual(a.nodes.map((n) => n.childGroup !== null), [true, false, false, false]);
  const b = await buildTree('p', { sampler: new ScriptSampler([['2/4', '4/4'], ['1/4', '4/4']]), executor: new FakeExecutor(), prompts }, { groupSize: 2, rewardMode: 'binary' });
  assert.deepEqual(b.nodes.map((n) => n.reward), [0, 1, 0, 1]);
  const noCode: Sampler = { generate: (_p, n) => Array.from({ length: n }, () => ({ tokenIds: [5], text: 'I cannot do this.', finishReason: 'stop' })) };
  let called = 0;
  const c = await buildTree('p', { sampler: noCode, executor: { execute: () => { called++; return { reward: 1, passed: true, feedback: '' }; } }, prompts }, { groupSize: 2, maxTurns: 1 });
  assert.equal(called, 0);
  assert.deepEqual(c.nodes.map((n) => [n.code, n.reward, n.feedback]), [[null, 0, DEFAULT_NO_CODE_FEEDBACK], [null, 0, DEFAULT_NO_CODE_FEEDBACK]]);
});

test('all open nodes of a turn are sampled concurrently across problems, bounded by the limits', async () => {
  let inflight = 0;
  let maxInflight = 0;
  let execInflight = 0;
  let maxExec = 0;
  const fake = new FakeSampler({ passProbByTurn: [0, 0] });
  const sampler: Sampler = {
    generate: async (ids, n, params) => {
      inflight++;
      maxInflight = Math.max(maxInflight, inflight);
      await new Promise((r) => setTimeout(r, 2));
      inflight--;
      return fake.generate(ids, n, params);
    },
  };
  const executor: Executor<unknown> = {
    execute: async (p, code) => {
      execInflight++;
      maxExec = Math.max(maxExec, execInflight);
      // long enough that a turn's executions overlap even on a loaded machine (with 1 ms,
      // early ones could finish before the last group's sampling returned)
      await new Promise((r) => setTimeout(r, 50));
      execInflight--;
      return new FakeExecutor().execute(p, code);
    },
  };
  const problems = ['a', 'b', 'c', 'd', 'e'];
  await buildTrees(problems, { sampler, executor, prompts }, { groupSize: 2, maxTurns: 2, executorConcurrency: 100 });
  assert.equal(maxInflight, 10); // turn 2: 5 problems x 2 failed nodes, all at once
  assert.equal(maxExec, 20);
  maxInflight = 0;
  maxExec = 0;
  await buildTrees(problems, { sampler, executor, prompts }, { groupSize: 2, maxTurns: 2, samplerConcurrency: 3, executorConcurrency: 4 });
  assert.equal(maxInflight, 3);
  assert.equal(maxExec, 4);
});

test('determinism: same seed, shuffled completion order → identical trees and samples', async () => {
  const problems = Array.from({ length: 12 }, (_, i) => ({ id: `p${i}` }));
  const run = async (seed: number, jitter: number) => {
    const sampler = asyncSampler(new FakeSampler({ passProbByTurn: [0.3, 0.4] }), (ids) => (ids.length * 7 + jitter) % 4);
    const executor = asyncExecutor(new FakeExecutor(), (code) => (code.length * 13 + jitter) % 3);
    const r = await runMurphy(problems, { sampler, executor, prompts: new FakePromptBuilder() }, {
      groupSize: 4, maxTurns: 3, seed, credit: 'mers', intraP: { keep: 3 }, interP: { perProblem: 2 },
    });
    return { trees: r.trees.map((t) => serializeTree(t)), samples: JSON.stringify(r.samples) };
  };
  const a = await run(7, 0);
  const b = await run(7, 2);
  assert.deepEqual(a, b);
  const c = await run(8, 0);
  assert.notDeepEqual(a.trees, c.trees);
});

test('seeds are derived per group and passed to the sampler', async () => {
  const seen: Array<number | undefined> = [];
  const fake = new FakeSampler({ passProbByTurn: [0] });
  const sampler: Sampler = { generate: (ids, n, params: SampleParams) => { seen.push(params.seed); return fake.generate(ids, n, params); } };
  await buildTrees(['a', 'b'], { sampler, executor: new FakeExecutor(), prompts }, { groupSize: 1, maxTurns: 2, seed: 1, sampling: { temperature: 1 } });
  assert.equal(seen.length, 4);
  assert.equal(new Set(seen).size, 4);
  assert.ok(seen.every((s) => typeof s === 'number'));
});

test('bad input gives clear errors', async () => {
  const deps = { sampler: new FakeSampler(), executor: new FakeExecutor(), prompts };
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 0 }), /groupSize \(G\) must be an integer >= 1, got 0/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 2, maxTurns: 0 }), /maxTurns \(S\) must be an integer >= 1, got 0/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 2, followUpGroupSize: 1.5 }), /followUpGroupSize/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 2, successThreshold: 0 }), /successThreshold/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: NaN }), MurphyError);
  const nanExec = { ...deps, executor: constExecutor({ reward: NaN, passed: false, feedback: '' }) };
  await assert.rejects(buildTrees(['p'], nanExec, { groupSize: 2 }), /executor reward must be a number in \[0, 1\], got NaN \(problem 0, group 0, sample 0\)/);
  const bigExec = { ...deps, executor: constExecutor({ reward: 1.5, passed: true, feedback: '' }) };
  await assert.rejects(buildTrees(['p'], bigExec, { groupSize: 2 }), /got 1.5/);
  const short: Sampler = { generate: () => [] as Completion[] };
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: short }, { groupSize: 2 }), /sampler returned 0 completions, expected 2/);
  const badLp: Sampler = { generate: (_p, n) => Array.from({ length: n }, () => ({ tokenIds: [1, 2], logprobs: [0], text: 'x', finishReason: 'stop' })) };
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: badLp }, { groupSize: 1 }), /logprobs length 1 != tokenIds length 2/);
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: undefined as never }, { groupSize: 1 }), /sampler/);
  const throwing: Sampler = { generate: async () => { throw new Error('backend down'); } };
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: throwing }, { groupSize: 1 }), /backend down/);
});

test('a synchronous sampler failure after async requests leaves no unhandled rejection', async () => {
  let calls = 0;
  const sampler: Sampler = {
    generate: () => {
      calls++;
      if (calls === 1) return Promise.reject(new Error('first failed'));
      throw new Error('second failed synchronously');
    },
  };
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  await assert.rejects(buildTrees(['a', 'b'], { sampler, executor: new FakeExecutor(), prompts }, { groupSize: 1 }), /first failed/);
  calls = 0;
  await assert.rejects(
    buildTrees(['a', 'b'], { sampler, executor: new FakeExecutor(), prompts }, { groupSize: 1, samplerConcurrency: Infinity }),
    /second failed synchronously/,
  );
  await new Promise((r) => setTimeout(r, 10));
  process.off('unhandledRejection', onUnhandled);
  assert.deepEqual(unhandled, []);
});
