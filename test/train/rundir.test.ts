// The run directory (issue 10 items 2 and 3): an exclusive lock taken before anything is
// written, stale-lock takeover, resume refusing a config that differs from the checkpoint's,
// and a run stopped before its first checkpoint leaving nothing behind.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { configDifferences, engineChangeNote, engineRunNote, resumeConfig, runTraining } from '../../lib/commands/run-training.js';
import { defaultConfig, type TrainConfig } from '../../lib/config/index.js';
import { FakeExecutor, FakePromptBuilder } from '../../lib/murphy/index.js';
import { LOCK_FILE, RunLock } from '../../lib/train/lock.js';
import { writeManifest } from '../../lib/train/manifest.js';
import { train } from '../../lib/train/loop.js';
import { silentProgress, type ProgressSink } from '../../lib/train/progress.js';
import { RunDir } from '../../lib/train/rundir.js';
import { exitCodeForSignal, InterruptedError } from '../../lib/train/signals.js';
import { shortDemo } from './configs.js';
import { FakeBackend, FakePolicy } from './fakes.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-rundir-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** A progress sink that sends this process SIGINT when `phase` starts, and shows nothing. */
function sigintWhenStarting(phase: string): ProgressSink {
  return { ...silentProgress, start: (p) => { if (p === phase) process.emit('SIGINT', 'SIGINT'); } };
}

