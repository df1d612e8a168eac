// The training loop with a fake policy and backend: metrics, trees, checkpoints, resume
// equivalence, signals, crash leftovers.
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { TrainConfig } from '../../lib/config/index.js';
import { FakeExecutor, FakePromptBuilder } from '../../lib/murphy/index.js';
import { latestCheckpoint, readTrainerState } from '../../lib/train/checkpoint.js';
import { train } from '../../lib/train/loop.js';
import type { StepMetrics } from '../../lib/train/metrics.js';
import type { LossOptions, TrainBatch } from '../../lib/train/policy.js';
import { readMetrics, readTreeLines, RunDir } from '../../lib/train/rundir.js';
import { FAKE_PROBLEMS, fakeLoop } from './configs.js';
import { FakeBackend, FakePolicy } from './fakes.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-loop-'));
after(() => rmSync(root, { recursive: true, force: true }));

async function run(dir: string, c: TrainConfig, opts: { resume?: boolean; stopAfterStep?: number } = {}) {
  const policy = new FakePolicy();
  const backend = new FakeBackend(policy);
  const summary = await train(c, new RunDir(dir), { policy, backend, executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems: FAKE_PROBLEMS }, { ...opts, handleSignals: false });
  return { policy, backend, summary };
}

const strip = (ms: Record<string, unknown>[]) => ms.map(({ time: _t, ...rest }) => rest);

