import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  buildTrees, buildTree, serializeTree, validateTree, pathToNode, flattenSamples, processTrees, treeStats,
  FakeExecutor, FakePromptBuilder, FakeSampler, asyncExecutor, asyncSampler,
  DEFAULT_NO_CODE_FEEDBACK, FAKE_FEEDBACK_TOKEN, NO_ROOM_FEEDBACK, MurphyError,
  type Completion, type Executor, type Sampler, type SampleParams,
} from '../../lib/murphy/index.js';
import { noRoomCompletions } from '../../lib/rollout/index.js';
import { ScriptSampler, buildAndProcess, constExecutor, extractCode } from './helpers.js';

const prompts = new FakePromptBuilder(3, 2);

test('builds a hand-checked S = 2 tree', async () => {
  const sampler = new ScriptSampler([
    ['4/4', '0/4', '2/4'], // turn 1
    ['1/4', '4/4', '0/4'], // children of node 1
    ['2/4', '2/4', '2/4'], // children of node 2
  ]);
  const exec = new FakeExecutor();
  const t = await buildTree({ id: 'add' }, { sampler, executor: exec, prompts, extractCode }, { groupSize: 3 });
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
  const one = await buildTree('p', { sampler: new ScriptSampler([['0/2', '1/2']]), executor: new FakeExecutor(), prompts, extractCode }, { groupSize: 2, maxTurns: 1 });
  assert.equal(one.nodes.length, 2);
  assert.equal(one.groups.length, 1);
  const sampler = new ScriptSampler([['0/2', '2/2'], ['0/2'], ['2/2']]);
  const three = await buildTree('p', { sampler, executor: new FakeExecutor(), prompts, extractCode }, { groupSize: 2, followUpGroupSize: 1, maxTurns: 3 });
  assert.deepEqual(three.nodes.map((n) => [n.turn, n.parent, n.reward]), [[1, null, 0], [1, null, 1], [2, 0, 0], [3, 2, 1]]);
  assert.deepEqual(sampler.calls.map((c) => c.n), [2, 1, 1]);
  // Two feedback markers in the turn-3 prompt.
  assert.equal(three.groups[2]!.promptIds.filter((x) => x === FAKE_FEEDBACK_TOKEN).length, 2);
});

test('success threshold, binary rewards, and completions without code', async () => {
  const mk = () => new ScriptSampler([['2/4', '3/4'], ['4/4', '4/4']]);
  const a = await buildTree('p', { sampler: mk(), executor: new FakeExecutor(), prompts, extractCode }, { groupSize: 2, maxTurns: 2, successThreshold: 0.6 });
  assert.deepEqual(a.nodes.map((n) => n.childGroup !== null), [true, false, false, false]);
  const b = await buildTree('p', { sampler: new ScriptSampler([['2/4', '4/4'], ['1/4', '4/4']]), executor: new FakeExecutor(), prompts, extractCode }, { groupSize: 2, rewardMode: 'binary' });
  assert.deepEqual(b.nodes.map((n) => n.reward), [0, 1, 0, 1]);
  const noCode: Sampler = { generate: async (_p, n) => Array.from({ length: n }, () => ({ tokenIds: [5], text: 'I cannot do this.', finishReason: 'stop' })) };
  let called = 0;
  const c = await buildTree('p', { sampler: noCode, executor: { execute: async () => { called++; return { reward: 1, passed: true, feedback: '' }; } }, prompts, extractCode }, { groupSize: 2, maxTurns: 1 });
  assert.equal(called, 0);
  assert.deepEqual(c.nodes.map((n) => [n.code, n.reward, n.feedback]), [[null, 0, DEFAULT_NO_CODE_FEEDBACK], [null, 0, DEFAULT_NO_CODE_FEEDBACK]]);
});

/**
 * Holds every call until released; quiescent() resolves once the builder can start nothing
 * more (all its work so far ran: no timers, so one macrotask turn drains every microtask).
 */
