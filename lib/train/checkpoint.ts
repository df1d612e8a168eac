// Checkpoints of a run: RUN/checkpoints/step-N/ (policy + fp32 master weights + optimizer
// state + state.json), the `latest` pointer, rotation, and the KL reference of beta > 0 runs.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { decodeSafetensorsF32, encodeSafetensorsF32 } from '../safetensors.js';
import { TrainError } from './error.js';
import type { Policy } from './policy.js';
import { RunDir, writeFileAtomic } from './rundir.js';

/** What a checkpoint's state.json holds besides the policy. */
export interface TrainerState {
  version: 1;
  /** Completed optimizer steps. */
  step: number;
  /** Problems drawn so far (the data position; the order is a seeded permutation per epoch). */
  problemsConsumed: number;
  /** The run's seed: every other random stream is derived from (seed, step, ...). */
  seed: number;
  /** G actually used (differs from the config for compute-matched GRPO). */
  groupSize: number;
  followUpGroupSize: number;
  /** Byte sizes of metrics.jsonl and trees.jsonl.gz at this checkpoint. */
  metricsBytes: number;
  treesBytes: number;
  /** Whether the optimizer moments were saved (exact resume). */
  optimizerState: boolean;
}

const STATE_FILE = 'state.json';
const LATEST = 'latest';

/** The newest complete checkpoint of a run, or null. */
export function latestCheckpoint(run: RunDir): string | null {
  const p = join(run.checkpointsDir, LATEST);
  if (!existsSync(p)) return null;
  const name = readFileSync(p, 'utf8').trim();
  const dir = join(run.checkpointsDir, name);
  return existsSync(join(dir, STATE_FILE)) ? dir : null;
}

export function readTrainerState(dir: string): TrainerState {
  const s = JSON.parse(readFileSync(join(dir, STATE_FILE), 'utf8')) as TrainerState;
  if (s.version !== 1) throw new TrainError(`checkpoint ${dir}: unsupported state version ${String(s.version)}`);
  return s;
}


export async function writeCheckpoint(run: RunDir, policy: Policy, state: TrainerState, keep: number): Promise<string> {
  const dir = run.checkpointDir(state.step);
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const info = await policy.saveState(tmp);
    const st: TrainerState = { ...state, optimizerState: info.optimizerState };
    writeFileAtomic(join(tmp, STATE_FILE), JSON.stringify(st, null, 2) + '\n');
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  const name = dir.slice(run.checkpointsDir.length + 1);
  writeFileAtomic(join(run.checkpointsDir, LATEST), name + '\n');
  // prune old checkpoints
  const all = readdirSync(run.checkpointsDir).filter((n) => /^step-\d+$/.test(n)).sort();
  for (const n of all.slice(0, Math.max(0, all.length - keep))) if (n !== name) rmSync(join(run.checkpointsDir, n), { recursive: true, force: true });
  return dir;
}

const REFERENCE = 'reference.safetensors';

export function saveReference(run: RunDir, policy: Policy): void {
  const t: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const p of policy.params()) t[p.name] = { shape: p.shape, data: policy.getParam(p.name) };
  writeFileAtomic(join(run.root, REFERENCE), encodeSafetensorsF32(t, { kind: 'KL reference (initial policy)' }));
}

/** beta > 0 on resume: the reference is the initial policy, saved at the start of the run. */
export async function restoreReference(run: RunDir, policy: Policy, ck: string): Promise<void> {
  const p = join(run.root, REFERENCE);
  if (!existsSync(p)) throw new TrainError(`${p} is missing: cannot restore the KL reference`);
  const setter = policy as Policy & { setParam?: (name: string, v: Float32Array) => void };
  if (typeof setter.setParam !== 'function') throw new TrainError('the policy cannot set parameters; cannot restore the KL reference');
  const { tensors } = decodeSafetensorsF32(readFileSync(p));
  for (const [n, t] of Object.entries(tensors)) setter.setParam(n, t.data);
  policy.makeReference();
  await policy.loadState(ck);
}
