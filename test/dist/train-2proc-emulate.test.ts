// Data parallel on the device engine: `train --nproc-per-node 2 --device emulate` (the device
// engine on the CPU harness, bf16 storage; the ranks' collectives over TCP, distBackend auto)
// trains what one process trains on the same global batch. The demo is set up to train
// something (4 warm-up steps at lr 0.03, micro-batches of at most 512 tokens: both ranks get
// micro-batches). To keep the test short, one process runs the warm-up and 2 steps here; a copy
// of its run, cut back to its step-1 checkpoint, is resumed by the 2-rank command (the
// one-process optimizer state re-sharded onto 2 ranks) for step 2. Tolerance: every tree,
// reward, count and token figure equal; loss, meanRatio and gradNorm within 1e-5 relative (the
// ranks sample their own problems' rollouts: the same tokens, log-probs that can differ in the
// last bit; and the gradients are summed per rank, then across ranks); the weights after step 2
// within 1e-5 absolute (measured: 1.5e-8 to 3.3e-7).
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { resolveConfig } from '../../lib/config/index.js';
import { runTraining } from '../../lib/commands/run-training.js';
import { setNumThreads } from '../../lib/native.js';
import { assertSameRun, metrics, runTrain } from './train-runs.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-dp-emu-'));
after(() => rmSync(root, { recursive: true, force: true }));
setNumThreads(1);

const FLAGS = {
  device: 'emulate', maxSteps: 2, saveSteps: 1, batchSize: 4, numGenerations: 4, sftSteps: 4, sftLearningRate: 0.03,
  microBatchTokens: 512, evalProblems: 1, evalIterations: 1, evalSamples: 1,
};

describe('train --nproc-per-node 2 --device emulate (demo)', () => {
  it('a step on 2 ranks (resumed from a one-process checkpoint) matches the one process', async () => {
    const one = join(root, 'one'), two = join(root, 'two');
    await runTraining(resolveConfig({ flags: { ...FLAGS, out: one } }), { handleSignals: false, report: false });
    const m = metrics(one);
    assert.ok(m.every((x) => (x.microBatches as number) >= 2 && (x.samplesTrained as number) > 0), `the demo trained nothing: ${JSON.stringify(m.map((x) => x.microBatches))}`);
    cpSync(one, two, { recursive: true });
    rmSync(join(two, 'checkpoints/step-000002'), { recursive: true });
    writeFileSync(join(two, 'checkpoints/latest'), 'step-000001\n');
    const r = await runTrain(['--resume', two, '--nproc-per-node', '2']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /device +emulate/);
    assert.deepEqual(readdirSync(join(two, 'checkpoints/step-000002')).filter((f) => f.startsWith('optimizer')).sort(), ['optimizer-shard-00000-of-00002.safetensors', 'optimizer-shard-00001-of-00002.safetensors']);
    assertSameRun(one, two, { close: ['loss', 'meanRatio', 'gradNorm'], rel: 1e-5, weights: 1e-5, step: 2 });
  });
});
