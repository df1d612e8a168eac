// What the training loop needs from the policy, and its implementation over lib/model's
// native PolicyModel. Tests use a small TypeScript fake of the same interface.
import { existsSync, readFileSync } from 'node:fs';
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
import { decodeSafetensorsF32, encodeSafetensorsF32 } from '../safetensors.js';
import { writeFileAtomic } from './rundir.js';

export type { AdamWHyper, LossOptions, OptimizerResult, PackedBatch, TrainBatch, TrainStats };

/** The trainable policy: gradient accumulation, optimizer step, scoring, and its full state. */
export interface Policy extends PolicyWeights {
  /** Forward + loss + backward of one micro-batch; its gradient (times gradScale) adds into the accumulated one. */
  accumulate(batch: TrainBatch, loss: LossOptions, gradScale: number): Promise<TrainStats>;
  /** AdamW on the accumulated gradients, then zeroes them. */
  optimizerStep(h: AdamWHyper): Promise<OptimizerResult>;
  /** Log-probs of every token (0 at each sequence's first token), no gradients. */
  score(batch: PackedBatch, opts?: { temperature?: number }): Promise<Float32Array>;
  /** Freezes the current weights as the KL reference. */
  makeReference(): void;
  /** Writes everything a resume needs (Hugging Face weights, fp32 master weights, optimizer state) under dir. */
  saveState(dir: string): Promise<PolicyStateInfo>;
  /** Restores what saveState wrote. */
  loadState(dir: string): Promise<PolicyStateInfo>;
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
  save(dir: string): Promise<void> {
    return this.model.save(dir, { tokenizerDir: this.opts.tokenizerDir });
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

  async saveState(dir: string): Promise<PolicyStateInfo> {
    const hfDir = join(dir, 'policy');
    await this.save(hfDir);
    const tensors: Record<string, { shape: number[]; data: Float32Array }> = {};
    for (const p of this.model.params()) tensors[p.name] = { shape: p.shape, data: this.model.getParam(p.name) };
    writeFileAtomic(join(dir, 'master.safetensors'), encodeSafetensorsF32(tensors, { kind: 'fp32 master weights' }));
    const st = this.model.optimizerState();
    const ot: Record<string, { shape: number[]; data: Float32Array }> = {};
    for (const [n, d] of Object.entries(st.tensors)) ot[n] = { shape: [d.length], data: d };
    writeFileAtomic(join(dir, 'optimizer.safetensors'), encodeSafetensorsF32(ot, { step: String(st.step) }));
    return { hfDir, optimizerState: true };
  }

  async loadState(dir: string): Promise<PolicyStateInfo> {
    const master = join(dir, 'master.safetensors');
    if (existsSync(master)) {
      const { tensors } = decodeSafetensorsF32(readFileSync(master));
      for (const [n, t] of Object.entries(tensors)) this.model.setParam(n, t.data);
    }
    const opt = join(dir, 'optimizer.safetensors');
    let restored = false;
    if (existsSync(opt)) {
      const { tensors, metadata } = decodeSafetensorsF32(readFileSync(opt));
      const flat: Record<string, Float32Array> = {};
      for (const [n, t] of Object.entries(tensors)) flat[n] = t.data;
      this.model.loadOptimizerState({ step: Number(metadata.step ?? 0), tensors: flat });
      restored = true;
    }
    return { hfDir: join(dir, 'policy'), optimizerState: restored };
  }
}
