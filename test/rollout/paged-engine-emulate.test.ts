// The paged engine on the device engine, emulated on the CPU (PolicyModel device 'emulate':
// the GPU engine's code with every kernel run by the CPU harness), end to end: greedy
// completions equal the CPU engine's (NativeEngine, same weights) for 64 tokens with and
// without prefix sharing; a colocated `train` run; `serve --device emulate` answering a
// completion request. Nothing here runs on a GPU.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runTraining } from '../../lib/commands/run-training.js';
import { serveModel } from '../../lib/commands/serve.js';
import { defaultConfig } from '../../lib/config/index.js';
import { initModel, PolicyModel } from '../../lib/model/index.js';
import { NativeEngine } from '../../lib/rollout/engine.js';
import { PagedEngine } from '../../lib/rollout/paged-engine.js';
import type { EngineRequest } from '../../lib/rollout/types.js';
import { readMetrics, RunDir } from '../../lib/train/rundir.js';
import type { StepMetrics } from '../../lib/train/metrics.js';
import { Rng, testSeed } from '../helpers/random.js';
import { checkAgainstNative } from './paged-engine-helpers.js';

const work = mkdtempSync(join(tmpdir(), 'paged-emulate-'));
let dir = '';
const VOCAB = 300;
before(async () => {
  // sharp logits (initStd 0.5): greedy margins well above float32 rounding differences between engines
  ({ dir } = await initModel({ out: join(work, 'model'), preset: 'tiny', sizes: { vocabSize: VOCAB, numLayers: 2, maxPositionEmbeddings: 256 }, dtype: 'float32', seed: 11, initStd: 0.5 }));
});
after(() => rmSync(work, { recursive: true, force: true }));

const greedy = (promptIds: number[], o: Partial<EngineRequest> = {}): EngineRequest =>
  ({ promptIds, n: 1, maxTokens: 64, temperature: 0, topP: 1, topK: 0, minP: 0, seed: 1, stopTokenIds: [], ...o });

