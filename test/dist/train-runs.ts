// Helpers of the data-parallel training tests: the CLI as a child process (one kernel thread,
// a free MASTER_PORT), a run's metrics and checkpointed fp32 weights, and the comparison of two
// runs: every figure of metrics.jsonl equal except time and the float figures named (within a
// relative tolerance), and the weights of the last checkpoint within an absolute tolerance.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readSafetensorsF32 } from '../../lib/safetensors.js';
import { cli } from '../helpers/cli.js';

/** `murphy-native train ARGS` in a child process; its exit code and output. */
export function runTrain(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, cli('train', ...args), { env: { ...process.env, MURPHY_NUM_THREADS: '1', MASTER_PORT: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr.on('data', (d: Buffer) => (out += d.toString()));
    c.on('exit', (code) => resolve({ code, out }));
  });
}

export const metrics = (dir: string): Record<string, unknown>[] => readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
export const weights = (ck: string) => readSafetensorsF32(join(ck, 'master.safetensors')).tensors;

export interface SameRunTolerance {
  /** Float figures compared within `rel` (relative, at least 1 absolute unit of it); all others must be equal. */
  close: string[];
  rel: number;
  /** Bound on |w_a - w_b| over the weights of the checkpoint `step`. */
  weights: number;
  step: number;
}

/** Runs a and b trained alike (see SameRunTolerance); returns the largest weight difference. */
export function assertSameRun(a: string, b: string, t: SameRunTolerance): number {
  const ma = metrics(a), mb = metrics(b);
  assert.equal(ma.length, mb.length);
  ma.forEach((x, i) => {
    const y = mb[i]!;
    const strip = (m: Record<string, unknown>) => Object.fromEntries(Object.entries(m).filter(([k]) => k !== 'time' && !t.close.includes(k)));
    assert.deepEqual(strip(y), strip(x), `step ${i + 1}`);
    for (const k of t.close) {
      const p = x[k] as number, q = y[k] as number;
      assert.ok(Math.abs(p - q) <= t.rel * Math.max(1, Math.abs(p)), `step ${i + 1} ${k}: ${p} vs ${q}`);
    }
  });
  const ck = `checkpoints/step-${String(t.step).padStart(6, '0')}`;
  const wa = weights(join(a, ck)), wb = weights(join(b, ck));
  let worst = 0;
  for (const [n, w] of Object.entries(wa)) for (let i = 0; i < w.data.length; i++) worst = Math.max(worst, Math.abs(w.data[i]! - wb[n]!.data[i]!));
  assert.ok(worst <= t.weights, `max |w1 - w2| = ${worst}`);
  return worst;
}
