// Checkpoints of a run: RUN/checkpoints/step-N/ (policy + fp32 master weights + optimizer
// state + state.json + the configuration + a manifest of sizes and hashes, written last),
// verification and the choice of the checkpoint to resume from, the `latest` pointer,
// rotation, and the KL reference of beta > 0 runs.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { readSafetensorsF32, safetensorsF32Chunks, tensorMismatch } from '../safetensors.js';
import { TrainError } from './error.js';
import { MANIFEST_FILE, ManifestWriter, manifestFault } from './manifest.js';
import type { Policy, PolicyEngineInfo } from './policy.js';
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
  /** The engine the policy trained on, when the policy says (Policy.engineInfo); absent in older checkpoints. */
  engine?: PolicyEngineInfo;
}

const STATE_FILE = 'state.json';
const CONFIG_FILE = 'config.json';
const LATEST = 'latest';
const STEP_DIR = /^step-\d+$/;

/** The checkpoint named by checkpoints/latest, if it has a state.json, or null (no verification: see findResumeCheckpoint). */
export function latestCheckpoint(run: RunDir): string | null {
  const p = join(run.checkpointsDir, LATEST);
  if (!existsSync(p)) return null;
  const name = readFileSync(p, 'utf8').trim();
  const dir = join(run.checkpointsDir, name);
  return existsSync(join(dir, STATE_FILE)) ? dir : null;
}

