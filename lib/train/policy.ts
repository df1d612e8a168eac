// What the training loop needs from the policy, and its implementation over lib/model's
// native PolicyModel. Tests use a small TypeScript fake of the same interface.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type {
  AdamWHyper,
  LossOptions,
  OptimizerResult,
  PackedBatch,
  PolicyModel,
  TrainBatch,
  TrainStats,
} from '../model/index.js';
import type { PolicyWeights } from '../rollout/types.js';
import { readSafetensorsF32, safetensorsF32Chunks, tensorMismatch, type F32Tensors } from '../safetensors.js';
import { writeFileAtomic } from './rundir.js';

export type { AdamWHyper, LossOptions, OptimizerResult, PackedBatch, TrainBatch, TrainStats };

/** The trainable policy: gradient accumulation, optimizer step, scoring, and its full state. */
export interface Policy extends PolicyWeights {
  /**
   * Forward + loss + backward of one micro-batch; its gradient (times gradScale) adds into the
   * accumulated one. `last`: the last micro-batch this process trains before the step (data
   * parallelism may start the gradient reductions during its backward: lib/dist/zero.ts).
   */
  accumulate(batch: TrainBatch, loss: LossOptions, gradScale: number, opts?: { last?: boolean }): Promise<TrainStats>;
  /** Data parallelism: called by every rank after its micro-batches of a step, before the step (lib/dist/zero.ts). */
  reduceGradients?(): Promise<void>;
  /** AdamW on the accumulated gradients, then zeroes them. */
  optimizerStep(h: AdamWHyper): Promise<OptimizerResult>;
  /** Log-probs of every token (0 at each sequence's first token), no gradients. */
  score(batch: PackedBatch, opts?: { temperature?: number }): Promise<Float32Array>;
  /** Freezes the current weights as the KL reference. */
  makeReference(): void;
  /**
   * Writes everything a resume needs (Hugging Face weights, fp32 master weights, optimizer state)
   * under dir. `files` (a checkpoint's ManifestWriter for dir) writes a file and hashes its bytes
   * as they go, so the manifest need not read it back; files written otherwise are hashed later.
   */
  saveState(dir: string, files?: CheckpointFileWriter): Promise<PolicyStateInfo>;
  /** Restores what saveState wrote. */
  loadState(dir: string): Promise<PolicyStateInfo>;
  /** The engine it runs on (kept in each checkpoint's state.json, compared on resume); optional. */
  engineInfo?(): PolicyEngineInfo;
}

/** Where a policy computes: 'cpu', 'emulate' or 'cuda', and the storage dtype of its compute weights. */
export interface PolicyEngineInfo {
  device: string;
  storage: string;
}

/** Writes a file (path relative to the checkpoint directory) atomically; lib/train/manifest.ts's ManifestWriter. */
export interface CheckpointFileWriter {
  writeFile(rel: string, data: string | Uint8Array | readonly Uint8Array[]): Promise<void>;
  /** Takes the size and hash of a file written by other code that hashed it as it wrote (the native save). */
  record?(rel: string, entry: { bytes: number; xxh64: string }): void;
}

export interface PolicyStateInfo {
  /** Subdirectory with the Hugging Face checkpoint. */
  hfDir: string;
  /** Whether the optimizer moments are part of the state (exact resume) or not. */
  optimizerState: boolean;
}

/** Policy over lib/model's native PolicyModel. */
export class NativePolicy implements Policy {
  /** tokenizerDir: tokenizer files copied into every saved checkpoint (default: the model's own directory). */
  constructor(
    readonly model: PolicyModel,
    private readonly opts: { tokenizerDir?: string } = {},
  ) {}

  params(): { name: string; shape: number[]; numel: number }[] {
    return this.model.params();
  }
  getParam(name: string): Float32Array {
    return this.model.getParam(name);
  }
  setParam(name: string, values: Float32Array): void {
    this.model.setParam(name, values);
  }
  async save(dir: string): Promise<void> {
    await this.model.save(dir, { tokenizerDir: this.opts.tokenizerDir });
  }
  accumulate(batch: TrainBatch, loss: LossOptions, gradScale: number): Promise<TrainStats> {
    return this.model.accumulate(batch, loss, gradScale);
  }
  optimizerStep(h: AdamWHyper): Promise<OptimizerResult> {
    return this.model.optimizerStep(h);
  }
  score(batch: PackedBatch, opts: { temperature?: number } = {}): Promise<Float32Array> {
    return this.model.score(batch, opts);
  }
  makeReference(): void {
    this.model.makeReference();
  }
  engineInfo(): PolicyEngineInfo {
    const e = this.model.engine;
    return { device: e.device, storage: e.storage };
  }

