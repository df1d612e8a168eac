// The full loop on a tiny native model: the CPU demo through the embedded backend, training
// through `murphy-native serve` with the vLLM client, a weight-sync round trip, and clear
// errors (with nothing written) for bad configuration, data and servers.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { resolveConfig } from '../../lib/config/index.js';
import { packSequences, PolicyModel } from '../../lib/model/index.js';
import { loadChatTokenizer } from '../../lib/prompt/index.js';
import { NativeEngine, startServer, VllmBackend, type RolloutServer } from '../../lib/rollout/index.js';
import { readMetrics, readTreeLines } from '../../lib/train/rundir.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { runTraining } from '../../lib/commands/run-training.js';
import { shortDemo } from './configs.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-e2e-'));
let modelDir = '';
let srv: RolloutServer;
let loads = 0;

before(async () => {
  modelDir = await writeTinyModel(join(work, 'model'), 3, 0.1);
  srv = await startServer({ engine: await NativeEngine.load(modelDir), tokenizer: loadChatTokenizer(modelDir), modelName: 'tiny', onLoad: () => loads++ });
});
after(async () => {
  await srv?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('train end to end', () => {
  it('the CPU demo through the embedded engine: warm-up, evaluations, steps, checkpoints, report', async () => {
    const out = join(work, 'demo');
    const lines: string[] = [];
    const r = await runTraining(shortDemo({ out }), { handleSignals: false, log: (l) => lines.push(l) });
    assert.equal(r.summary.steps, 2);
    assert.equal(readMetrics(join(out, 'metrics.jsonl')).length, 2);
    assert.equal(readTreeLines(join(out, 'trees.jsonl.gz')).length, 4);
    assert.ok(existsSync(join(out, 'config.json')));
    const ck = join(out, 'checkpoints', 'step-000002');
    for (const f of ['state.json', 'master.safetensors', 'policy/config.json', 'policy/tokenizer.json']) assert.ok(existsSync(join(ck, f)), f);
    assert.ok(readdirSync(join(ck, 'policy')).some((f) => f.endsWith('.safetensors')));
    assert.deepEqual(r.evals.map((e) => e.label), ['initial', 'final']);
    for (const e of r.evals) assert.deepEqual(e.result.iterations.map((p) => p.k), [1, 2]);
    assert.ok(r.reportPath && existsSync(r.reportPath));
    assert.ok(lines.some((l) => l.includes('Iter-k pass@1')));
    // the saved checkpoint loads as a model
    const m = await PolicyModel.load(join(ck, 'policy'));
    assert.equal(m.info.vocabSize, 512);
  });

  it('resume of the demo continues from the checkpoint exactly (native model, optimizer state included)', async () => {
    const out = join(work, 'demo-resume');
    const full = join(work, 'demo-full');
    const lines: string[] = [];
    await runTraining(shortDemo({ out, maxSteps: 3 }), { handleSignals: false, stopAfterStep: 1, report: false });
    const r = await runTraining(shortDemo({ out, maxSteps: 3 }), { handleSignals: false, resume: out, report: false, log: (l) => lines.push(l) });
    assert.equal(r.summary.steps, 3);
    assert.ok(!lines.some((l) => l.includes('not an exact resume')), 'the AdamW moments were restored');
    await runTraining(shortDemo({ out: full, maxSteps: 3 }), { handleSignals: false, report: false });
    const strip = (ms: Record<string, unknown>[]) => ms.map(({ time: _t, ...rest }) => rest);
    const resumed = readMetrics(join(out, 'metrics.jsonl')) as unknown as Record<string, unknown>[];
    assert.deepEqual(resumed.map((m) => m.step), [1, 2, 3]);
    assert.deepEqual(strip(resumed), strip(readMetrics(join(full, 'metrics.jsonl')) as unknown as Record<string, unknown>[]));
  });

  it('trains through murphy-native serve with the vLLM client, syncing weights after every step', async () => {
    const out = join(work, 'served');
    const before = loads;
    const r = await runTraining(shortDemo({ out, model: modelDir, backend: 'vllm', serverUrl: srv.url, sftSteps: 0, evalProblems: 2 }), { handleSignals: false, report: false });
    assert.equal(r.summary.steps, 2);
    assert.equal(loads - before, 2);
    assert.equal(readMetrics(join(out, 'metrics.jsonl')).length, 2);
  });

  it('weight sync round trip: the server serves exactly the trained weights', async () => {
    const policyModel = await PolicyModel.load(modelDir);
    const policy = new NativePolicy(policyModel, { tokenizerDir: modelDir });
    const b = packSequences([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10]]);
    await policy.accumulate({ ...b, advantages: new Float32Array(b.tokens.length).fill(1), oldLogp: new Float32Array(b.tokens.length).fill(-5) }, {}, 1);
    await policy.optimizerStep({ lr: 0.05 });
    const engine = await NativeEngine.load(modelDir);
    const s2 = await startServer({ engine, tokenizer: loadChatTokenizer(modelDir), modelName: 'tiny2' });
    try {
      const client = await VllmBackend.connect({ servers: [s2.url], tokenizer: loadChatTokenizer(modelDir), syncDir: join(work, 'sync') });
      const name = policy.params()[1]!.name;
      assert.notDeepEqual(engine.model.getParam(name), policy.getParam(name));
      const rep = await client.syncWeights(policy, 1);
      assert.equal(rep.failed.length, 0);
      for (const p of policy.params()) assert.deepEqual(engine.model.getParam(p.name), policy.getParam(p.name), p.name);
      const prompt = [10, 20, 30];
      const viaServer = await client.generate(prompt, 2, { seed: 5, temperature: 1, maxTokens: 6 });
      const local = await policyModel.generate([prompt], { maxNewTokens: 6, n: 2, seed: 5, temperature: 1, stopIds: loadChatTokenizer(modelDir).eosTokenIds as number[] });
      assert.deepEqual(viaServer.map((c) => c.tokenIds), local.map((g) => Array.from(g.tokens)));
      await client.close();
    } finally {
      await s2.close();
    }
  });

  it('clear errors, and nothing written, for bad config, data and servers', async () => {
    const out = (n: string) => join(work, `bad-${n}`);
    writeFileSync(join(work, 'bad.json'), '{"maxSteps": "many"}');
    assert.throws(() => resolveConfig({ file: join(work, 'bad.json') }), /config key "maxSteps" \(--max-steps\).*must be an integer >= 1; got "many"/);
    writeFileSync(join(work, 'broken.json'), '{"maxSteps": ');
    assert.throws(() => resolveConfig({ file: join(work, 'broken.json') }), /not valid JSON/);
    assert.throws(() => resolveConfig({ flags: { lossType: 'ppo' } }), /"lossType" \(--loss-type\).*one of dapo, grpo, dr_grpo/);
    await assert.rejects(runTraining(shortDemo({ out: out('nofile'), dataset: join(work, 'missing.jsonl') })), /dataset file not found/);
    writeFileSync(join(work, 'notests.jsonl'), JSON.stringify({ id: 'x', prompt: 'Write f.', asserts: [] }) + '\n');
    await assert.rejects(runTraining(shortDemo({ out: out('notests'), dataset: join(work, 'notests.jsonl') })), /have no tests/);
    await assert.rejects(
      runTraining(shortDemo({ out: out('server'), model: modelDir, backend: 'vllm', serverUrl: 'http://127.0.0.1:9' })),
      /no usable vLLM server/,
    );
    for (const n of ['nofile', 'notests', 'server']) assert.equal(existsSync(out(n)), false, n);
  });
});
