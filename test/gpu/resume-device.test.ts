// Resume across engines and --storage on the device (docs/training.md, "Checkpoint integrity
// and resume"; docs/gpu.md, --storage): a run checkpointed on the CPU engine continues on the
// device engine (the run says the continuation is not bit-exact), and a device run with
// --storage f32 trains in f32 and records it in its checkpoints.
// Skipped without a device, saying why. MURPHY_GPU_DRYRUN=1 runs the same logic with the device
// engine emulated on the CPU ('emulate'), which checks the test, not the GPU.
// Written without a GPU: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { resumeConfig, runTraining } from '../../lib/commands/run-training.js';
import { defaultConfig, type TrainConfig } from '../../lib/config/index.js';
import { readTrainerState } from '../../lib/train/checkpoint.js';
import { announce, dryRun, gpuOnly } from './common.js';

announce('gpu/resume-device');
const device = dryRun ? 'emulate' : 'cuda';
const tmp = mkdtempSync(join(tmpdir(), 'gpu-resume-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const cfg = (out: string, over: Partial<TrainConfig>): TrainConfig => ({
  ...defaultConfig(), out, maxSteps: 2, saveSteps: 2, batchSize: 2, numGenerations: 2, maxCompletionLength: 16, evalProblems: 1, evalIterations: 1, sftSteps: 0, ...over,
});

describe(`resume and --storage on the device engine (${device})`, () => {
  it('a CPU run resumes on the device engine: one line says it is not bit-exact, and it trains on', { ...gpuOnly, timeout: 300_000 }, async () => {
    const out = join(tmp, 'cpu-then-device');
    await runTraining(cfg(out, { device: 'cpu' }), { handleSignals: false, report: false });
    assert.deepEqual(readTrainerState(join(out, 'checkpoints', 'step-000002')).engine, { device: 'cpu', storage: 'f32' });
    const lines: string[] = [];
    // on a GPU the real --device cuda path; in a dry run the same engine emulated (config device unchanged)
    const c = resumeConfig(out, dryRun ? { maxSteps: 3 } : { maxSteps: 3, device: 'cuda' });
    const r = await runTraining(c, { resume: out, handleSignals: false, report: false, log: (l) => lines.push(l), engine: dryRun ? { device: 'emulate' } : undefined });
    assert.equal(r.summary.steps, 3);
    const want = dryRun ? /trained on the cpu engine, this run uses the emulate engine: .*not bit-exact/ : /"device" "cpu" -> "cuda" \(checkpoint -> now\).*not bit-exact/;
    assert.ok(lines.some((l) => want.test(l)), lines.join('\n'));
    assert.ok(r.summary.metrics.every((m) => Number.isFinite(m.reward)));
    assert.deepEqual(readTrainerState(join(out, 'checkpoints', 'step-000003')).engine, { device, storage: 'bf16' });
  });

  it('--storage f32: the device engine trains in f32 and its checkpoints say so', { ...gpuOnly, timeout: 300_000 }, async () => {
    const out = join(tmp, 'f32');
    const r = await runTraining(cfg(out, { device: dryRun ? 'auto' : 'cuda', storage: 'f32' }), { handleSignals: false, report: false, engine: dryRun ? { device: 'emulate' } : undefined });
    assert.equal(r.summary.steps, 2);
    assert.deepEqual(readTrainerState(join(out, 'checkpoints', 'step-000002')).engine, { device, storage: 'f32' });
  });
});
