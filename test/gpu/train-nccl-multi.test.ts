// Data parallel on GPUs over NCCL, the check to run on a machine with at least 2 GPUs (npm run
// test:gpu, or alone: node --import tsx --test test/gpu/train-nccl-multi.test.ts): the demo on
// --device cuda in this process (warm-up and 2 steps on GPU 0), then a copy of that run cut back
// to its step-1 checkpoint resumed by `train --nproc-per-node 2 --device cuda` (distBackend auto:
// NCCL, one GPU per rank) for step 2, which must match the one process as test/dist/
// train-2proc-emulate.test.ts does on the CPU (tolerances measured there, on the device engine
// emulated: not yet on a GPU). MURPHY_GPU_DRYRUN=1 runs the same logic with --device emulate and
// --dist-backend tcp (the fake NCCL cannot join ranks of several processes). Skipped with fewer
// than 2 devices or without NCCL, saying why. It has not yet run: no GPU was available to its author.
import './binary.js';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { resolveConfig } from '../../lib/config/index.js';
import { runTraining } from '../../lib/commands/run-training.js';
import { findNccl } from '../../lib/gpu/nccl.js';
import { cuda } from '../../lib/native.js';
import { assertSameRun, metrics, runTrain } from '../dist/train-runs.js';
import { dryRun, skipReason } from './common.js';

const devices = skipReason || dryRun ? 0 : cuda.status().devices.length;
const nccl = devices >= 2 ? findNccl({ install: true }) : undefined;
const skip = dryRun ? false
  : skipReason || (devices < 2 ? `needs at least 2 CUDA devices, this machine has ${devices}` : nccl && !nccl.found ? nccl.reason! : false);
console.log(`# gpu/train-nccl-multi: ${dryRun ? 'MURPHY_GPU_DRYRUN=1: --device emulate over TCP (no GPU, no NCCL tested)' : skip || `${devices} devices, NCCL ${nccl?.versionText} from ${nccl?.path}`}`);

const root = mkdtempSync(join(tmpdir(), 'murphy-gpu-dp-'));
after(() => rmSync(root, { recursive: true, force: true }));

describe('train --nproc-per-node 2 --device cuda over NCCL (demo)', () => {
  it('a step on 2 GPUs (resumed from a one-GPU checkpoint) matches the one process', { skip }, async () => {
    const device = dryRun ? 'emulate' : 'cuda';
    const flags = {
      device, distBackend: dryRun ? 'tcp' : 'auto', maxSteps: 2, saveSteps: 1, batchSize: 4, numGenerations: 4, sftSteps: 4, sftLearningRate: 0.03,
      microBatchTokens: 512, evalProblems: 1, evalIterations: 1, evalSamples: 1,
    };
    const one = join(root, 'one'), two = join(root, 'two');
    await runTraining(resolveConfig({ flags: { ...flags, out: one } }), { handleSignals: false, report: false });
    assert.ok(metrics(one).every((x) => (x.microBatches as number) >= 2), 'the demo trained nothing');
    cpSync(one, two, { recursive: true });
    rmSync(join(two, 'checkpoints/step-000002'), { recursive: true });
    writeFileSync(join(two, 'checkpoints/latest'), 'step-000001\n');
    const r = await runTrain(['--resume', two, '--nproc-per-node', '2']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`device +${device}`));
    const worst = assertSameRun(one, two, { close: ['loss', 'meanRatio', 'gradNorm'], rel: 1e-5, weights: 1e-5, step: 2 });
    console.log(`# gpu/train-nccl-multi: max |w_1proc - w_2ranks| after step 2 = ${worst}`);
  });
});
