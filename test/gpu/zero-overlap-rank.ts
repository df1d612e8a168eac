// One rank of the overlap check (test/gpu/zero-overlap.test.ts), and the check itself:
//   node --import tsx test/gpu/zero-overlap-rank.ts MASTER_PORT WORLD RANK SEED
// joins an NCCL collective on CUDA device 0 of this process (the parent gives each rank one GPU)
// and prints one JSON line (OverlapResult). The dry run calls overlapRank() for two ranks in
// one process over the fake library and the emulated engine.
//
// Per rank, two models from the same weights (the 'small' preset on CUDA, 'tiny' emulated):
// ZeRO-1 with the overlap and the device timeline, and the reference (every reduction after the
// backward). Each of 3 steps, rank 0 trains two micro-batches and the others one; the overlapped
// step records where each bucket's reduction was started (the gradient frontier) and the
// milliseconds from the first reduction's start on the NCCL stream to the end of the backward on
// the compute stream (CUDA events: > 0 means the reduce-scatter of the first bucket began
// before the backward ended). Then both shards and weights are compared (the overlap issues the
// same NCCL calls on the same gradients: expected bit for bit) and the wall time of each step
// is printed (not asserted).
import './binary.js';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { NcclCollective } from '../../lib/dist/nccl-collective.js';
import { PolicyModel, type TrainBatch } from '../../lib/model/index.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng } from '../helpers/random.js';
import { ZERO_LOSS as loss, zeroTestBatch } from '../dist/helpers.js';

export interface OverlapResult {
  rank: number;
  ok: boolean;
  error?: string;
  /** Per step: first reduction's start to the end of the backward on the device, ms (null without events). */
  timelineMs: (number | null)[];
  /** Per step: how many buckets were started before the end of the backward (frontier > 0). */
  startedInBackward: number[];
  buckets: number;
  /** Largest |difference| between the overlapped and the reference shards and weights. */
  maxDiff: number;
  /** Per step: wall ms of the overlapped and the reference step (micro-batches to optimizer step). */
  wallMs: [number, number][];
}

const hyper = { lr: 1e-3, maxGradNorm: 1, weightDecay: 0.1, beta1: 0.9, beta2: 0.999 };

function maxAbs(a: Float32Array, b: Float32Array): number {
  let w = 0;
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs(a[i]! - b[i]!));
  return w;
}

export async function overlapRank(coll: NcclCollective, device: 'cuda' | 'emulate', seed: number): Promise<OverlapResult> {
  const r = coll.rank;
  const preset = device === 'cuda' ? 'small' : 'tiny';
  const out: OverlapResult = { rank: r, ok: false, timelineMs: [], startedInBackward: [], buckets: 0, maxDiff: 0, wallMs: [] };
  const models = [await PolicyModel.random(preset, { seed: 3, device, storage: 'bf16' }), await PolicyModel.random(preset, { seed: 3, device, storage: 'bf16' })];
  // buckets of 1 MiB on CUDA (a few per layer of the small preset), 8 KiB emulated
  const bucketBytes = device === 'cuda' ? 1 << 20 : 8192;
  const ovl = await DistributedPolicy.create(coll, new NativePolicy(models[0]!), models[0]!, { bucketBytes, overlap: true, timeline: true });
  const ref = await DistributedPolicy.create(coll, new NativePolicy(models[1]!), models[1]!, { bucketBytes, overlap: false });
  if (!ovl.overlapping || ref.overlapping) throw new Error('the overlapped policy does not overlap (device path, several ranks?)');
  out.buckets = ovl.buckets.length;
  const V = models[0]!.info.vocabSize;
  for (let s = 0; s < 3; s++) {
    const rng = new Rng(seed * 7919 + s * 31 + r);
    const mine: TrainBatch[] = Array.from({ length: r === 0 ? 2 : 1 }, () => zeroTestBatch(rng, device === 'cuda' ? 8 : 2, V));
    for (const [i, d] of [ovl, ref].entries()) {
      const t0 = performance.now();
      for (const [j, b] of mine.entries()) await d.accumulate(b, loss, 0.5, { last: j === mine.length - 1 });
      await d.reduceGradients();
      await d.optimizerStep(hyper);
      const ms = performance.now() - t0;
      if (i === 0) out.wallMs.push([ms, 0]);
      else out.wallMs[s]![1] = ms;
    }
    const tr = models[0]!.zeroOverlapTrace();
    out.timelineMs.push(tr.timelineMs);
    out.startedInBackward.push(tr.starts.filter((x) => x > 0).length);
    const a = ovl.shardState(), b = ref.shardState();
    out.maxDiff = Math.max(out.maxDiff, maxAbs(a.master, b.master), maxAbs(a.m, b.m), maxAbs(a.v, b.v));
  }
  for (const p of models[0]!.params()) out.maxDiff = Math.max(out.maxDiff, maxAbs(models[0]!.getParam(p.name), models[1]!.getParam(p.name)));
  out.ok = true;
  return out;
}

async function main(): Promise<void> {
  const [port, world, rank, seed] = process.argv.slice(2).map(Number);
  const coll = await NcclCollective.create({ rank: rank!, worldSize: world!, masterAddr: '127.0.0.1', masterPort: port!, device: 0, connectTimeoutMs: 120_000, timeoutMs: 120_000 });
  let res: OverlapResult;
  try {
    res = await overlapRank(coll, 'cuda', seed!);
  } catch (e) {
    res = { rank: rank!, ok: false, error: (e as Error).message, timelineMs: [], startedInBackward: [], buckets: 0, maxDiff: NaN, wallMs: [] };
  }
  await coll.close().catch(() => undefined);
  console.log(JSON.stringify(res));
}

if (process.argv[1]?.endsWith('zero-overlap-rank.ts')) void main();
