// The check: `train --nproc-per-node 2 --device cpu` on the demo gives the same metrics
// and weights as one process with the same global batch. The demo is set up to train something
// (4 warm-up steps at lr 0.03, micro-batches of at most 512 tokens, so both ranks get
// micro-batches; with the demo's defaults here no group had a reward signal and nothing was
// trained). Tolerance: every tree, reward, count and token figure is equal exactly (the rollouts
// are the same tokens); loss, meanRatio and gradNorm within 1e-5 relative (each rank samples its
// own problems, so a log-prob can differ in its last bit; the gradients are summed in another
// order: per rank, then across ranks) and the weights within 1e-5 absolute. Every process uses
// one kernel thread. Then the 2-rank run resumes from its step-1 checkpoint on 1 rank (the
// optimizer shards re-sharded) and ends where the uninterrupted run did; a one-process resume of
// a sharded checkpoint is refused with one line. The one-process runs are in this process (fewer
// process start-ups); the 2-rank run is the real command.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { resolveConfig } from '../../lib/config/index.js';
import { resumeConfig, runTraining } from '../../lib/commands/run-training.js';
import { SoloCollective } from '../../lib/dist/collective.js';
import { setNumThreads } from '../../lib/native.js';
import { assertSameRun, metrics, runTrain } from './train-runs.js';
import { cli } from '../helpers/cli.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-dp-'));
after(() => rmSync(root, { recursive: true, force: true }));

setNumThreads(1);
const FLAGS = { maxSteps: 2, saveSteps: 1, batchSize: 4, numGenerations: 4, sftSteps: 4, sftLearningRate: 0.03, microBatchTokens: 512, evalProblems: 1, evalIterations: 1, evalSamples: 1, device: 'cpu' };
const ARGS = ['--max-steps', '2', '--save-steps', '1', '--batch-size', '4', '--num-generations', '4', '--sft-steps', '4', '--sft-learning-rate', '0.03', '--micro-batch-tokens', '512', '--eval-problems', '1', '--eval-iterations', '1', '--eval-samples', '1', '--device', 'cpu'];
/** The SIGINT case needs a job that runs, not one that trains: the demo's cheapest. */
const SIG_ARGS = ['--batch-size', '4', '--num-generations', '4', '--sft-steps', '2', '--eval-problems', '1', '--eval-iterations', '1', '--eval-samples', '1', '--device', 'cpu'];
const run = runTrain;
const SAME = { close: ['loss', 'meanRatio', 'gradNorm'], rel: 1e-5, weights: 1e-5, step: 2 };

describe('train --nproc-per-node 2 --device cpu (demo)', () => {
  it('matches one process on the same global batch; resumes re-sharded on 1 rank', async () => {
    const one = join(root, 'one'), two = join(root, 'two');
    const quiet = { handleSignals: false, report: false };
    const [, r2] = await Promise.all([
      runTraining(resolveConfig({ flags: { ...FLAGS, out: one } }), quiet),
      run([...ARGS, '--out', two, '--nproc-per-node', '2']),
    ]);
    assert.equal(r2.code, 0, r2.out);
    assert.ok(metrics(one).every((x) => (x.microBatches as number) >= 2), 'the demo trained nothing');
    assert.ok(!/\[rank 1\]/.test(r2.out), `rank 1 printed:\n${r2.out}`);
    assert.deepEqual(readdirSync(join(two, 'checkpoints/step-000002')).filter((f) => f.startsWith('optimizer')).sort(), ['optimizer-shard-00000-of-00002.safetensors', 'optimizer-shard-00001-of-00002.safetensors']);
    assertSameRun(one, two, SAME);

    // resume the 2-rank run from step 1 on one rank
    const again = join(root, 'again');
    cpSync(two, again, { recursive: true });
    rmSync(join(again, 'checkpoints/step-000002'), { recursive: true });
    writeFileSync(join(again, 'checkpoints/latest'), 'step-000001\n');
    await assert.rejects(runTraining(resumeConfig(again, {}), { ...quiet, resume: again }), /holds the optimizer shards of a 2-rank run; resume it with --nproc-per-node N/);
    // --nproc-per-node 1 is one rank with a collective of one
    await runTraining(resumeConfig(again, {}), { ...quiet, resume: again, dist: { collective: new SoloCollective() } });
    assert.ok(existsSync(join(again, 'checkpoints/step-000002/optimizer-shard-00000-of-00001.safetensors')));
    assertSameRun(one, again, SAME);
  });

  it('SIGINT to the launcher reaches every rank once: they agree on a step, checkpoint it, and the job exits 130', async () => {
    const out = join(root, 'sig');
    const c = spawn(process.execPath, cli('train', ...SIG_ARGS, '--max-steps', '50', '--save-steps', '50', '--verbose', '--out', out, '--nproc-per-node', '2'), {
      env: { ...process.env, MURPHY_NUM_THREADS: '1', MASTER_PORT: '' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    let sent = false;
    const onData = (d: Buffer): void => {
      text += d.toString();
      if (!sent && /step +1\/50/.test(text)) {
        sent = true;
        c.kill('SIGINT'); // after the first step line: the ranks are training
      }
    };
    c.stdout.on('data', onData);
    c.stderr.on('data', onData);
    const code = await new Promise<number | null>((r) => c.on('exit', (k) => r(k)));
    assert.equal(code, 130, text);
    assert.doesNotMatch(text, /second SIGINT|rank \d failed/);
    const steps = metrics(out).length;
    assert.ok(steps >= 1 && steps < 50);
    const ck = join(out, 'checkpoints', `step-${String(steps).padStart(6, '0')}`);
    assert.deepEqual(readdirSync(ck).filter((f) => f.startsWith('optimizer')).length, 2);
    assert.equal(JSON.parse(readFileSync(join(ck, 'state.json'), 'utf8')).step, steps);
  });
});
