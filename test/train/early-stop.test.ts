// Early stop when the training signal has vanished (earlyStopWindow / earlyStopMinSignal): the
// window rule on its own, and in the loop with a fake policy whose problems become solved
// (every group zero-variance): the run stops, says why in the log and metrics, and still
// writes its checkpoint and runs the final evaluation.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { defaultConfig, DEMO_DEFAULTS, type TrainConfig } from '../../lib/config/index.js';
import { FakeExecutor, FakePromptBuilder } from '../../lib/murphy/index.js';
import type { ExecResult, Executor } from '../../lib/murphy/types.js';
import { latestCheckpoint } from '../../lib/train/checkpoint.js';
import { SignalWindow } from '../../lib/train/early-stop.js';
import { train } from '../../lib/train/loop.js';
import type { StepMetrics } from '../../lib/train/metrics.js';
import { silentProgress } from '../../lib/train/progress.js';
import { readMetrics, RunDir } from '../../lib/train/rundir.js';
import { FakeBackend, FakePolicy } from './fakes.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-early-stop-'));
after(() => rmSync(root, { recursive: true, force: true }));

const step = (n: number, groups: number, zero: number, reward = 0.5) => ({ step: n, problems: 1, groupsPerTree: groups, zeroVarianceGroups: zero, reward });

describe('early stop: the window rule', () => {
  it('stops once the share of groups with a signal over the last N steps is at most the threshold', () => {
    const w = new SignalWindow(3, 0.1);
    assert.equal(w.push(step(1, 10, 10)), null, 'the window is not full yet');
    assert.equal(w.push(step(2, 10, 10)), null);
    // 3 of 30 groups with a signal: exactly the threshold
    assert.match(w.push(step(3, 10, 7, 0.8)) ?? '', /^no training signal: 3 of 30 groups \(10%\) had reward variance in the last 3 steps \(steps 1-3; earlyStopMinSignal 0\.1\); mean reward 0\.60$/);
    const v = new SignalWindow(3, 0.1);
    for (const [i, z] of [10, 10, 6].entries()) assert.equal(v.push(step(i + 1, 10, z)), null, '4 of 30 is above the threshold');
    // the step with a signal stays in the window for 3 steps, then leaves it
    assert.equal(v.push(step(4, 10, 10)), null);
    assert.equal(v.push(step(5, 10, 10)), null);
    assert.match(v.push(step(6, 10, 10)) ?? '', /0 of 30 groups \(0%\) .* \(steps 4-6;/);
  });
  it('window 0 never stops; a step with no groups counts as no signal', () => {
    const off = new SignalWindow(0, 0.5);
    for (let i = 1; i <= 50; i++) assert.equal(off.push(step(i, 0, 0)), null);
    const w = new SignalWindow(2, 0);
    w.push(step(1, 0, 0));
    assert.notEqual(w.push(step(2, 0, 0)), null);
  });
  it('is off for train in general and on for the demo', () => {
    assert.equal(defaultConfig().earlyStopWindow, 0);
    assert.ok((DEMO_DEFAULTS.earlyStopWindow ?? 0) > 0);
  });
});

/** Fake grading until `solved` is set, then every program passes: every group has zero variance. */
class SolvingExecutor implements Executor<unknown> {
  solved = false;
  private readonly inner = new FakeExecutor();
  async execute(p: unknown, code: string): Promise<ExecResult> {
    return this.solved ? { reward: 1, passed: true, feedback: 'All tests passed.' } : this.inner.execute(p, code);
  }
}

describe('early stop in the training loop', () => {
  it('stops after the window of signal-less steps, says why, checkpoints and runs the final evaluation', async () => {
    const dir = join(root, 'run');
    const c: TrainConfig = { ...defaultConfig(), maxSteps: 30, saveSteps: 100, batchSize: 3, numGenerations: 4, earlyStopWindow: 3, earlyStopMinSignal: 0 };
    const executor = new SolvingExecutor();
    const policy = new FakePolicy();
    const evals: [string, number][] = [];
    const lines: string[] = [];
    const seen: StepMetrics[] = [];
    const summary = await train(c, new RunDir(dir), {
      policy, backend: new FakeBackend(policy), executor, prompts: new FakePromptBuilder(), problems: Array.from({ length: 10 }, (_, i) => ({ id: `p${i}` })),
      evaluate: async (label, s) => { evals.push([label, s]); },
      progress: { ...silentProgress, line: (t) => lines.push(t) },
      onStep: (m) => { seen.push(m); if (m.step === 4) executor.solved = true; },
    }, { handleSignals: false });
    assert.ok(seen.slice(0, 4).some((m) => m.zeroVarianceGroups < m.groupsPerTree * m.problems), 'the first steps had a signal');
    assert.equal(summary.steps, 7, 'steps 5-7 had no signal');
    assert.match(summary.earlyStop ?? '', /^no training signal: 0 of \d+ groups \(0%\) had reward variance in the last 3 steps \(steps 5-7; earlyStopMinSignal 0\); mean reward 1\.00$/);
    assert.equal(summary.stoppedEarly, false, 'not a signal: nothing to resume');
    const m = readMetrics(join(dir, 'metrics.jsonl')) as unknown as StepMetrics[];
    assert.deepEqual(m.map((x) => x.step), [1, 2, 3, 4, 5, 6, 7]);
    assert.equal(m[6]!.earlyStop, summary.earlyStop);
    assert.ok(m.slice(0, 6).every((x) => x.earlyStop === undefined));
    assert.deepEqual(evals, [['initial', 0], ['final', 7]]);
    assert.ok(latestCheckpoint(new RunDir(dir))?.endsWith('step-000007'));
    assert.ok(lines.some((l) => l.startsWith('early stop after step 7 of 30: no training signal')), lines.join('\n'));
  });
});
