// Test helpers: a world of N ranks inside one process, of the CPU backend (loopback TCP) or of
// the NCCL backend on the tests' fake library (device -1, host buffers; the fake's communicators
// of one id form a world). Rank 0 listens on a free port and the others start once it does.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { flatLayout, planBuckets, type Bucket, type FlatParam } from '../../lib/dist/buckets.js';
import type { Collective } from '../../lib/dist/collective.js';
import { NcclCollective, type NcclCollectiveOptions } from '../../lib/dist/nccl-collective.js';
import { planShards, rangeCounts } from '../../lib/dist/shards.js';
import { TcpCollective, type TcpCollectiveOptions } from '../../lib/dist/tcp.js';
import { findNccl } from '../../lib/gpu/nccl.js';
import { PolicyModel, type TrainBatch } from '../../lib/model/index.js';
import { buildFakeNccl } from '../helpers/fake-nccl.js';
import type { Rng } from '../helpers/random.js';

const open: Collective[] = [];

/** Closes every collective localWorld / ncclLocalWorld made (register with after(): a failed test leaves none open). */
export async function closeWorlds(): Promise<void> {
  await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
}

type Join<C> = (rank: number, masterPort: number, onListening?: (port: number) => void) => Promise<C>;

async function world<C extends Collective>(n: number, join: Join<C>): Promise<C[]> {
  let listening!: (port: number) => void;
  const port = new Promise<number>((r) => (listening = r));
  const first = join(0, 0, listening);
  const p = await Promise.race([port, first.then(() => 0)]);
  const all = await Promise.all([first, ...Array.from({ length: n - 1 }, (_, i) => join(i + 1, p))]);
  open.push(...all);
  return all;
}

/** N ranks of the CPU backend; every call is bounded by 60 s (a stuck test fails naming the rank instead of hanging). */
export function localWorld(n: number, over: Partial<TcpCollectiveOptions> = {}): Promise<TcpCollective[]> {
  return world(n, (rank, masterPort, onListening) => TcpCollective.create({ rank, worldSize: n, masterAddr: '127.0.0.1', masterPort, connectTimeoutMs: 20_000, timeoutMs: 60_000, onListening, ...over }));
}

/**
 * N ranks of the NCCL backend on device -1 (host buffers): only with the fake library loaded
 * (MURPHY_NCCL = test/helpers/fake-nccl.ts's build, findNccl({ install: true })). At most 3
 * ranks: each waiting call holds a libuv worker thread.
 */
export function ncclLocalWorld(n: number, over: Partial<NcclCollectiveOptions> = {}): Promise<NcclCollective[]> {
  return world(n, (rank, masterPort, onListening) => NcclCollective.create({ rank, worldSize: n, masterAddr: '127.0.0.1', masterPort, device: -1, connectTimeoutMs: 20_000, timeoutMs: 60_000, onListening, ...over }));
}

/**
 * Registers the file's hooks for the fake NCCL: before, builds it under root/fake and loads it
 * (MURPHY_NCCL), the fake writing every call to `log` (FAKE_NCCL_LOG) when one is given; after,
 * closes every world and runs cleanup.
 */
export function useFakeNccl(root: string, cleanup: () => void, opts: { log?: string } = {}): void {
  before(() => {
    if (opts.log !== undefined) process.env.FAKE_NCCL_LOG = opts.log;
    process.env.MURPHY_NCCL = buildFakeNccl(join(root, 'fake', 'libnccl.so.2'));
    const r = findNccl({ install: true });
    assert.equal(r.found, true, r.reason);
  });
  after(async () => {
    await closeWorlds();
    cleanup();
  });
}

/**
 * A GRPO batch of `seqs` random sequences (6-15 tokens, the first of each masked) for the
 * ZeRO-1 tests. Advantages alternate in sign: the random model's log-probs sit far below
 * oldLogp, so a batch of only negative advantages would be clipped everywhere (zero gradient,
 * nothing for ZeRO-1 to clip).
 */