  /**
   * dir/policy: the Hugging Face weights; the native save hashes the weight files as it writes
   * them, and `files` (the manifest) takes those hashes. Returns the directory.
   */
  async saveHf(dir: string, files?: CheckpointFileWriter): Promise<string> {
    const hfDir = join(dir, 'policy');
    for (const f of await this.model.saveHashed(hfDir, { tokenizerDir: this.opts.tokenizerDir })) files?.record?.(`policy/${f.file}`, f);
    return hfDir;
  }

  async saveState(dir: string, files?: CheckpointFileWriter): Promise<PolicyStateInfo> {
    const out = checkpointFiles(dir, files);
    const hfDir = await this.saveHf(dir, files);
    const tensors: Record<string, { shape: number[]; data: Float32Array }> = {};
    for (const p of this.model.params()) tensors[p.name] = { shape: p.shape, data: this.model.getParam(p.name) };
    await writeMasterWeights(out, tensors);
    const st = this.model.optimizerState();
    const ot: Record<string, { shape: number[]; data: Float32Array }> = {};
    for (const [n, d] of Object.entries(st.tensors)) ot[n] = { shape: [d.length], data: d };
    await out.writeFile('optimizer.safetensors', safetensorsF32Chunks(ot, { step: String(st.step) }));
    return { hfDir, optimizerState: true };
  }

  async loadState(dir: string): Promise<PolicyStateInfo> {
    // Everything is read and checked against the model before any parameter is set, so a
    // damaged file leaves the model as it was.
    const params = this.model.params();
    const weights = readMasterWeights(dir, params);
    const opt = join(dir, 'optimizer.safetensors');
    let moments: { step: number; tensors: Record<string, Float32Array> } | null = null;
    if (existsSync(opt)) {
      const { tensors, metadata } = readSafetensorsF32(opt);
      const expected = params.flatMap((p) => [{ name: `${p.name}.exp_avg`, shape: [p.numel] }, { name: `${p.name}.exp_avg_sq`, shape: [p.numel] }]);
      const bad = tensorMismatch(tensors, expected);
      if (bad) throw new Error(`${opt}: ${bad}`);
      const step = Number(metadata.step ?? 0);
      if (!Number.isSafeInteger(step) || step < 0) throw new Error(`${opt}: metadata "step" is ${JSON.stringify(metadata.step)}, expected an integer >= 0`);
      const flat: Record<string, Float32Array> = {};
      for (const [n, t] of Object.entries(tensors)) flat[n] = t.data;
      moments = { step, tensors: flat };
    }
    if (weights) for (const [n, t] of Object.entries(weights)) this.model.setParam(n, t.data);
    if (moments) this.model.loadOptimizerState(moments);
    return { hfDir: join(dir, 'policy'), optimizerState: moments !== null };
  }
}

/** `files`, or (none given) a writer of plain atomic files under dir (hashed later, by reading them back). */
export function checkpointFiles(dir: string, files?: CheckpointFileWriter): CheckpointFileWriter {
  return files ?? { writeFile: async (rel, data) => writeFileAtomic(join(dir, rel), data) };
}

/**
 * A checkpoint's master.safetensors (the fp32 weights) through `out` (hashed as written). Chunks
 * (views of the tensors), so no buffer of the whole file is built (the moments of a 0.6B model
 * are 4.8 GB, more than one Node buffer holds).
 */
export function writeMasterWeights(out: CheckpointFileWriter, tensors: Record<string, { shape: number[]; data: Float32Array }>): Promise<void> {
  return out.writeFile('master.safetensors', safetensorsF32Chunks(tensors, { kind: 'fp32 master weights' }));
}

/**
 * A checkpoint's master.safetensors (the fp32 weights), read and checked against the model's
 * parameters (one line naming the file and the mismatch); null when the checkpoint has none.
 */
export function readMasterWeights(dir: string, params: readonly { name: string; shape: readonly number[] }[]): F32Tensors | null {
  const path = join(dir, 'master.safetensors');
  if (!existsSync(path)) return null;
  const { tensors } = readSafetensorsF32(path);
  const bad = tensorMismatch(tensors, params);
  if (bad) throw new Error(`${path}: ${bad}`);
  return tensors;
}
