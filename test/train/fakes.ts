// A deterministic TypeScript stand-in for the native policy (Adam on a small weight vector)
// and a rollout backend over lib/murphy's FakeSampler: enough to test the loop, checkpoints
// and resume exactly, in milliseconds.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeSampler, type Completion, type SampleParams } from '../../lib/murphy/index.js';
import type { AdamWHyper, LossOptions, OptimizerResult, PackedBatch, Policy, PolicyStateInfo, TrainBatch, TrainStats } from '../../lib/train/policy.js';
import type { PolicyWeights, RolloutBackend, WeightSyncReport } from '../../lib/rollout/types.js';

const D = 16;

export class FakePolicy implements Policy {
  w = new Float64Array(D).map((_, i) => Math.sin(i + 1) * 0.1);
  g = new Float64Array(D);
  m = new Float64Array(D);
  v = new Float64Array(D);
  t = 0;
  ref: Float64Array | null = null;
  accumulateCalls = 0;

  params(): { name: string; shape: number[]; numel: number }[] {
    return [{ name: 'w', shape: [D], numel: D }];
  }
  getParam(): Float32Array {
    return Float32Array.from(this.w);
  }
  setParam(_: string, v: Float32Array): void {
    this.w = Float64Array.from(v);
  }
  async save(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ fake: true }));
    writeFileSync(join(dir, 'weights.json'), JSON.stringify(Array.from(this.w)));
  }
  private logp(tok: number): number {
    return -Math.log(1 + Math.exp(this.w[tok % D]!));
  }
  async accumulate(b: TrainBatch, _loss: LossOptions, scale: number): Promise<TrainStats> {
    this.accumulateCalls++;
    let loss = 0;
    let n = 0;
    for (let t = 0; t < b.tokens.length; t++) {
      if (!b.mask?.[t]) continue;
      const a = b.advantages?.[t] ?? 0;
      const k = b.tokens[t]! % D;
      const s = 1 / (1 + Math.exp(-this.w[k]!));
      loss += a * this.logp(b.tokens[t]!);
      this.g[k]! += scale * a * s;
      n++;
    }
    return { loss: n ? loss / n : 0, nTokens: b.tokens.length, nActive: n, meanLogp: 0, clipLowFrac: 0, clipHighFrac: 0, dualClipFrac: 0, meanRatio: 1, meanKl: 0 };
  }
  async optimizerStep(h: AdamWHyper): Promise<OptimizerResult> {
    this.t++;
    const b1 = h.beta1 ?? 0.9;
    const b2 = h.beta2 ?? 0.999;
    let norm = 0;
    for (let i = 0; i < D; i++) norm += this.g[i]! ** 2;
    norm = Math.sqrt(norm);
    for (let i = 0; i < D; i++) {
      this.m[i] = b1 * this.m[i]! + (1 - b1) * this.g[i]!;
      this.v[i] = b2 * this.v[i]! + (1 - b2) * this.g[i]! ** 2;
      const mh = this.m[i]! / (1 - b1 ** this.t);
      const vh = this.v[i]! / (1 - b2 ** this.t);
      this.w[i]! -= h.lr * (mh / (Math.sqrt(vh) + 1e-8));
      this.g[i] = 0;
    }
    return { gradNorm: norm, clipCoef: 1, skipped: false, step: this.t };
  }
  async score(b: PackedBatch): Promise<Float32Array> {
    return Float32Array.from(b.tokens, (x) => this.logp(x));
  }
  makeReference(): void {
    this.ref = this.w.slice();
  }
  async saveState(dir: string): Promise<PolicyStateInfo> {
    await this.save(join(dir, 'policy'));
    writeFileSync(join(dir, 'fake-state.json'), JSON.stringify({ w: Array.from(this.w), m: Array.from(this.m), v: Array.from(this.v), t: this.t }));
    return { hfDir: join(dir, 'policy'), optimizerState: true };
  }
  async loadState(dir: string): Promise<PolicyStateInfo> {
    const s = JSON.parse(readFileSync(join(dir, 'fake-state.json'), 'utf8')) as { w: number[]; m: number[]; v: number[]; t: number };
    this.w = Float64Array.from(s.w);
    this.m = Float64Array.from(s.m);
    this.v = Float64Array.from(s.v);
    this.t = s.t;
    return { hfDir: join(dir, 'policy'), optimizerState: true };
  }
}

/** FakeSampler as a RolloutBackend; its pass probability follows the policy's first weight, so weights matter. */
export class FakeBackend implements RolloutBackend {
  readonly kind = 'fake';
  syncs: number[] = [];
  private sampler = new FakeSampler({ passProbByTurn: [0.35, 0.5] });
  constructor(private readonly policy?: FakePolicy) {}
  async generate(ids: number[], n: number, params: SampleParams): Promise<Completion[]> {
    const shift = this.policy ? Math.round(this.policy.w[0]! * 1e6) : 0;
    return this.sampler.generate(ids, n, { ...params, seed: params.seed === undefined ? undefined : (params.seed + shift) >>> 0 });
  }
  async syncWeights(_p: PolicyWeights, step: number): Promise<WeightSyncReport> {
    this.syncs.push(step);
    return { step, method: 'shared', servers: [], failed: [], seconds: 0 };
  }
  async close(): Promise<void> {}
}