export function zeroTestBatch(rng: Rng, seqs: number, vocab: number): TrainBatch {
  const lens = Array.from({ length: seqs }, () => 6 + rng.int(10));
  const T = lens.reduce((a, b) => a + b, 0);
  const seqOffsets = new Int32Array(seqs + 1);
  lens.forEach((l, i) => (seqOffsets[i + 1] = seqOffsets[i]! + l));
  const tokens = Int32Array.from({ length: T }, () => rng.int(vocab));
  const mask = Uint8Array.from({ length: T }, (_, t) => (seqOffsets.includes(t) ? 0 : 1));
  const adv = new Float32Array(T);
  for (let s = 0; s < seqs; s++) adv.fill((s % 2 === 0 ? 1 : -1) * rng.uniform(0.1, 1), seqOffsets[s]!, seqOffsets[s + 1]!);
  const oldLogp = Float32Array.from({ length: T }, () => -1 - rng.uniform(0, 3));
  return { tokens, seqOffsets, mask, advantages: adv, oldLogp };
}

/** The ZeRO-1 tests' AdamW settings: a clip bound small enough that clipping is active. */
export const ZERO_HYPER = { lr: 1e-2, maxGradNorm: 1e-3, weightDecay: 0.1, beta1: 0.9, beta2: 0.999 };
/** The ZeRO-1 tests' loss: DAPO token-level, PPO clip 0.2 both sides, no KL term. */
export const ZERO_LOSS = { epsLow: 0.2, epsHigh: 0.2, beta: 0, lossType: 'dapo' as const };

/** `n` emulated tiny engines; rank 1.. from other seeds than rank 0 (DistributedPolicy.create broadcasts rank 0's weights). */
export function zeroTestModels(n: number, storage: 'f32' | 'bf16'): Promise<PolicyModel[]> {
  return Promise.all(Array.from({ length: n }, (_, r) => PolicyModel.random('tiny', { seed: r === 0 ? 3 : 90 + r, device: 'emulate', storage })));
}

/** The calls the fake NCCL logged for rank r (its lines end with " rank=R"), without that tail. */
export function fakeNcclCalls(log: string, r: number): string[] {
  return readFileSync(log, 'utf8').split('\n').filter((l) => l.endsWith(` rank=${r}`)).map((l) => l.slice(0, -` rank=${r}`.length));
}

/**
 * The calls one ZeRO-1 step of `world` ranks makes, as the fake NCCL logs them, worked out from
 * the plans (lib/dist/shards.ts, buckets.ts), never from the engine. reductions: per bucket,
 * last first, a reduce-scatter where the shards split it evenly, else an all-reduce (bf16
 * gradients: dtype 7, sum); step: those, the f64 gradient norm's all-reduce (dtype 8), then per
 * bucket, first first, an all-gather where even, else a broadcast from each rank that owns part
 * of it (f32 parameters: dtype 9). parts: each bucket's element count on each rank.
 */
export function zeroStepCalls(modelParams: readonly { name: string; numel: number }[], world: number, bucketBytes: number): {
  params: FlatParam[]; buckets: Bucket[]; parts: number[][]; reductions: string[]; step: string[];
} {
  const { params, total } = flatLayout(modelParams);
  const shards = planShards(total, world);
  const buckets = planBuckets(params, bucketBytes, 4);
  const parts = buckets.map((b) => rangeCounts(shards, b.begin, b.end));
  const even = (c: number[]) => c.every((n) => n === c[0]);
  const reduce = (c: number[], k: number) => (even(c)
    ? `reduceScatter count=${c[0]} dtype=7 op=0 root=-1`
    : `allReduce count=${buckets[k]!.end - buckets[k]!.begin} dtype=7 op=0 root=-1`);
  const gather = (c: number[]) => (even(c)
    ? [`allGather count=${c[0]} dtype=9 op=-1 root=-1`]
    : c.flatMap((n, r) => (n > 0 ? [`broadcast count=${n} dtype=9 op=-1 root=${r}`] : [])));
  const reductions = parts.map(reduce).reverse();
  return { params, buckets, parts, reductions, step: [...reductions, 'allReduce count=1 dtype=8 op=0 root=-1', ...parts.flatMap(gather)] };
}
