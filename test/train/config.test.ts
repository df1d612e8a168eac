// The run configuration: defaults < file (JSON or YAML) < flags, kebab-case flags, errors
// that name the key and the allowed values, demo defaults, resume overrides.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import yargs from 'yargs';
import { CONFIG_KEYS, configOptions, configTableMarkdown, defaultConfig, DEMO_DEFAULTS, flagsFromArgv, kebab, resolveConfig, SCHEMA, type TrainConfig } from '../../lib/config/index.js';
import { resumeConfig } from '../../lib/commands/run-training.js';
import { lossOptions } from '../../lib/train/loop.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-config-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('config', () => {
  it('resolves to the documented defaults (written out here, independently of the schema), each with a doc line', () => {
    // docs/training.md's table; TRL's GRPOConfig values where the key exists there
    const expected: TrainConfig = {
      out: null, seed: 0, maxSteps: 40, saveSteps: 20, logTrees: true, device: 'auto', distBackend: 'auto', reduceBucketMb: 32, reduceOverlap: true, storage: 'bf16', earlyStopWindow: 0, earlyStopMinSignal: 0.02,
      model: '/m', modelPreset: 'tiny', bf16Generate: false, bf16Forward: false, keepLogitsMb: 1024,
      dataset: '/d.jsonl', datasetFormat: 'auto', datasetLimit: null, task: 'repair',
      backend: 'embedded', serverUrl: null, servedModelName: null, vllmApiKey: null, weightSync: 'auto', weightSyncBucketMb: 512, weightSyncTimeoutS: 300, kvCacheFraction: 0.9, kvCacheBlocks: null, temperature: 1, topP: 1, topK: 0, minP: 0,
      maxCompletionLength: 48, executorWorkers: null, testTimeout: 3, timeoutMode: 'test', executor: 'local', sandboxUrl: null,
      algo: 'murphy', computeMatched: false, batchSize: 8, numGenerations: 4, numFollowUpGenerations: null, maxTurns: 2,
      credit: 'mars', gamma: 1, scaleRewards: 'group', rewardMode: 'fraction', intraKeep: null, interKeep: null, interDropZeroVariance: false, history: 'full',
      lossType: 'dapo', lossDenominator: 'trained', beta: 0, epsilon: 0.2, epsilonHigh: null,
      learningRate: 2e-3, lrSchedulerType: 'constant', warmupSteps: 0, minLrRatio: 0, weightDecay: 0, maxGradNorm: 1,
      adamBeta1: 0.9, adamBeta2: 0.999, microBatchTokens: 8192, gradientCheckpointing: null,
      evalIterations: 2, evalProblems: 64, evalSteps: 0, evalTemperature: 0, evalSamples: 1,
      sftSteps: 30, sftLearningRate: 3e-3,
    };
    const c = resolveConfig({ flags: { model: '/m', dataset: '/d.jsonl' } });
    for (const k of CONFIG_KEYS) {
      assert.ok(SCHEMA[k].doc.length > 10, k);
      assert.ok(k in expected, `key ${k} has an expected default here`);
    }
    assert.deepEqual(c, expected);
    assert.deepEqual({ ...defaultConfig(), model: '/m', dataset: '/d.jsonl' }, expected);
    assert.match(configTableMarkdown(), /`--num-generations`/);
  });

  it('flags are kebab-case over camelCase keys and override the file; files take camelCase or snake_case', () => {
    const f = join(work, 'c.json');
    writeFileSync(f, JSON.stringify({ num_generations: 6, lossType: 'grpo', beta: 0.04, model: '/m' }));
    const argv = yargs(['--num-generations', '3', '--learning-rate', '1e-5', '--algo', 'grpo']).options(configOptions()).parseSync() as Record<string, unknown>;
    const c = resolveConfig({ file: f, flags: flagsFromArgv(argv) });
    assert.equal(c.numGenerations, 3);
    assert.equal(c.lossType, 'grpo');
    assert.equal(c.beta, 0.04);
    assert.equal(c.learningRate, 1e-5);
    assert.equal(c.algo, 'grpo');
    assert.equal(kebab('maxCompletionLength'), 'max-completion-length');
  });

  it('reads YAML', () => {
    const f = join(work, 'c.yaml');
    writeFileSync(f, 'numGenerations: 5\nscale_rewards: batch\nintraKeep: 3\nmodel: /m\n');
    const c = resolveConfig({ file: f });
    assert.equal(c.numGenerations, 5);
    assert.equal(c.scaleRewards, 'batch');
    assert.equal(c.intraKeep, 3);
  });

  it('errors name the key, the flag and the allowed values', () => {
    assert.throws(() => resolveConfig({ flags: { scaleRewards: 'std' } }), /config key "scaleRewards" \(--scale-rewards\) in command-line flags: must be one of group, batch, none; got "std"/);
    assert.throws(() => resolveConfig({ flags: { epsilon: 0 } }), /"epsilon" \(--epsilon\).*must be a number > 0 and < 1; got 0/);
    assert.throws(() => resolveConfig({ flags: { batchSize: 2.5 } }), /"batchSize".*an integer >= 1/);
    const f = join(work, 'bad.json');
    writeFileSync(f, JSON.stringify({ numGeneration: 4 }));
    assert.throws(() => resolveConfig({ file: f }), /unknown config key "numGeneration" in .*bad\.json \(did you mean "numGenerations"\?\)/);
    writeFileSync(f, '[1, 2]');
    assert.throws(() => resolveConfig({ file: f }), /must be a mapping/);
    assert.throws(() => resolveConfig({ file: join(work, 'nope.yaml') }), /cannot read configuration file/);
    assert.throws(() => resolveConfig({ flags: { backend: 'vllm', model: '/m' } }), /"serverUrl" \(--server-url\) is required with backend "vllm"/);
    assert.throws(() => resolveConfig({ flags: { computeMatched: true } }), /applies to algo "grpo" only/);
    assert.throws(() => resolveConfig({ flags: { epsilon: 0.3, epsilonHigh: 0.2 } }), /"epsilonHigh".*>= epsilon/);
  });

  it('keepLogitsMb: a flag, refused out of range, and handed to the engine with the loss options', () => {
    const c = resolveConfig({ flags: flagsFromArgv(yargs(['--keep-logits-mb', '0']).options(configOptions()).parseSync()) });
    assert.equal(c.keepLogitsMb, 0);
    assert.equal(lossOptions(c).keepLogitsMb, 0);
    assert.equal(lossOptions(defaultConfig()).keepLogitsMb, 1024);
    assert.throws(() => resolveConfig({ flags: { keepLogitsMb: -1 } }), /"keepLogitsMb" \(--keep-logits-mb\).*an integer >= 0/);
    // memory, not math: a resume may change it
    const run = join(work, 'keep-run');
    mkdirSync(run, { recursive: true });
    writeFileSync(join(run, 'config.json'), JSON.stringify({ ...defaultConfig(), out: run }));
    assert.equal(resumeConfig(run, { keepLogitsMb: 0 }).keepLogitsMb, 0);
  });

  it('the demo (no model, no dataset) takes the demo defaults for keys nobody set', () => {
    const c = resolveConfig({ flags: { maxSteps: 7 } });
    assert.equal(c.maxSteps, 7);
    assert.equal(c.learningRate, 3e-3);
    assert.equal(c.maxCompletionLength, 8);
    assert.equal(c.learningRate, DEMO_DEFAULTS.learningRate);
    const real = resolveConfig({ flags: { model: '/m' } });
    assert.equal(real.learningRate, 2e-3);
  });

  it('resume keeps the run configuration; only a few keys may change', () => {
    const dir = join(work, 'run');
    const c = resolveConfig({ flags: { maxSteps: 5, out: dir } });
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'config.json'), JSON.stringify(c));
    assert.equal(resumeConfig(dir, { maxSteps: 9 }).maxSteps, 9);
    assert.throws(() => resumeConfig(dir, { learningRate: 1 }), /"learningRate" cannot change on resume/);
    // where and how the same math runs may change; the rounding mode of the weights may not
    const moved = resumeConfig(dir, { device: 'cpu', gradientCheckpointing: true });
    assert.deepEqual([moved.device, moved.gradientCheckpointing], ['cpu', true]);
    assert.throws(() => resumeConfig(dir, { storage: 'f32' }), /"storage" cannot change on resume/);
    assert.throws(() => resumeConfig(join(work, 'none'), {}), /no config\.json/);
  });
});