class Held {
  inflight = 0;
  peak = 0;
  private waiting: Array<() => void> = [];
  async hold<T>(value: () => T | Promise<T>): Promise<T> {
    this.inflight++;
    this.peak = Math.max(this.peak, this.inflight);
    await new Promise<void>((ok) => this.waiting.push(ok));
    this.inflight--;
    return value();
  }
  releaseAll(): number {
    const w = this.waiting;
    this.waiting = [];
    for (const ok of w) ok();
    return w.length;
  }
}
const quiescent = () => new Promise<void>((ok) => setImmediate(ok));

test('all open nodes of a turn are sampled concurrently across problems, bounded by the limits (barriers, no sleeps)', async () => {
  const run = async (limits: { samplerConcurrency?: number; executorConcurrency: number }) => {
    const fake = new FakeSampler({ passProbByTurn: [0, 0] });
    const samples = new Held();
    const execs = new Held();
    const sampler: Sampler = { generate: (ids, n, params) => samples.hold(() => fake.generate(ids, n, params)) };
    const executor: Executor<unknown> = { execute: (p, code) => execs.hold(() => new FakeExecutor().execute(p, code)) };
    let done = false;
    const built = buildTrees(['a', 'b', 'c', 'd', 'e'], { sampler, executor, prompts, extractCode }, { groupSize: 2, maxTurns: 2, ...limits })
      .finally(() => { done = true; });
    // at each quiet point, everything the builder could start is in flight: let it all finish
    while (!done) {
      await quiescent();
      samples.releaseAll();
      execs.releaseAll();
    }
    await built;
    return { samplers: samples.peak, executors: execs.peak };
  };
  // turn 2: 5 problems x 2 failed nodes sampled at once, then 10 groups x 2 executions at once
  assert.deepEqual(await run({ executorConcurrency: 100 }), { samplers: 10, executors: 20 });
  assert.deepEqual(await run({ samplerConcurrency: 3, executorConcurrency: 4 }), { samplers: 3, executors: 4 });
});

test('determinism: same seed, shuffled completion order → identical trees and samples', async () => {
  const problems = Array.from({ length: 12 }, (_, i) => ({ id: `p${i}` }));
  const run = async (seed: number, jitter: number) => {
    const sampler = asyncSampler(new FakeSampler({ passProbByTurn: [0.3, 0.4] }), (ids) => (ids.length * 7 + jitter) % 4);
    const executor = asyncExecutor(new FakeExecutor(), (code) => (code.length * 13 + jitter) % 3);
    const r = await buildAndProcess(problems, { sampler, executor, prompts: new FakePromptBuilder() }, {
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
  const sampler: Sampler = { generate: async (ids, n, params: SampleParams) => { seen.push(params.seed); return fake.generate(ids, n, params); } };
  await buildTrees(['a', 'b'], { sampler, executor: new FakeExecutor(), prompts, extractCode }, { groupSize: 1, maxTurns: 2, seed: 1, sampling: { temperature: 1 } });
  assert.equal(seen.length, 4);
  assert.equal(new Set(seen).size, 4);
  assert.ok(seen.every((s) => typeof s === 'number'));
});

test('bad input gives clear errors', async () => {
  const deps = { sampler: new FakeSampler(), executor: new FakeExecutor(), prompts, extractCode };
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 0 }), /groupSize \(G\) must be an integer >= 1, got 0/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 2, maxTurns: 0 }), /maxTurns \(S\) must be an integer >= 1, got 0/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 2, followUpGroupSize: 1.5 }), /followUpGroupSize/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: 2, successThreshold: 0 }), /successThreshold/);
  await assert.rejects(buildTrees(['p'], deps, { groupSize: NaN }), MurphyError);
  const nanExec = { ...deps, executor: constExecutor({ reward: NaN, passed: false, feedback: '' }) };
  await assert.rejects(buildTrees(['p'], nanExec, { groupSize: 2 }), /executor reward must be a number in \[0, 1\], got NaN \(problem 0, group 0, sample 0\)/);
  const bigExec = { ...deps, executor: constExecutor({ reward: 1.5, passed: true, feedback: '' }) };
  await assert.rejects(buildTrees(['p'], bigExec, { groupSize: 2 }), /got 1.5/);
  const short: Sampler = { generate: async () => [] as Completion[] };
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: short }, { groupSize: 2 }), /sampler returned 0 completions, expected 2/);
  const badLp: Sampler = { generate: async (_p, n) => Array.from({ length: n }, () => ({ tokenIds: [1, 2], logprobs: [0], text: 'x', finishReason: 'stop' })) };
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: badLp }, { groupSize: 1 }), /logprobs length 1 != tokenIds length 2/);
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: undefined as never }, { groupSize: 1 }), /sampler/);
  await assert.rejects(buildTrees(['p'], { ...deps, extractCode: undefined as never }, { groupSize: 1 }), /deps.extractCode is required \(lib\/prompt's extractFromCompletion for chat models\)/);
  const throwing: Sampler = { generate: async () => { throw new Error('backend down'); } };
  await assert.rejects(buildTrees(['p'], { ...deps, sampler: throwing }, { groupSize: 1 }), /backend down/);
});

