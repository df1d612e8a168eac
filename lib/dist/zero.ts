// ZeRO-1 data parallelism over a Policy: the fp32 master weights and AdamW moments of the flat
// parameter vector are sharded across ranks (lib/dist/shards.ts); each optimizer step
// reduce-scatters the accumulated gradients bucket by bucket (lib/dist/buckets.ts), takes the
// global gradient norm from an all-reduce of the shards' squared norms, steps its shard with the
// AdamW kernel (lib/native.ts adamw over the shard's slices), and all-gathers the updated
// weights into every rank's model. Checkpoints: every rank writes its shard; rank 0 also the
// Hugging Face weights and the full fp32 master weights. Loading re-shards from any world size
// (or from a one-process checkpoint's optimizer.safetensors).
//
// With a device engine and the NCCL backend the shard lives in the engine and the step runs
// there (lib/dist/zero-device.ts, native/gpu/engine/zero_shard.h); this class then only holds
// the plans and moves the shard between the engine and the checkpoint files.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { adamw, type AdamWHyper, type AdamWTensor } from '../native.js';
import { resolveAdamWOptions } from '../native/options.js';
import { readSafetensorsF32, safetensorsF32Chunks } from '../safetensors.js';
import { writeFileHashed } from '../train/manifest.js';
import { checkpointFiles, readMasterWeights, writeMasterWeights, type CheckpointFileWriter, type LossOptions, type OptimizerResult, type Policy, type PolicyStateInfo, type TrainBatch, type TrainStats } from '../train/policy.js';
import { flatLayout, planBuckets, reduceBucketBytes, type Bucket, type FlatParam } from './buckets.js';
import { allGatherJson, broadcastJson, type Collective } from './collective.js';
import { assembleRange, intersect, planShards, rangeCounts, type Range, type ShardPlan } from './shards.js';
import { deviceZeroOf, zeroPlanOf, type DeviceZero } from './zero-device.js';

/** Access to the accumulated gradients of the model behind a Policy (PolicyModel has both). */
export interface GradientAccess {
  getGrad(name: string): Float32Array;
  zeroGrad(): void;
  /** The model's own AdamW state (e.g. after the demo's warm-up), taken over by the shards. */
  optimizerState?(): { step: number; tensors: Record<string, Float32Array> };
}

/** A Policy whose weights can be set (NativePolicy), and that may save its Hugging Face weights hashed as written (NativePolicy.saveHf). */
export type SettablePolicy = Policy & {
  setParam(name: string, values: Float32Array): void;
  saveHf?(dir: string, files?: CheckpointFileWriter): Promise<string>;
};

/** A rank's optimizer shard as written: its file name in the checkpoint and its manifest entry (bytes -1 when rank 0's manifest hashed it itself). */
interface ShardEntry {
  file: string;
  bytes: number;
  xxh64: string;
}

export interface ZeroOptions {
  /** Bucket size of the gradient reduce-scatter and weight all-gather, bytes (default and range: lib/dist/buckets.ts REDUCE_BUCKET_MB). */
  bucketBytes?: number;
  /**
   * Device path with several ranks: start each bucket's gradient reduction during the last
   * micro-batch's backward pass (accumulate(..., { last: true })), as soon as the bucket's
   * gradients are final (default true). false: all of them at the step (the reference; the
   * same calls and the same numbers).
   */
  overlap?: boolean;
  /** With the overlap on CUDA: record the device timeline of each step (PolicyModel.zeroOverlapTrace; the GPU check). */
  timeline?: boolean;
  /** Shard alignment, elements (default 64). */
  align?: number;
  /**
   * Run ZeRO-1 on a device engine's own memory when the backend is NCCL (lib/dist/zero-device.ts;
   * default true). false: the host path (per-parameter host copies), as with the CPU engine or TCP.
   */
  device?: boolean;
}

/** File name of rank r's optimizer shard in a checkpoint of a world of w ranks. */
export function shardFileName(rank: number, worldSize: number): string {
  const p = (n: number): string => String(n).padStart(5, '0');
  return `optimizer-shard-${p(rank)}-of-${p(worldSize)}.safetensors`;
}
const SHARD_FILE = /^optimizer-shard-(\d{5})-of-(\d{5})\.safetensors$/;

