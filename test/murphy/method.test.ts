// Method settings that reach the loop (issue 12 item 10): IntraP needs m >= 2; InterP's
// zero-variance drop is a config key; the loss denominators with beta = 0 (trained samples, or
// every completion as TRL).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ConfigError, defaultConfig, resolveConfig, type TrainConfig } from '../../lib/config/index.js';
import { FakeExecutor, FakePromptBuilder, intraPrune, marsCredit } from '../../lib/murphy/index.js';
import { processConfig, train } from '../../lib/train/loop.js';
import type { StepMetrics } from '../../lib/train/metrics.js';
import type { AdamWHyper, LossOptions, OptimizerResult, TrainBatch, TrainStats } from '../../lib/train/policy.js';
import { readMetrics, RunDir } from '../../lib/train/rundir.js';
import { FakeBackend, FakePolicy } from '../train/fakes.js';
import { handTree } from './helpers.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-method-'));
after(() => rmSync(root, { recursive: true, force: true }));

describe('method settings', () => {
  it('IntraP with m < 2 is refused, in the config and in intraPrune (a group of one has advantage 0)', () => {
    assert.throws(() => resolveConfig({ flags: { intraKeep: 1 } }), (e: unknown) => e instanceof ConfigError && /"intraKeep" \(--intra-keep\).*>= 2/.test(e.message));
    assert.equal(resolveConfig({ flags: { intraKeep: 2 } }).intraKeep, 2);
    const t = marsCredit(handTree(1, [1, 0, 0.5]));
    assert.throws(() => intraPrune([t], { keep: 1 }), /IntraP keep \(m\) must be an integer >= 2, got 1 \(one sample per group has advantage 0/);
  });

  it('InterP dropZeroVariance is reachable from the training config, alone or with interKeep', () => {
    const base = defaultConfig();
    assert.equal(processConfig(base).interP, null);
    assert.deepEqual(processConfig({ ...base, interDropZeroVariance: true }).interP, { perProblem: undefined, dropZeroVariance: true });
    assert.deepEqual(processConfig({ ...base, interKeep: 2 }).interP, { perProblem: 2, dropZeroVariance: false });
    assert.equal(resolveConfig({ flags: { interDropZeroVariance: true } }).interDropZeroVariance, true);
  });

  /** FakePolicy recording the sum of the micro-batch loss scales of each optimizer step. */
  class ScalePolicy extends FakePolicy {
    sums: number[] = [];
    private sum = 0;
    override async accumulate(b: TrainBatch, loss: LossOptions, scale: number): Promise<TrainStats> {
      this.sum += scale;
      return super.accumulate(b, loss, scale);
    }
    override async optimizerStep(h: AdamWHyper): Promise<OptimizerResult> {
      this.sums.push(this.sum);
      this.sum = 0;
      return super.optimizerStep(h);
    }
  }

  for (const lossType of ['dapo', 'grpo'] as const) {
    it(`beta = 0, ${lossType}: 'trained' normalises over the samples run, 'all' over every completion (TRL)`, async () => {
      const problems = Array.from({ length: 8 }, (_, i) => ({ id: `p${i}` }));
      const runWith = async (lossDenominator: TrainConfig['lossDenominator']) => {
        const c: TrainConfig = { ...defaultConfig(), maxSteps: 4, saveSteps: 10, batchSize: 4, numGenerations: 4, learningRate: 0.05, beta: 0, lossType, lossDenominator };
        const policy = new ScalePolicy();
        const dir = join(root, `${lossType}-${lossDenominator}`);
        await train(c, new RunDir(dir), { policy, backend: new FakeBackend(policy), executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems }, { handleSignals: false });
        return { sums: policy.sums, metrics: readMetrics(join(dir, 'metrics.jsonl')) as unknown as StepMetrics[] };
      };
      const trained = await runWith('trained');
      assert.ok(trained.sums.length > 0);
      for (const s of trained.sums) assert.ok(Math.abs(s - 1) < 1e-12, `scales sum to ${s}`);
      const all = await runWith('all');
      // the first step is identical in both runs (same weights, same trees)
      const m = all.metrics[0]!;
      assert.ok(m.samplesTrained < m.samples, 'the test needs zero-advantage samples');
      const want = lossType === 'grpo' ? m.samplesTrained / m.samples : undefined;
      if (want !== undefined) assert.ok(Math.abs(all.sums[0]! - want) < 1e-12, `${all.sums[0]} vs ${want}`);
      else assert.ok(all.sums[0]! < 1 && all.sums[0]! > 0);
      assert.equal(trained.metrics[0]!.samplesTrained, m.samplesTrained);
    });
  }
});
