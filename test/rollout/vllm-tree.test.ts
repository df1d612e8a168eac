// Multi-turn trees through the vLLM client against a fake server that enforces vLLM's 400 for
// prompt + max_tokens > max_model_len: the late turns are clamped, and a conversation that
// reaches the context limit in its last turn ends there (a leaf), instead of failing the build.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { evaluateIterK } from '../../lib/eval/iterk.js';
import { buildTrees, FakePromptBuilder, flattenSamples, processTrees, treeStats, validateTree, type Executor } from '../../lib/murphy/index.js';
import { EmbeddedBackend, VllmBackend, type EngineRequest, type EngineSample, type RolloutEngine } from '../../lib/rollout/index.js';
import { treeMetrics } from '../../lib/train/metrics.js';
import { fakeServer, vllmLike, type FakeServer } from './helpers.js';

const servers: FakeServer[] = [];
after(async () => { await Promise.all(servers.map((s) => s.close())); });

const failing: Executor<unknown> = { execute: async () => ({ reward: 0, passed: false, feedback: 'AssertionError' }) };
const extractCode = (c: { text: string }) => c.text;

describe('multi-turn trees through the vLLM client, at the context limit', () => {
  it('clamps the turn that still fits, ends the last turn with no-room leaves, never a 400', async () => {
    // prompts: turn 1 4 tokens; each turn adds the completion (<= 3 tokens) + 3 feedback tokens
    const s = await fakeServer(vllmLike({ maxModelLen: 18 }));
    servers.push(s);
    const b = await VllmBackend.connect({ servers: [s.url] });
    const trees = await buildTrees(['p', 'q'], { sampler: b, executor: failing, prompts: new FakePromptBuilder(3, 2), extractCode }, {
      groupSize: 2, followUpGroupSize: 1, maxTurns: 4, sampling: { maxTokens: 8 }, seed: 1,
    });
    const gen = s.calls.filter((c) => c.path === '/v1/completions').slice(1); // after the start-up probe
    assert.ok(gen.every((c) => (c.body!.prompt as number[]).length + (c.body!.max_tokens as number) <= 18), 'a request over the context was sent');
    // turn 1 (4 + 8), turn 2 (10 + 8), turn 3 clamped (16 + 2)
    assert.deepEqual(gen.map((c) => [(c.body!.prompt as number[]).length, c.body!.max_tokens]),
      [[4, 8], [4, 8], [10, 8], [10, 8], [10, 8], [10, 8], [16, 2], [16, 2], [16, 2], [16, 2]]);
    for (const t of trees) {
      validateTree(t);
      const last = t.nodes.filter((n) => n.turn === 4);
      assert.equal(last.length, 2);
      assert.ok(last.every((n) => n.noRoom === true && n.completionIds.length === 0 && n.finishReason === 'length' && n.childGroup === null));
      assert.equal(treeStats(t).noRoom, 2);
      assert.deepEqual(t.groups.map((g) => g.promptIds.length), [4, 10, 10, 16, 16, 21, 21]);
    }
    assert.equal(b.counters.noRoom, 4);
    assert.equal(treeMetrics(trees).noRoom, 4, 'counted in the step metrics');
    processTrees(trees, {}, { trusted: true });
    assert.ok(flattenSamples(trees).every((x) => x.turn < 4 && x.completionIds.length > 0));
  });

  it('eval (Iter-k) counts conversations that ran out of context, and does not fail', async () => {
    const s = await fakeServer(vllmLike({ maxModelLen: 18 }));
    servers.push(s);
    const b = await VllmBackend.connect({ servers: [s.url] });
    const r = await evaluateIterK(['p', 'q', 'r'], { sampler: b, executor: failing, prompts: new FakePromptBuilder(3, 2), extractCode }, { k: 5, maxTokens: 8 });
    assert.deepEqual(r.iterations.map((p) => p.pass1), [0, 0, 0, 0, 0]);
    assert.equal(r.noRoom, 3);
  });

  it('the embedded backend ends a full context the same way (no engine call), and keeps stop_reason', async () => {
    const calls: EngineRequest[] = [];
    const engine: RolloutEngine = {
      info: () => ({ vocabSize: 100, maxModelLen: 18 }),
      canBatch: () => true,
      generate: async (batch) => batch.map((r): EngineSample[] => {
        calls.push(r);
        // 2 tokens, the last one a stop id
        return Array.from({ length: r.n }, () => ({ tokenIds: [5, 9], logprobs: [-1, -0.5], finishReason: 'stop' as const }));
      }),
      loadWeights: async () => undefined,
    };
    const b = new EmbeddedBackend({ engine, stopTokenIds: [9] });
    const trees = await buildTrees(['p'], { sampler: b, executor: failing, prompts: new FakePromptBuilder(3, 2), extractCode }, {
      groupSize: 2, followUpGroupSize: 1, maxTurns: 5, sampling: { maxTokens: 8 }, seed: 1,
    });
    const t = trees[0]!;
    validateTree(t);
    // prompts 4, 9, 14, 19: the turn-4 prompt (19 tokens) is over the 18-token context
    assert.deepEqual(t.groups.map((g) => g.promptIds.length), [4, 9, 9, 14, 14, 19, 19]);
    assert.ok(calls.every((r) => r.promptIds.length < 18), 'the engine was called with a full context');
    assert.equal(calls.length, 5);
    assert.ok(t.nodes.filter((n) => n.turn === 4).every((n) => n.noRoom === true && n.childGroup === null));
    assert.equal(treeStats(t).noRoom, 2);
    assert.deepEqual((await b.generate([1, 2], 1, {}))[0]!.stopReason, 9);
  });
});