test('a sampler that throws synchronously fails the build like a rejection, after every group settled, none unhandled', async () => {
  let calls = 0;
  let settled = 0;
  const fake = new FakeSampler();
  const sampler: Sampler = {
    generate: ((ids: number[], n: number, params: SampleParams) => {
      calls++;
      if (calls === 1) return Promise.reject(new Error('first failed'));
      if (calls === 2) throw new Error('second failed synchronously');
      return fake.generate(ids, n, params).finally(() => { settled++; });
    }) as Sampler['generate'],
  };
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  for (const samplerConcurrency of [64, Infinity]) {
    calls = 0;
    settled = 0;
    // the first failing group (in group order) is the error reported
    await assert.rejects(buildTrees(['a', 'b', 'c'], { sampler, executor: new FakeExecutor(), prompts, extractCode }, { groupSize: 1, samplerConcurrency }), /first failed/);
    assert.equal(settled, 1, 'the third group settled before the build failed');
    calls = 1;
    await assert.rejects(buildTrees(['a', 'b'], { sampler, executor: new FakeExecutor(), prompts, extractCode }, { groupSize: 1, samplerConcurrency }), /second failed synchronously/);
  }
  // unhandled rejections are reported at the end of the microtask queue: two macrotask turns suffice
  await quiescent();
  await quiescent();
  process.off('unhandledRejection', onUnhandled);
  assert.deepEqual(unhandled, []);
});

test('a prompt with no room left in the context ends its branch: a leaf, not executed, not expanded, not a sample, counted', async () => {
  const limit = 28; // turn-1 prompt 4 tokens, + 9 completion + 3 feedback per turn: turn 3's prompt is 28 tokens
  const fake = new FakeSampler({ passProbByTurn: [0, 0, 0, 0] });
  const sampler: Sampler = {
    generate: async (ids, n, params) => (ids.length >= limit ? noRoomCompletions(n) : fake.generate(ids, n, params)),
  };
  const exec = new FakeExecutor();
  const pb = new FakePromptBuilder(3, 2);
  const t = await buildTree('p', { sampler, executor: exec, prompts: pb, extractCode }, { groupSize: 2, followUpGroupSize: 1, maxTurns: 4, seed: 5 });
  validateTree(t);
  assert.deepEqual(t.groups.map((g) => [g.turn, g.promptIds.length]), [[1, 4], [2, 16], [2, 16], [3, 28], [3, 28]]);
  const last = t.nodes.filter((n) => n.turn === 3);
  assert.equal(last.length, 2);
  for (const n of last) {
    assert.deepEqual([n.noRoom, n.reward, n.passed, n.code, n.childGroup, n.finishReason, n.completionIds, n.feedback], [true, 0, false, null, null, 'length', [], NO_ROOM_FEEDBACK]);
  }
  assert.ok(t.nodes.filter((n) => n.turn < 3).every((n) => n.noRoom === undefined && n.childGroup !== null));
  assert.equal(exec.calls, 4, 'no-room nodes are not executed');
  assert.equal(treeStats(t).noRoom, 2);
  processTrees([t], {}, { trusted: true });
  const samples = flattenSamples([t]);
  assert.equal(samples.length, 4);
  assert.ok(samples.every((s) => s.turn < 3));
  // round trip keeps the mark
  assert.equal(JSON.parse(serializeTree(t)).nodes.filter((n: { noRoom?: boolean }) => n.noRoom === true).length, 2);
});
