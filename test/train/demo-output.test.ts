// What `murphy-native train` prints: a short header (the full configuration only with
// verbose), one progress phase each for the warm-up, the evaluations and the training steps,
// with the figures that move, and no per-step lines unless verbose.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { defaultConfig, type TrainConfig } from '../../lib/config/index.js';
import { runTraining } from '../../lib/commands/run-training.js';
import { StderrProgress } from '../../lib/train/progress.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-demo-out-'));
after(() => rmSync(work, { recursive: true, force: true }));

const tiny = (out: string): TrainConfig => ({ ...defaultConfig(), out, maxSteps: 3, saveSteps: 10, batchSize: 2, numGenerations: 2, maxCompletionLength: 8, evalProblems: 2, evalIterations: 2, sftSteps: 2 });

async function run(verbose: boolean): Promise<{ log: string; err: string }> {
  const stream = { isTTY: false, out: '', write(s: string) { this.out += s; return true; } };
  const lines: string[] = [];
  await runTraining(tiny(join(work, verbose ? 'v' : 'q')), { handleSignals: false, report: false, verbose, progress: new StderrProgress(stream), log: (l) => lines.push(l) });
  return { log: lines.join('\n'), err: stream.out };
}

describe('train output', () => {
  it('default: header with model, task, algorithm, steps and run dir; a phase each; figures that move; no config dump', async () => {
    const { log, err } = await run(false);
    const head = log.split('\n').slice(0, 7).join('\n');
    assert.match(head, /^murphy-native train: the CPU demo \(no --model, no --dataset\)\n  model +random tiny Qwen3-shaped model \(seed 0\)/);
    assert.match(head, /\n  task +built-in code repair: \d+ training problems, 2 held-out for evaluation/);
    assert.match(head, /\n  algorithm +MURPHY: up to 2 turns, MaRS credit; per step 2 problems x 2 attempts/);
    assert.match(head, /\n  steps +3 \(after 2 supervised warm-up steps/);
    assert.match(head, /\n  device +cpu \(auto: [^\n]+\)\n/, 'where it trains, in the header');
    assert.match(head, new RegExp(`\\n  run dir +${join(work, 'q').replace(/[/\\\\.]/g, '\\$&')}  \\(every setting: config.json there, or --verbose\\)`));
    assert.doesNotMatch(log, /microBatchTokens/);
    assert.match(log, /Iter-k pass@1/, 'the evaluation tables are still printed');
    const phases = err.split('\n').filter((l) => /done in/.test(l)).map((l) => l.split(/ \d/)[0]);
    assert.deepEqual(phases, ['warm-up', 'eval (before)', 'train', 'eval (after)']);
    assert.match(err, /^train 3\/3  done in \d\d:\d\d  reward t1 \d\.\d\d t2 (\d\.\d\d|-) · pass@1 t1 \d+% t2 (\d+%|-) · [\d.]+k? tokens trained\/step · signal in \d+% of groups/m);
    assert.doesNotMatch(err + log, /^step +\d\/3 /m, 'no per-step lines');
    assert.doesNotMatch(err + log, /loss -?0\.0000/);
  });
  it('verbose: the full configuration and one line per step', async () => {
    const { log, err } = await run(true);
    assert.match(log, /microBatchTokens +8192/);
    assert.equal(err.split('\n').filter((l) => /^step +\d\/3 /.test(l)).length, 3);
  });
});
