// A resumed run with --backend vllm syncs the checkpoint's weights to its servers before the
// first rollout: a server restarted from --model (or one holding a step after the checkpoint)
// would otherwise generate the resumed step with other weights than the trainer's.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { defaultConfig, type TrainConfig } from '../../lib/config/index.js';
import { runTraining } from '../../lib/commands/run-training.js';
import { loadChatTokenizer } from '../../lib/prompt/index.js';
import { NativeEngine, startServer, type EngineRequest, type EngineSample, type RolloutServer } from '../../lib/rollout/index.js';
import { SpyEngine } from './serve-helpers.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-wsync-resume-'));
let dir = '';
let srv: RolloutServer;
/** What the server's engine did, in order: 'probe' (the client's one-token start-up check), 'gen' or 'load DIR'. */
const events: string[] = [];
let engine: NativeEngine;

class Recording extends SpyEngine {
  override generate(batch: EngineRequest[]): Promise<EngineSample[][]> {
    events.push(batch.every((r) => r.maxTokens === 1) ? 'probe' : 'gen');
    return super.generate(batch);
  }
  override loadWeights(d: string): Promise<void> {
    events.push(`load ${d}`);
    return super.loadWeights(d);
  }
}

before(async () => {
  dir = await writeTinyModel(join(work, 'model'), 5, 0.1);
  engine = await NativeEngine.load(dir);
  srv = await startServer({ engine: new Recording(engine), tokenizer: loadChatTokenizer(dir), modelName: 'tiny' });
});
after(async () => {
  await srv?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('resume with --backend vllm', () => {
  it('syncs the checkpoint\'s weights to the servers before the first rollout', async () => {
    const out = join(work, 'run');
    const c: TrainConfig = {
      ...defaultConfig(), out, model: dir, backend: 'vllm', serverUrl: srv.url, maxSteps: 2, saveSteps: 1, batchSize: 2, numGenerations: 2,
      maxCompletionLength: 12, sftSteps: 0, evalProblems: 1, evalIterations: 1, evalSamples: 1,
    };
    await runTraining(c, { handleSignals: false, report: false, stopAfterStep: 1 });
    assert.ok(events.includes(`load ${join(out, 'sync', 'step-1')}`), events.join(', '));
    // the server restarts from --model
    await engine.loadWeights(dir);
    events.length = 0;
    await runTraining(c, { handleSignals: false, report: false, resume: out });
    const calls = events.filter((e) => e !== 'probe');
    assert.equal(calls[0], `load ${join(out, 'sync', 'step-1')}`, `the resumed run's first server calls: ${events.slice(0, 4).join(', ')}`);
    assert.ok(calls.includes('gen'));
  });
});