/** Shard files in a checkpoint directory: their world size (null when none), or a line saying what is wrong. */
export function checkpointShards(dir: string): { worldSize: number; files: string[] } | null {
  const files = existsSync(dir) ? readdirSync(dir).filter((n) => SHARD_FILE.test(n)).sort() : [];
  if (files.length === 0) return null;
  const ws = new Set(files.map((f) => Number(SHARD_FILE.exec(f)![2])));
  if (ws.size !== 1) throw new Error(`${dir}: optimizer shards of different world sizes (${[...ws].join(', ')})`);
  const w = [...ws][0]!;
  if (files.length !== w) throw new Error(`${dir}: ${files.length} of ${w} optimizer shard files; the checkpoint is incomplete`);
  return { worldSize: w, files: files.map((f) => join(dir, f)) };
}

/** A fingerprint of the parameter layout (names and sizes in order). */
function layoutKey(params: readonly FlatParam[]): string {
  let h = 0x811c9dc5;
  for (const p of params) for (const ch of `${p.name}:${p.numel};`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return `${params.length}-${h.toString(16)}`;
}

export class DistributedPolicy implements Policy {
  readonly layout: FlatParam[];
  readonly total: number;
  readonly shards: ShardPlan;
  readonly buckets: Bucket[];
  private readonly shapes: number[][];
  /** This rank's range of the flat vector and its fp32 master weights and moments. */
  readonly range: Range;
  private master: Float32Array;
  private m: Float32Array;
  private v: Float32Array;
  private steps = 0;
  /** The device path (the shard lives in the engine), or null (the host path: the arrays above). */
  private dev: DeviceZero | null = null;
  private readonly overlap: boolean;
  private readonly timeline: boolean;

  private constructor(
    readonly coll: Collective,
    readonly inner: SettablePolicy,
    private readonly grads: GradientAccess,
    opts: ZeroOptions,
  ) {
    const ps = inner.params();
    const f = flatLayout(ps);
    this.layout = f.params;
    this.total = f.total;
    this.shapes = ps.map((p) => p.shape);
    this.shards = planShards(this.total, coll.worldSize, opts.align);
    this.buckets = planBuckets(this.layout, reduceBucketBytes(opts.bucketBytes), 4);
    this.overlap = opts.overlap ?? true;
    this.timeline = opts.timeline ?? false;
    this.range = this.shards.ranges[coll.rank]!;
    const n = this.range.end - this.range.begin;
    this.master = new Float32Array(n);
    this.m = new Float32Array(n);
    this.v = new Float32Array(n);
  }

  /**
   * Wraps `inner` (collective: every rank calls it): rank 0's weights, and its model's AdamW
   * moments and step count when it has taken steps (the demo's warm-up), are broadcast to
   * every rank, and each rank keeps its shard of them.
   */
  static async create(coll: Collective, inner: SettablePolicy, grads: GradientAccess, opts: ZeroOptions = {}): Promise<DistributedPolicy> {
    const d = new DistributedPolicy(coll, inner, grads, opts);
    const flat = d.flatWeights();
    for (const b of d.buckets) await coll.broadcast(flat.subarray(b.begin, b.end), 0);
    if (coll.rank !== 0) d.setFlatWeights(flat);
    d.master = flat.slice(d.range.begin, d.range.end);
    const st = coll.rank === 0 && grads.optimizerState ? grads.optimizerState() : null;
    const step = new Float64Array([st?.step ?? 0]);
    await coll.broadcast(step, 0);
    if (step[0]! > 0) {
      for (const [suffix, into] of [['exp_avg', 'm'], ['exp_avg_sq', 'v']] as const) {
        const full = new Float32Array(d.total);
        if (st) for (const p of d.layout) full.set(st.tensors[`${p.name}.${suffix}`]!, p.offset);
        for (const b of d.buckets) await coll.broadcast(full.subarray(b.begin, b.end), 0);
        d[into] = full.slice(d.range.begin, d.range.end);
      }
      d.steps = step[0]!;
    }
    const dev = opts.device === false ? null : deviceZeroOf(coll, grads);
    if (dev) {
      dev.init(zeroPlanOf(coll.rank, d.shards, d.buckets), { master: d.master, m: d.m, v: d.v, step: d.steps });
      d.useDevice(dev);
    }
    return d;
  }

  /** Whether the shard lives in a device engine (the device path). */
  get onDevice(): boolean {
    return this.dev !== null;
  }

  private useDevice(dev: DeviceZero): void {
    this.dev = dev;
    this.master = this.m = this.v = new Float32Array(0);
  }

  /** The shard as it is now: the engine's (device path) or the host arrays. */
  private shard(): { master: Float32Array; m: Float32Array; v: Float32Array; step: number } {
    return this.dev ? this.dev.shard() : { master: this.master, m: this.m, v: this.v, step: this.steps };
  }

  /** This rank's shard: its range, master weights and moments (copies; tests and tools). */
  shardState(): { range: Range; master: Float32Array; m: Float32Array; v: Float32Array; step: number } {
    const s = this.shard();
    return { range: { ...this.range }, master: s.master.slice(), m: s.m.slice(), v: s.v.slice(), step: s.step };
  }

  /** The optimizer steps taken. */
  get step(): number {
    return this.steps;
  }

  private flatWeights(): Float32Array {
    const flat = new Float32Array(this.total);
    for (const p of this.layout) flat.set(this.inner.getParam(p.name), p.offset);
    return flat;
  }

  private setFlatWeights(flat: Float32Array): void {
    for (const p of this.layout) this.inner.setParam(p.name, flat.subarray(p.offset, p.offset + p.numel));
  }

  /** This rank's part of [b.begin, b.end), relative to its shard. */
  private local(b: Range): Range {
    const x = intersect(b, this.range);
    const begin = Math.max(x.begin, this.range.begin) - this.range.begin;
    return { begin, end: Math.max(begin, x.end - this.range.begin) };
  }

  // ---- Policy: everything but the optimizer and the state is the inner policy's
  params(): { name: string; shape: number[]; numel: number }[] { return this.inner.params(); }
  getParam(name: string): Float32Array { return this.inner.getParam(name); }
  setParam(name: string, values: Float32Array): void {
    this.inner.setParam(name, values);
    const p = this.layout.find((x) => x.name === name);
    if (!p || this.dev) return; // the device engine takes its shard's part itself
    const x = intersect(this.range, { begin: p.offset, end: p.offset + p.numel });
    if (x.end > x.begin) this.master.set(values.subarray(x.begin - p.offset, x.end - p.offset), x.begin - this.range.begin);
  }
  save(dir: string): Promise<void> { return this.inner.save(dir); }
  /**
   * One micro-batch. `last`: the last this rank trains in the step; with the overlap (device
   * path, several ranks) its backward starts the gradient reductions (collective: every rank
   * then calls reduceGradients() before any other collective, also one without micro-batches).
   */
  accumulate(batch: TrainBatch, loss: LossOptions, gradScale: number, opts: { last?: boolean } = {}): Promise<TrainStats> {
    if (opts.last && this.overlapping) return this.dev!.accumulateOverlapped(() => this.inner.accumulate(batch, loss, gradScale), this.timeline);
    return this.inner.accumulate(batch, loss, gradScale);
  }

  /** Whether the gradient reductions overlap the last backward pass (device path, several ranks, overlap on). */
  get overlapping(): boolean {
    return this.dev !== null && this.overlap && this.coll.worldSize > 1;
  }

  /**
   * After this rank's micro-batches of a step (collective; before the step's other collectives):
   * with the overlap, starts the reductions its last backward did not (all of them on a rank
   * without micro-batches); the step waits for them. Otherwise nothing (the step reduces).
   */
  async reduceGradients(): Promise<void> {
    if (this.overlapping) await this.dev!.flush();
  }
  score(...a: Parameters<Policy['score']>): ReturnType<Policy['score']> { return this.inner.score(...a); }
  makeReference(): void { this.inner.makeReference(); }

  /**
   * The ZeRO-1 step (collective). Formulas: g = sum over ranks of each rank's accumulated
   * gradient (reduce-scatter, rank order); ||g|| = sqrt(sum over ranks of the shard's sum of
   * squares); clip coef = min(1, maxGradNorm / (||g|| + 1e-6)) as the one-process kernel;
   * then AdamW on the shard (native kernel, clipping off, the coef applied to g first).
   */
  async optimizerStep(h: AdamWHyper): Promise<OptimizerResult> {
    if (this.dev) {
      const r = await this.dev.step(h);
      this.steps = r.step;
      return { gradNorm: r.gradNorm, clipCoef: r.clipCoef, skipped: r.skipped, step: r.step };
    }
    const o = resolveAdamWOptions('optimizerStep', h);
    const flat = new Float32Array(this.total);
    for (const p of this.layout) flat.set(this.grads.getGrad(p.name), p.offset);
    this.grads.zeroGrad();
    const g = new Float32Array(this.master.length);
    for (const b of this.buckets) {
      const l = this.local(b);
      await this.coll.reduceScatter(flat.subarray(b.begin, b.end), g.subarray(l.begin, l.end), { counts: rangeCounts(this.shards, b.begin, b.end) });
    }
    let sq = 0;
    for (let i = 0; i < g.length; i++) sq += g[i]! * g[i]!;
    const tot = new Float64Array([sq]);
    await this.coll.allReduce(tot);
    const gradNorm = Math.sqrt(tot[0]!);
    let clipCoef = 1;
    if (o.maxGradNorm > 0) {
      if (!Number.isFinite(gradNorm)) return { gradNorm, clipCoef: 0, skipped: true, step: this.steps };
      clipCoef = Math.min(1, o.maxGradNorm / (gradNorm + 1e-6));
      if (clipCoef < 1) {
        const c = Math.fround(clipCoef);
        for (let i = 0; i < g.length; i++) g[i] = c * g[i]!;
      }
    }
    const tensors: AdamWTensor[] = [];
    this.layout.forEach((p, i) => {
      const x = intersect(this.range, { begin: p.offset, end: p.offset + p.numel });
      if (x.end <= x.begin) return;
      const a = x.begin - this.range.begin, e = x.end - this.range.begin;
      tensors.push({ param: this.master.subarray(a, e), grad: g.subarray(a, e), m: this.m.subarray(a, e), v: this.v.subarray(a, e), decay: this.shapes[i]!.length > 1 });
    });
    if (tensors.length) adamw(tensors, { lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, weightDecay: o.weightDecay, maxGradNorm: 0, step: this.steps + 1 });
    this.steps++;
    for (const b of this.buckets) {
      const l = this.local(b);
      await this.coll.allGather(this.master.subarray(l.begin, l.end), flat.subarray(b.begin, b.end), rangeCounts(this.shards, b.begin, b.end));
    }
    this.setFlatWeights(flat);
    return { gradNorm, clipCoef, skipped: false, step: this.steps };
  }

  // ---- checkpoints

  /** This rank's shard file (streamed chunks, hashed as written); its name and manifest entry. */
  private async writeShard(dir: string, files?: CheckpointFileWriter): Promise<ShardEntry> {
    const s = this.shard();
    const n = s.master.length;
    const t = { master: { shape: [n], data: s.master }, exp_avg: { shape: [n], data: s.m }, exp_avg_sq: { shape: [n], data: s.v } };
    const meta = {
      step: String(s.step), rank: String(this.coll.rank), world_size: String(this.coll.worldSize),
      begin: String(this.range.begin), end: String(this.range.end), total: String(this.total), layout: layoutKey(this.layout),
    };
    const file = shardFileName(this.coll.rank, this.coll.worldSize);
    const data = safetensorsF32Chunks(t, meta);
    if (files) {
      await files.writeFile(file, data);
      return { file, bytes: -1, xxh64: '' };
    }
    return { file, ...(await writeFileHashed(join(dir, file), data)) };
  }

  /**
   * Rank 0 (inside writeCheckpoint): tells the other ranks where, writes the Hugging Face
   * weights, the full fp32 master weights (the all-gathered ones) and its shard, and returns
   * once every rank's shard is written. As a single process's save, every file is hashed as it
   * is written (`files`, the checkpoint's manifest): the other ranks hash their shards as they
   * write them and send rank 0 the size and hash (an all-gather, which also waits for them).
   */
  async saveState(dir: string, files?: CheckpointFileWriter): Promise<PolicyStateInfo> {
    if (this.coll.rank !== 0) throw new Error('DistributedPolicy.saveState runs on rank 0; the other ranks call joinSave()');
    await broadcastJson(this.coll, { dir });
    const hfDir = this.inner.saveHf ? await this.inner.saveHf(dir, files) : join(dir, 'policy');
    if (!this.inner.saveHf) await this.inner.save(hfDir);
    const w: Record<string, { shape: number[]; data: Float32Array }> = {};
    const full = this.dev ? await this.gatherMaster() : null;
    this.layout.forEach((p, i) => (w[p.name] = { shape: this.shapes[i]!, data: full ? full.subarray(p.offset, p.offset + p.numel) : this.inner.getParam(p.name) }));
    await writeMasterWeights(checkpointFiles(dir, files), w);
    const mine = await this.writeShard(dir, files);
    const all = await allGatherJson(this.coll, mine);
    for (const e of all.slice(1)) files?.record?.(e.file, { bytes: e.bytes, xxh64: e.xxh64 });
    return { hfDir, optimizerState: true };
  }

  /** Ranks other than 0: their part of rank 0's saveState. Returns the directory written to. */
  async joinSave(): Promise<string> {
    const { dir } = await broadcastJson<{ dir: string }>(this.coll, undefined);
    if (this.dev) await this.gatherMaster(); // collective: rank 0 gathers the master for master.safetensors
    await allGatherJson(this.coll, await this.writeShard(dir));
    return dir;
  }

  /**
   * Device path (collective): the full fp32 master weights, all-gathered from the shards bucket
   * by bucket through the collective's host staging (checkpoints only: the engine's own weights
   * are the bf16 ones with bf16 storage).
   */
  private async gatherMaster(): Promise<Float32Array> {
    const s = this.shard();
    const flat = new Float32Array(this.total);
    for (const b of this.buckets) {
      const l = this.local(b);
      await this.coll.allGather(s.master.subarray(l.begin, l.end), flat.subarray(b.begin, b.end), rangeCounts(this.shards, b.begin, b.end));
    }
    return flat;
  }

  /**
   * Device path: the weights of master.safetensors set through the inner policy, as its
   * loadState does, without its optimizer-state part (the engine's moments are the shard's);
   * returns them flat (the fp32 values: with bf16 storage the engine keeps the rounded ones).
   */
  private loadWeights(dir: string): { flat: Float32Array; optimizerState: boolean } {
    const tensors = readMasterWeights(dir, this.inner.params());
    if (!tensors) {
      const flat = this.flatWeights();
      const s = this.shard();
      flat.set(s.master, this.range.begin);
      return { flat, optimizerState: existsSync(join(dir, 'optimizer.safetensors')) };
    }
    const flat = new Float32Array(this.total);
    for (const p of this.layout) {
      const t = tensors[p.name]!.data;
      this.inner.setParam(p.name, t);
      flat.set(t, p.offset);
    }
    return { flat, optimizerState: existsSync(join(dir, 'optimizer.safetensors')) };
  }

  /**
   * Every rank: the weights from master.safetensors (through the inner policy), then this
   * rank's master shard and moments: its own shard file when the world size is the same,
   * else re-sharded from all shard files, or from a one-process optimizer.safetensors.
   */
  async loadState(dir: string): Promise<PolicyStateInfo> {
    const info = this.dev ? { hfDir: join(dir, 'policy'), ...this.loadWeights(dir) } : { ...(await this.inner.loadState(dir)), flat: null };
    const flat = info.flat ?? this.flatWeights();
    const shards = checkpointShards(dir);
    const want = this.range;
    let m: Float32Array, v: Float32Array, step: number;
    if (shards) {
      const pieces: { begin: number; master: Float32Array; m: Float32Array; v: Float32Array }[] = [];
      let steps = -1;
      for (const f of shards.files) {
        const { tensors, metadata } = readSafetensorsF32(f);
        if (Number(metadata.total) !== this.total || metadata.layout !== layoutKey(this.layout)) {
          throw new Error(`${f}: written for another model (${metadata.total} parameters, layout ${metadata.layout}; this one has ${this.total}, ${layoutKey(this.layout)})`);
        }
        const b = Number(metadata.begin);
        if (Math.min(want.end, Number(metadata.end)) <= Math.max(want.begin, b) && want.end > want.begin) continue;
        if (!tensors.exp_avg || !tensors.exp_avg_sq || !tensors.master) throw new Error(`${f}: missing master / exp_avg / exp_avg_sq`);
        if (steps >= 0 && Number(metadata.step) !== steps) throw new Error(`${f}: step ${metadata.step}, other shards ${steps}`);
        steps = Number(metadata.step);
        pieces.push({ begin: b, master: tensors.master.data, m: tensors.exp_avg.data, v: tensors.exp_avg_sq.data });
      }
      if (steps < 0) steps = Number(readSafetensorsF32(shards.files[0]!).metadata.step);
      m = assembleRange(pieces.map((p) => ({ begin: p.begin, data: p.m })), want);
      v = assembleRange(pieces.map((p) => ({ begin: p.begin, data: p.v })), want);
      step = steps;
    } else if (existsSync(join(dir, 'optimizer.safetensors'))) {
      const { tensors, metadata } = readSafetensorsF32(join(dir, 'optimizer.safetensors'));
      const piece = (suffix: string) => this.layout.map((p) => ({ begin: p.offset, data: tensors[`${p.name}.${suffix}`]!.data }));
      m = assembleRange(piece('exp_avg'), want);
      v = assembleRange(piece('exp_avg_sq'), want);
      step = Number(metadata.step ?? 0);
    } else {
      m = new Float32Array(want.end - want.begin);
      v = new Float32Array(want.end - want.begin);
      step = 0;
    }
    this.steps = step;
    if (this.dev) {
      this.dev.set({ master: flat.slice(want.begin, want.end), m, v, step });
      return { hfDir: info.hfDir, optimizerState: shards !== null || info.optimizerState };
    }
    this.master = flat.slice(want.begin, want.end);
    this.m = m;
    this.v = v;
    return { hfDir: info.hfDir, optimizerState: shards !== null || info.optimizerState };
  }
}