describe('train loop', () => {
  it('a backend holding rollout memory gives it back before each training phase; paged prefill figures go to the metrics', async () => {
    const dir = join(root, 'paged');
    const policy = new FakePolicy();
    const events: string[] = [];
    const counters = { noRoom: 0, aborted: 0, prefillTokens: 0, prefillSaved: 0, preemptions: 0 };
    class PagedLike extends FakeBackend {
      get counters() { return counters; }
      override async generate(...a: Parameters<FakeBackend['generate']>) {
        events.push('generate');
        counters.prefillTokens += 10;
        counters.prefillSaved += 3;
        return super.generate(...a);
      }
      async releaseRolloutMemory(): Promise<void> { events.push('release'); }
    }
    const accumulate = policy.accumulate.bind(policy);
    policy.accumulate = (...a: Parameters<FakePolicy['accumulate']>) => { events.push('train'); return accumulate(...a); };
    await train(fakeLoop({ maxSteps: 2, saveSteps: 2 }), new RunDir(dir), { policy, backend: new PagedLike(policy), executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems: FAKE_PROBLEMS }, { handleSignals: false });
    // per step: every generate, then one release, then training
    const steps = events.join(' ').split(/(?<=train) (?=generate)/);
    assert.equal(steps.length, 2);
    for (const st of steps) assert.match(st, /^(generate )+release (train ?)+$/);
    const m = readMetrics(join(dir, 'metrics.jsonl')) as unknown as StepMetrics[];
    const gens = steps.map((st) => st.split(' ').filter((e) => e === 'generate').length);
    assert.deepEqual(m.map((x) => x.prefill), gens.map((g) => ({ computed: 10 * g, saved: 3 * g, preemptions: 0 })));
  });

  it('marks the last micro-batch of each step and lets the policy start its gradient reductions before the step (data parallelism)', async () => {
    const dir = join(root, 'last');
    const policy = new FakePolicy() as FakePolicy & { reduceGradients(): Promise<void> };
    const events: string[] = [];
    const accumulate = policy.accumulate.bind(policy);
    policy.accumulate = (b: TrainBatch, l: LossOptions, s: number, o?: { last?: boolean }) => { events.push(o?.last ? 'last' : 'acc'); return accumulate(b, l, s); };
    policy.reduceGradients = async () => { events.push('reduce'); };
    const step = policy.optimizerStep.bind(policy);
    policy.optimizerStep = (h) => { events.push('step'); return step(h); };
    await train(fakeLoop({ maxSteps: 2, saveSteps: 2, microBatchTokens: 64 }), new RunDir(dir), { policy, backend: new FakeBackend(policy), executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems: FAKE_PROBLEMS }, { handleSignals: false });
    const steps = events.join(' ').split(/(?<=step) /);
    assert.equal(steps.length, 2);
    for (const st of steps) assert.match(st, /^(acc )+last reduce step$/, 'several micro-batches, the last marked, then the reductions, then the step');
  });

  it('old log-probs: the rollout\'s when sampling is unprocessed; with top-p, top-k or min-p none (the loss takes its own) and no scoring pass', async () => {
    for (const [k, sampling] of [{}, { topP: 0.9 }, { topK: 5 }, { minP: 0.05 }].entries()) {
      const policy = new FakePolicy();
      const olds: (Float32Array | undefined)[] = [];
      const accumulate = policy.accumulate.bind(policy);
      policy.accumulate = (b: TrainBatch, l: LossOptions, s: number) => { olds.push(b.oldLogp); return accumulate(b, l, s); };
      policy.score = async () => assert.fail('the loop scored a batch');
      await train(fakeLoop({ maxSteps: 1, saveSteps: 1, ...sampling }), new RunDir(join(root, `old-logp-${k}`)), { policy, backend: new FakeBackend(policy), executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems: FAKE_PROBLEMS }, { handleSignals: false });
      assert.ok(olds.length > 0);
      const unprocessed = k === 0;
      for (const o of olds) assert.equal(o !== undefined, unprocessed, JSON.stringify(sampling));
    }
  });

  it('writes one metrics line per step, trees, checkpoints, and syncs weights after each step', async () => {
    const dir = join(root, 'plain');
    const { backend, summary } = await run(dir, fakeLoop());
    assert.equal(summary.steps, 6);
    const m = readMetrics(join(dir, 'metrics.jsonl')) as unknown as StepMetrics[];
    assert.deepEqual(m.map((x) => x.step), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(backend.syncs, [1, 2, 3, 4, 5, 6]);
    for (const x of m) {
      assert.equal(x.problems, 3);
      assert.equal(x.passAt1PerTurn.length, 2);
      assert.ok(x.nodesPerTree >= 4);
      assert.ok(x.tokensSampled > 0);
      assert.ok(x.time.total >= 0 && x.time.rollout >= 0);
      assert.ok(x.lr > 0);
      assert.equal(x.prefill, undefined, 'no prefill figures from a backend that reports none');
    }
    const trees = readTreeLines(join(dir, 'trees.jsonl.gz'));
    assert.equal(trees.length, 18);
    assert.deepEqual([...new Set(trees.map((t) => t.step))], [1, 2, 3, 4, 5, 6]);
    const ck = latestCheckpoint(new RunDir(dir));
    assert.ok(ck && ck.endsWith('step-000006'));
    const st = readTrainerState(ck!);
    assert.equal(st.step, 6);
    assert.equal(st.problemsConsumed, 18);
    assert.ok(existsSync(join(ck!, 'policy', 'config.json')));
    // only the newest two checkpoints are kept
    assert.deepEqual(readdirSync(join(dir, 'checkpoints')).filter((n) => n.startsWith('step-')).sort(), ['step-000004', 'step-000006']);
  });

  it('is reproducible: same seed and config give the same metrics', async () => {
    const a = await run(join(root, 'rep-a'), fakeLoop({ maxSteps: 3 }));
    const b = await run(join(root, 'rep-b'), fakeLoop({ maxSteps: 3 }));
    assert.deepEqual(strip(a.summary.metrics as unknown as Record<string, unknown>[]), strip(b.summary.metrics as unknown as Record<string, unknown>[]));
    const c = await run(join(root, 'rep-c'), fakeLoop({ maxSteps: 3, seed: 7 }));
    assert.notDeepEqual(strip(a.summary.metrics as unknown as Record<string, unknown>[]), strip(c.summary.metrics as unknown as Record<string, unknown>[]));
  });

  it('an interrupted and resumed run has the metrics and trees of an uninterrupted one', async () => {
    const full = join(root, 'full');
    const part = join(root, 'part');
    await run(full, fakeLoop({ maxSteps: 7, saveSteps: 3 }));
    const first = await run(part, fakeLoop({ maxSteps: 7, saveSteps: 3 }), { stopAfterStep: 4 });
    assert.equal(first.summary.stoppedEarly, true);
    assert.equal(readTrainerState(latestCheckpoint(new RunDir(part))!).step, 4);
    // a crash after the checkpoint leaves junk that the resume must cut away
    appendFileSync(join(part, 'metrics.jsonl'), '{"step": 5, "torn": tr');
    const second = await run(part, fakeLoop({ maxSteps: 7, saveSteps: 3 }), { resume: true });
    assert.equal(second.summary.steps, 7);
    assert.deepEqual(strip(readMetrics(join(part, 'metrics.jsonl'))), strip(readMetrics(join(full, 'metrics.jsonl'))));
    assert.deepEqual(readTreeLines(join(part, 'trees.jsonl.gz')), readTreeLines(join(full, 'trees.jsonl.gz')));
  });

  it('SIGINT checkpoints the last completed step and stops', async () => {
    const dir = join(root, 'sig');
    const policy = new FakePolicy();
    const backend = new FakeBackend(policy);
    let fired = false;
    const slow = {
      kind: 'fake',
      generate: async (ids: number[], n: number, p: object) => {
        if (!fired && backend.syncs.length === 2) {
          fired = true;
          process.emit('SIGINT', 'SIGINT');
        }
        return backend.generate(ids, n, p);
      },
      syncWeights: backend.syncWeights.bind(backend),
      close: async () => undefined,
    };
    const s = await train(fakeLoop({ maxSteps: 10, saveSteps: 100 }), new RunDir(dir), { policy, backend: slow, executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems: FAKE_PROBLEMS }, { handleSignals: true });
    assert.equal(s.stoppedEarly, true);
    assert.equal(s.steps, 2);
    assert.equal(readTrainerState(latestCheckpoint(new RunDir(dir))!).step, 2);
    assert.equal(readMetrics(join(dir, 'metrics.jsonl')).length, 2);
    assert.equal(process.listenerCount('SIGINT'), 0);
  });

  it('refuses to start over an existing run and to resume without a checkpoint', async () => {
    const dir = join(root, 'plain');
    await assert.rejects(run(dir, fakeLoop()), /already holds a run/);
    await assert.rejects(run(join(root, 'empty'), fakeLoop(), { resume: true }), /nothing to resume/);
  });

  it('GRPO uses one turn; compute-matched GRPO measures G from MURPHY trees', async () => {
    const g = await run(join(root, 'grpo'), fakeLoop({ maxSteps: 2, algo: 'grpo' }));
    assert.ok(g.summary.metrics.every((m) => m.passAt1PerTurn.length === 1 && m.nodesPerTree === 4));
    const cm = await run(join(root, 'grpo-cm'), fakeLoop({ maxSteps: 2, algo: 'grpo', computeMatched: true }));
    const st = readTrainerState(latestCheckpoint(new RunDir(join(root, 'grpo-cm')))!);
    assert.ok(st.groupSize > 4, `compute-matched G ${st.groupSize}`);
    assert.ok(cm.summary.metrics.every((m) => m.nodesPerTree === st.groupSize));
    const text = readFileSync(join(root, 'grpo-cm', 'metrics.jsonl'), 'utf8');
    assert.equal(text.trim().split('\n').length, 2);
  });
});