describe('PagedEngine on the emulated device engine', () => {
  const seed = testSeed('paged-engine-emulate');

  it('greedy completions equal the CPU engine\'s for 64 tokens, with and without prefix sharing (f32 storage)', async () => {
    const rng = new Rng(seed);
    const shared = Array.from({ length: 21 }, () => rng.int(VOCAB));
    const reqs = [
      greedy(shared, { n: 2 }),
      greedy([...shared, ...Array.from({ length: 5 }, () => rng.int(VOCAB))]),
      greedy(Array.from({ length: 3 + rng.int(20) }, () => rng.int(VOCAB))),
    ];
    const cpu = new NativeEngine(await PolicyModel.load(dir));
    const dev = await PolicyModel.load(dir, { device: 'emulate', storage: 'f32' });
    for (const prefixSharing of [true, false]) {
      const e = PagedEngine.onPolicy(dev, { kvCacheBlocks: 96, prefixSharing, tokenBudget: 64 });
      const got = await checkAgainstNative(e, cpu, reqs, 1e-4, `sharing ${prefixSharing}`);
      for (const g of got) for (const s of g) assert.equal(s.tokenIds.length, 64);
      if (prefixSharing) assert.ok(e.metrics.prefillSaved >= shared.length, `saved ${e.metrics.prefillSaved}`);
      else assert.equal(e.metrics.prefillSaved, 0);
      await e.close();
      assert.equal(dev.kvInfo().blocks, 0, 'the pool is released');
    }
  });

  it('seeded sampled completions (temperature, top-p, top-k, min-p, n = 3) equal the CPU engine\'s, log-probs within 1e-4', async () => {
    const rng = new Rng(seed + 1);
    const o = { temperature: 0.9, topP: 0.9, topK: 40, minP: 0.02, maxTokens: 24 };
    const p = Array.from({ length: 19 }, () => rng.int(VOCAB));
    const reqs = [greedy(p, { ...o, n: 3, seed: rng.int(2 ** 31) }), greedy([...p, 4, 5], { ...o, n: 2, seed: rng.int(2 ** 31) })];
    const cpu = new NativeEngine(await PolicyModel.load(dir));
    const e = PagedEngine.onPolicy(await PolicyModel.load(dir, { device: 'emulate', storage: 'f32' }), { kvCacheBlocks: 64 });
    await checkAgainstNative(e, cpu, reqs, 1e-4, 'sampled');
    await e.close();
  });

  it('loadWeights (serve\'s weight sync) replaces the served weights and drops the prefix cache; another model\'s shape is refused', async () => {
    const { dir: other } = await initModel({ out: join(work, 'other'), preset: 'tiny', sizes: { vocabSize: VOCAB, numLayers: 2, maxPositionEmbeddings: 256 }, dtype: 'float32', seed: 12, initStd: 0.5 });
    const { dir: wrong } = await initModel({ out: join(work, 'wrong'), preset: 'tiny', sizes: { vocabSize: VOCAB, numLayers: 1, maxPositionEmbeddings: 256 }, dtype: 'float32', seed: 12 });
    const r = greedy([7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23], { maxTokens: 16 });
    const e = PagedEngine.onPolicy(await PolicyModel.load(dir, { device: 'emulate', storage: 'f32' }), { kvCacheBlocks: 32 });
    const [[before]] = await e.generate([r]);
    assert.ok(e.scheduler!.pool.cache.size > 0);
    await e.loadWeights(other);
    assert.equal(e.scheduler!.pool.cache.size, 0);
    const [[after]] = await e.generate([r]);
    const [[want]] = await new NativeEngine(await PolicyModel.load(other)).generate([r]);
    assert.deepEqual(after.tokenIds, want.tokenIds);
    assert.notDeepEqual(after.tokenIds, before.tokenIds);
    await assert.rejects(e.loadWeights(wrong), /weights in .* are for a different model than the one served/);
    await e.close();
  });

  it('serve --device emulate answers a completion request (the CPU engine\'s greedy tokens)', async () => {
    const prompt = [5, 17, 42, 9, 100, 3, 77, 8, 250, 61, 12, 13, 140, 2, 99, 45, 46, 7, 180, 33];
    const [[want]] = await new NativeEngine(await PolicyModel.load(dir)).generate([greedy(prompt, { maxTokens: 8 })]);
    const srv = await serveModel({ model: dir, port: 0, host: '127.0.0.1', maxBatch: 8, servedModelName: 'tiny', device: 'emulate', kvCacheBlocks: 32 });
    try {
      const res = await fetch(`${srv.url}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', prompt, max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true, logprobs: 0 }),
      });
      assert.equal(res.status, 200);
      const body = await res.json() as { choices: { token_ids: number[]; finish_reason: string }[] };
      // bf16 storage (serve's): the first tokens of a sharp model agree with the f32 CPU engine
      assert.equal(body.choices[0].finish_reason, 'length');
      assert.equal(body.choices[0].token_ids.length, 8);
      assert.deepEqual(body.choices[0].token_ids.slice(0, 2), want.tokenIds.slice(0, 2));
      // vLLM's /reset_prefix_cache drops the paged engine's cache
      const eng = srv.batcher.engine as PagedEngine;
      assert.ok(eng.scheduler!.pool.cache.size > 0, 'the prompt\'s first block was cached');
      assert.equal((await fetch(`${srv.url}/reset_prefix_cache`, { method: 'POST' })).status, 200);
      assert.equal(eng.scheduler!.pool.cache.size, 0);
    } finally {
      await srv.close();
    }
    const base = { model: dir, port: 0, host: '127.0.0.1', maxBatch: 8 };
    await assert.rejects(serveModel({ ...base, device: 'emulate', bf16Generate: true }), /^Error: --bf16-generate is for the CPU engine; --device emulate keeps its weights in bf16 already$/);
    await assert.rejects(serveModel({ ...base, device: 'gpu' as never }), /--device must be one of cpu, cuda, emulate, got 'gpu'/);
    await assert.rejects(serveModel({ ...base, device: 'emulate', kvCacheFraction: 1.5 }), /--kv-cache-fraction must be in \(0, 1\], got 1.5/);
  });

  it('a colocated train run (--device emulate --backend embedded) runs two steps and reports prefill saved', async () => {
    const out = join(work, 'run');
    const lines: string[] = [];
    const r = await runTraining({
      ...defaultConfig(), out, device: 'emulate', backend: 'embedded', maxSteps: 2, saveSteps: 2, batchSize: 2, numGenerations: 3,
      maxCompletionLength: 12, sftSteps: 0, evalProblems: 0, kvCacheBlocks: 160, logTrees: false,
    }, { handleSignals: false, report: false, verbose: true, progress: { start() {}, update() {}, end() {}, line: (t) => lines.push(t) }, log: (l) => lines.push(l) });
    assert.equal(r.summary.steps, 2);
    const m = readMetrics(new RunDir(out).metricsPath) as unknown as StepMetrics[];
    assert.equal(m.length, 2);
    for (const s of m) {
      assert.ok(s.prefill !== undefined, 'a paged run records its prefill');
      assert.ok(s.prefill.saved > 0 && s.prefill.computed > 0, JSON.stringify(s.prefill));
    }
    assert.ok(lines.some((l) => /^rollouts: paged engine on device 'emulate' over the policy's own weights/.test(l)), lines.join('\n'));
    const steps = lines.filter((l) => /^step +\d\/2 /.test(l));
    assert.equal(steps.length, 2);
    for (const [k, l] of steps.entries()) assert.match(l, new RegExp(`prefill saved \\d+% \\(${m[k].prefill!.saved} tokens\\)`));
  });
});
