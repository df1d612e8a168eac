// A whole data-parallel training run (the demo, 2 ranks in this process, warm-up and 2 steps that
// train) over the NCCL backend on the tests' fake library equals the same run over the CPU
// backend bit for bit: every figure of metrics.jsonl but time, and the checkpointed weights and
// optimizer shards. The fake reduces in rank order as the CPU backend does, so any difference
// would come from the NCCL backend's own arithmetic (padding of uneven parts, byte moves, f64).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { resolveConfig } from '../../lib/config/index.js';
import { runTraining } from '../../lib/commands/run-training.js';
import type { Collective } from '../../lib/dist/collective.js';
import { setNumThreads } from '../../lib/native.js';
import { readSafetensorsF32 } from '../../lib/safetensors.js';
import { closeWorlds, localWorld, ncclLocalWorld, useFakeNccl } from './helpers.js';
import { metrics } from './train-runs.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-dp-nccl-'));
setNumThreads(1);
useFakeNccl(root, () => rmSync(root, { recursive: true, force: true }));

const FLAGS = { maxSteps: 2, saveSteps: 2, batchSize: 4, numGenerations: 4, sftSteps: 4, sftLearningRate: 0.03, microBatchTokens: 512, evalProblems: 1, evalIterations: 1, evalSamples: 1, device: 'cpu' };

async function twoRanks(world: Collective[], out: string): Promise<void> {
  const cfg = resolveConfig({ flags: { ...FLAGS, out } });
  await Promise.all(world.map((c) => runTraining(cfg, { handleSignals: false, report: false, dist: { collective: c } })));
}

describe('data-parallel training over NCCL (fake library)', () => {
  it('2 ranks over NCCL train bit for bit as 2 ranks over the CPU backend', async () => {
    const tcp = join(root, 'tcp'), nccl = join(root, 'nccl');
    await twoRanks(await localWorld(2), tcp);
    await twoRanks(await ncclLocalWorld(2), nccl);
    const strip = (m: Record<string, unknown>[]) => m.map(({ time: _t, ...rest }) => rest);
    const mt = metrics(tcp);
    assert.ok(mt.every((x) => (x.microBatches as number) >= 2), 'the demo trained nothing');
    assert.deepEqual(strip(metrics(nccl)), strip(mt));
    const ck = 'checkpoints/step-000002';
    for (const f of ['master.safetensors', 'optimizer-shard-00000-of-00002.safetensors', 'optimizer-shard-00001-of-00002.safetensors']) {
      const a = readSafetensorsF32(join(tcp, ck, f)).tensors, b = readSafetensorsF32(join(nccl, ck, f)).tensors;
      for (const [n, t] of Object.entries(a)) assert.deepEqual(b[n]!.data, t.data, `${f} ${n}`);
    }
  });
});