/** Reads a JSON file; a missing or malformed file is a TrainError naming it. */
export function readJsonFile(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new TrainError(`cannot read ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new TrainError(`${what} ${path} is not valid JSON (${(e as Error).message}); the file is damaged`);
  }
}

export function readTrainerState(dir: string): TrainerState {
  const path = join(dir, STATE_FILE);
  const s = readJsonFile(path, 'checkpoint state') as TrainerState;
  if (s === null || typeof s !== 'object') throw new TrainError(`checkpoint state ${path} is not a JSON object`);
  if (s.version !== 1) throw new TrainError(`checkpoint state ${path}: unsupported state version ${String(s.version)}`);
  for (const k of ['step', 'problemsConsumed', 'seed', 'groupSize', 'followUpGroupSize', 'metricsBytes', 'treesBytes'] as const) {
    if (!Number.isSafeInteger(s[k]) || s[k] < 0) throw new TrainError(`checkpoint state ${path}: "${k}" is ${JSON.stringify(s[k])}, expected an integer >= 0`);
  }
  const e = s.engine;
  if (e !== undefined && (e === null || typeof e !== 'object' || typeof e.device !== 'string' || typeof e.storage !== 'string')) {
    throw new TrainError(`checkpoint state ${path}: "engine" is ${JSON.stringify(e)}, expected {"device", "storage"}`);
  }
  return s;
}

/** The configuration saved with a checkpoint (checkpoints written before config.json was saved with them: null). */
export function readCheckpointConfig(dir: string): Record<string, unknown> | null {
  const p = join(dir, CONFIG_FILE);
  return existsSync(p) ? (readJsonFile(p, 'checkpoint config') as Record<string, unknown>) : null;
}

/** Step directories of a run, newest first. */
export function checkpointDirs(run: RunDir): string[] {
  if (!existsSync(run.checkpointsDir)) return [];
  return readdirSync(run.checkpointsDir).filter((n) => STEP_DIR.test(n)).sort().reverse().map((n) => join(run.checkpointsDir, n));
}

/**
 * Why a checkpoint cannot be trusted, or null: every file matches the manifest (size and,
 * with `hashes`, the default, its hash), and state.json is well formed. A checkpoint without a
 * manifest (written by murphy-native before manifests) is accepted on its state.json alone;
 * its tensor files are still checked against the model when loaded.
 */
export async function checkpointFault(dir: string, opts: { hashes?: boolean } = {}): Promise<string | null> {
  if (existsSync(join(dir, MANIFEST_FILE)) || !existsSync(join(dir, STATE_FILE))) {
    const f = await manifestFault(dir, opts);
    if (f) return f;
  }
  try {
    readTrainerState(dir);
    readCheckpointConfig(dir);
  } catch (e) {
    return (e as Error).message;
  }
  return null;
}

export interface ResumePoint {
  /** The newest checkpoint that verifies. */
  dir: string;
  state: TrainerState;
  /** Newer checkpoints that did not verify, newest first, with the reason. */
  skipped: { dir: string; fault: string }[];
}

/** The newest checkpoint of the run that verifies (sizes and hashes); a TrainError listing the faults when none does. */
export async function findResumeCheckpoint(run: RunDir): Promise<ResumePoint> {
  const skipped: ResumePoint['skipped'] = [];
  for (const dir of checkpointDirs(run)) {
    const fault = await checkpointFault(dir);
    if (fault === null) return { dir, state: readTrainerState(dir), skipped };
    skipped.push({ dir, fault });
  }
  if (skipped.length === 0) throw new TrainError(`nothing to resume in ${run.root}: no checkpoint under ${run.checkpointsDir}`);
  throw new TrainError(`nothing to resume in ${run.root}: no checkpoint verifies (${skipped.map((s) => `${basename(s.dir)}: ${s.fault}`).join('; ')})`);
}

/**
 * Chooses the checkpoint to resume from: the newest that verifies. Newer ones that do not are
 * set aside (renamed step-N.damaged), and `log` says which, why, and where the run resumes.
 */
export async function resolveResume(run: RunDir, log: (line: string) => void): Promise<ResumePoint> {
  const point = await findResumeCheckpoint(run);
  if (point.skipped.length) {
    const moved = setAsideDamaged(run, point.skipped);
    for (const [i, s] of point.skipped.entries()) log(`checkpoint ${basename(s.dir)} is damaged: ${s.fault}; set aside as ${basename(moved[i]!)}`);
    log(`resuming from ${basename(point.dir)}, the newest checkpoint that verifies`);
  }
  return point;
}

/** Renames damaged checkpoints to step-N.damaged so rotation and later resumes pass them by; returns the new paths. */
export function setAsideDamaged(run: RunDir, skipped: ResumePoint['skipped']): string[] {
  const out: string[] = [];
  for (const s of skipped) {
    const to = `${s.dir}.damaged`;
    rmSync(to, { recursive: true, force: true });
    renameSync(s.dir, to);
    out.push(to);
  }
  if (out.length) writeFileAtomic(join(run.checkpointsDir, LATEST), '');
  return out;
}

/**
 * Writes checkpoint step-N: policy state, state.json and the configuration in effect into a
 * temporary directory, then the manifest (last), then renames it into place. Files are hashed
 * as they are written (ManifestWriter; the native save's Hugging Face weights through
 * record()); only the small files the policy writes by other means (config.json, tokenizer
 * files) are read back for their hash. Older
 * checkpoints beyond `keep` are removed only once the new one verifies (sizes against its
 * manifest), so rotation never removes the last checkpoint that verifies.
 */
export async function writeCheckpoint(run: RunDir, policy: Policy, state: TrainerState, keep: number, config?: object): Promise<string> {
  const dir = run.checkpointDir(state.step);
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const files = new ManifestWriter(tmp);
    const info = await policy.saveState(tmp, files);
    const engine = policy.engineInfo?.();
    const st: TrainerState = { ...state, optimizerState: info.optimizerState, ...(engine ? { engine } : {}) };
    await files.writeFile(STATE_FILE, JSON.stringify(st, null, 2) + '\n');
    if (config) await files.writeFile(CONFIG_FILE, JSON.stringify(config, null, 2) + '\n');
    await files.finish();
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  const fault = await checkpointFault(dir, { hashes: false });
  if (fault) throw new TrainError(`checkpoint ${dir} does not verify right after writing (${fault}); older checkpoints were kept`);
  const name = basename(dir);
  writeFileAtomic(join(run.checkpointsDir, LATEST), name + '\n');
  const all = checkpointDirs(run).map((d) => basename(d));
  for (const n of all.slice(Math.max(1, keep))) if (n !== name) rmSync(join(run.checkpointsDir, n), { recursive: true, force: true });
  return dir;
}

const REFERENCE = 'reference.safetensors';

export function saveReference(run: RunDir, policy: Policy): void {
  const t: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const p of policy.params()) t[p.name] = { shape: p.shape, data: policy.getParam(p.name) };
  writeFileAtomic(join(run.root, REFERENCE), safetensorsF32Chunks(t, { kind: 'KL reference (initial policy)' }));
}

/** beta > 0 on resume: the reference is the initial policy, saved at the start of the run. */
export async function restoreReference(run: RunDir, policy: Policy, ck: string): Promise<void> {
  const p = join(run.root, REFERENCE);
  if (!existsSync(p)) throw new TrainError(`${p} is missing: cannot restore the KL reference`);
  const setter = policy as Policy & { setParam?: (name: string, v: Float32Array) => void };
  if (typeof setter.setParam !== 'function') throw new TrainError('the policy cannot set parameters; cannot restore the KL reference');
  const { tensors } = readSafetensorsF32(p);
  const bad = tensorMismatch(tensors, policy.params());
  if (bad) throw new TrainError(`${p}: ${bad}`);
  for (const [n, t] of Object.entries(tensors)) setter.setParam(n, t.data);
  policy.makeReference();
  await policy.loadState(ck);
}