/** The pid of a process that has exited (a stale lock's owner). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

describe('run directory lock', () => {
  it('a second lock on the same directory is refused, naming the holder; after release it can be taken again', () => {
    const dir = join(root, 'lock');
    const a = RunLock.acquire(dir);
    assert.throws(() => RunLock.acquire(dir), new RegExp(`in use by another train process \\(pid ${process.pid} on ${hostname()}`));
    a.release();
    assert.equal(existsSync(join(dir, LOCK_FILE)), false);
    RunLock.acquire(dir).release();
  });

  it('a lock left by a process that is gone is taken over, saying so', () => {
    const dir = join(root, 'stale');
    mkdirSync(dir, { recursive: true });
    const pid = deadPid();
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid, host: hostname(), startedAt: '2026-01-01T00:00:00Z' }));
    const lines: string[] = [];
    const l = RunLock.acquire(dir, (s) => lines.push(s));
    assert.match(lines.join('\n'), new RegExp(`took over the stale lock .*pid ${pid} is gone`));
    l.release();
  });

  it('a lock with this process\'s pid that this process does not hold (an earlier process with the same pid) is stale', () => {
    const dir = join(root, 'same-pid');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.pid, host: hostname(), startedAt: '2026-01-01T00:00:00Z' }));
    const lines: string[] = [];
    RunLock.acquire(dir, (s) => lines.push(s)).release();
    assert.match(lines.join('\n'), /took over the stale lock/);
  });

  it('a lock from another host is reported with its host and how to clear it', () => {
    const dir = join(root, 'foreign');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: 1, host: 'elsewhere.example', startedAt: '2026-01-01T00:00:00Z' }));
    assert.throws(() => RunLock.acquire(dir), /locked by pid 1 on host elsewhere\.example .* delete .*\.lock/);
  });

  it('train into a locked run directory is refused before anything is written', async () => {
    const out = join(root, 'busy');
    const held = RunLock.acquire(out);
    try {
      await assert.rejects(runTraining(shortDemo({ out }), { handleSignals: false, report: false }), /in use by another train process/);
      assert.deepEqual(readdirSync(out), [LOCK_FILE]);
    } finally {
      held.release();
    }
  });
});

describe('resume and the checkpoint configuration', () => {
  const problems = Array.from({ length: 6 }, (_, i) => ({ id: `p${i}` }));
  const fakeRun = async (dir: string, c: TrainConfig): Promise<void> => {
    const policy = new FakePolicy();
    writeFileSync(join(dir, 'config.json'), JSON.stringify(c, null, 2));
    await train(c, new RunDir(dir), { policy, backend: new FakeBackend(policy), executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems }, { handleSignals: false });
  };

  it('configDifferences ignores the resumable keys and out', () => {
    const a = { seed: 1, learningRate: 0.1, maxSteps: 5, out: 'x' };
    assert.deepEqual(configDifferences(a, { ...a, maxSteps: 9, out: 'y' }), []);
    assert.deepEqual(configDifferences(a, { ...a, seed: 2, learningRate: 0.2 }), ['learningRate', 'seed']);
  });

  it('refuses to resume when RUN/config.json differs from the checkpoint\'s, listing the keys, unless --override-config', async () => {
    const dir = join(root, 'mismatch');
    mkdirSync(dir, { recursive: true });
    const c = { ...defaultConfig(), out: dir, maxSteps: 2, saveSteps: 2, batchSize: 2, numGenerations: 2 };
    await fakeRun(dir, c);
    // what a second run used to do: overwrite config.json with its own seed and learning rate
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...c, seed: 7, learningRate: 0.5 }, null, 2));
    const cfg = resumeConfig(dir, {});
    await assert.rejects(runTraining(cfg, { resume: dir, handleSignals: false, report: false }), /differs from the configuration saved with checkpoint .*step-000002 in "learningRate" \(0\.5 vs [\d.e-]+\), "seed" \(7 vs 0\).*--override-config/);
    // with the override the check passes (the fake checkpoint then cannot be loaded as a native model)
    await assert.rejects(runTraining(cfg, { resume: dir, handleSignals: false, report: false, overrideConfig: true }), (e: Error) => !/differs from the configuration/.test(e.message));
    assert.equal(existsSync(join(dir, LOCK_FILE)), false);
  });

  it('device and gradientCheckpointing may differ from the checkpoint\'s: the resume says which and that another device is not bit-exact', async () => {
    const a = { seed: 1, device: 'cpu', gradientCheckpointing: null };
    assert.deepEqual(configDifferences(a, { ...a, device: 'auto', gradientCheckpointing: true }), []);
    assert.equal(engineChangeNote(a, a), null);
    assert.match(engineChangeNote({ ...a, gradientCheckpointing: true }, a)!, /"gradientCheckpointing" null -> true \(checkpoint -> now\).*bit-identical/);
    // the engine recorded in the checkpoint's state.json against the one built now (auto may pick another)
    assert.equal(engineRunNote(undefined, { device: 'cuda', storage: 'bf16' }), null);
    assert.equal(engineRunNote({ device: 'cpu', storage: 'f32' }, { device: 'cpu', storage: 'f32' }), null);
    assert.equal(engineRunNote({ device: 'cpu', storage: 'f32' }, { device: 'cuda', storage: 'bf16' }),
      'the checkpoint was trained on the cpu engine, this run uses the cuda engine: the same training continues, but not bit-exact: another device rounds floats differently');
    const dir = join(root, 'engine-keys');
    mkdirSync(dir, { recursive: true });
    const c = { ...defaultConfig(), out: dir, maxSteps: 2, saveSteps: 2, batchSize: 2, numGenerations: 2, device: 'cpu' as const };
    await fakeRun(dir, c);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...c, device: 'auto', gradientCheckpointing: true }, null, 2));
    const lines: string[] = [];
    // not refused (the fake checkpoint then cannot be loaded as a native model: a later error)
    await assert.rejects(runTraining(resumeConfig(dir, {}), { resume: dir, handleSignals: false, report: false, log: (l) => lines.push(l) }), (e: Error) => !/differs from the configuration/.test(e.message));
    assert.ok(lines.some((l) => l.includes('"device" "cpu" -> "auto", "gradientCheckpointing" null -> true') && /not bit-exact: another device rounds floats differently/.test(l)), lines.join('\n'));
    // a key that changes the math is still refused
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...c, device: 'auto', learningRate: 0.5 }, null, 2));
    await assert.rejects(runTraining(resumeConfig(dir, {}), { resume: dir, handleSignals: false, report: false }), /differs from the configuration saved with checkpoint .*step-000002 in "learningRate" \(0\.5 vs [\d.e-]+\); /);
  });
  it('a checkpoint saved before a config key existed resumes with the key\'s default, saying so; a value that differs is still refused', async () => {
    const dir = join(root, 'pre-key');
    mkdirSync(dir, { recursive: true });
    const c = { ...defaultConfig(), out: dir, maxSteps: 2, saveSteps: 2, batchSize: 2, numGenerations: 2 };
    await fakeRun(dir, c);
    // what a run of an older version wrote: neither its config.json nor the checkpoint's has minP or kvCacheFraction
    const older = (o: Record<string, unknown>): string => {
      const { minP: _m, kvCacheFraction: _k, ...rest } = o;
      return JSON.stringify(rest, null, 2);
    };
    const ck = join(dir, 'checkpoints', 'step-000002');
    writeFileSync(join(ck, 'config.json'), older(JSON.parse(readFileSync(join(ck, 'config.json'), 'utf8')) as Record<string, unknown>));
    await writeManifest(ck);
    writeFileSync(join(dir, 'config.json'), older(c));
    const cfg = resumeConfig(dir, {});
    assert.equal(cfg.minP, 0);
    assert.equal(cfg.kvCacheFraction, 0.9);
    const lines: string[] = [];
    // not refused (the fake checkpoint then cannot be loaded as a native model: a later error)
    await assert.rejects(runTraining(cfg, { resume: dir, handleSignals: false, report: false, log: (l) => lines.push(l) }), (e: Error) => !/differs from the configuration/.test(e.message));
    assert.deepEqual(lines.filter((l) => /predates/.test(l)), ['the run\'s saved configuration predates config keys "kvCacheFraction", "minP": resuming with their defaults (kvCacheFraction 0.9, minP 0)']);
    // a key both files have and whose value differs is refused as before
    writeFileSync(join(dir, 'config.json'), older({ ...c, learningRate: 0.5 }));
    await assert.rejects(runTraining(resumeConfig(dir, {}), { resume: dir, handleSignals: false, report: false }), /differs from the configuration saved with checkpoint .*step-000002 in "learningRate" \(0\.5 vs [\d.e-]+\); /);
    // and a flag may not set a key the old run lacked to another value than its default
    assert.throws(() => resumeConfig(dir, { minP: 0.1 }), /config key "minP" cannot change on resume \(run has 0, got 0\.1\)/);
  });
  it('a run without evaluations (evalProblems 0, set from code) resumes', async () => {
    const out = join(root, 'no-eval');
    const first = await runTraining(shortDemo({ out, evalProblems: 0, maxSteps: 1, saveSteps: 1, sftSteps: 0 }), { handleSignals: false, report: false });
    assert.deepEqual(first.evals, []);
    const cfg = resumeConfig(out, { maxSteps: 2 });
    assert.equal(cfg.evalProblems, 0);
    const r = await runTraining(cfg, { resume: out, handleSignals: false });
    assert.equal(r.summary.steps, 2);
    assert.deepEqual(r.evals, []);
    assert.ok(r.reportPath && existsSync(r.reportPath));
    // a value the schema refuses, set from code, is refused before anything is written (the run could not resume)
    const bad = join(root, 'bad-from-code');
    await assert.rejects(runTraining(shortDemo({ out: bad, evalIterations: 0 }), { handleSignals: false, report: false }),
      /^ConfigError: config key "evalIterations" \(--eval-iterations\) in the configuration of runTraining: must be an integer >= 1 and <= 10; got 0$/);
    assert.equal(existsSync(bad), false);
  });
});

describe('a run stopped before its first checkpoint', () => {
  it('--temperature 0 is refused before the run directory exists', async () => {
    const out = join(root, 'temp0');
    await assert.rejects(runTraining(shortDemo({ out, temperature: 0 }), { handleSignals: false, report: false }), /"temperature" \(--temperature\) is 0/);
    assert.equal(existsSync(out), false);
  });

  it('SIGINT during the warm-up: InterruptedError (exit 130) and no half-made run directory', async () => {
    const out = join(root, 'sigint-warmup');
    const progress = sigintWhenStarting('warm-up');
    await assert.rejects(runTraining(shortDemo({ out, sftSteps: 50 }), { progress, report: false }), (e: Error) => e instanceof InterruptedError && e.exitCode === 130 && /SIGINT during the supervised warm-up/.test(e.message));
    assert.equal(existsSync(out), false);
    // into a directory that already held something of the user's: only what the run wrote goes
    mkdirSync(out);
    writeFileSync(join(out, 'notes.txt'), 'mine');
    await assert.rejects(runTraining(shortDemo({ out, sftSteps: 50 }), { progress, report: false }), InterruptedError);
    assert.deepEqual(readdirSync(out), ['notes.txt']);
    // and the directory can be used for a run afterwards
    const r = await runTraining(shortDemo({ out, maxSteps: 1 }), { handleSignals: false, report: false });
    assert.equal(r.summary.steps, 1);
  });

  it('SIGINT during training: a checkpoint is written and the summary names the signal', async () => {
    const out = join(root, 'sigint-train');
    const progress = sigintWhenStarting('training');
    const r = await runTraining(shortDemo({ out, maxSteps: 5, saveSteps: 10 }), { progress, report: false });
    assert.equal(r.summary.signal, 'SIGINT');
    assert.equal(exitCodeForSignal('SIGINT'), 130);
    assert.equal(exitCodeForSignal('SIGTERM'), 143);
    // a fresh run into it is refused: it holds a checkpoint even though no metrics line was kept
    rmSync(join(out, 'metrics.jsonl'), { force: true });
    await assert.rejects(runTraining(shortDemo({ out }), { handleSignals: false, report: false }), /already holds a run; use --resume/);
    assert.equal(r.summary.steps, 1);
    assert.ok(existsSync(join(out, 'checkpoints', 'step-000001', 'manifest.json')));
    assert.equal(existsSync(join(out, LOCK_FILE)), false);
  });
});
