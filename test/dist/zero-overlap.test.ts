// ZeRO-1's gradient reductions overlapped with the backward pass (native/gpu/engine/zero_shard.h,
// lib/dist/zero.ts accumulate(..., { last: true }) and reduceGradients()), without a GPU:
// emulated engines over the tests' fake NCCL (test/helpers/fake-nccl.ts: the communicators of
// one id form a world in this process and reduce in rank order), two ranks on libuv worker
// threads. The emulated device has no real concurrency: a started call completes when every
// rank has posted it (the fake computes it then), so what these tests show is where and in which
// order the calls are issued and that the numbers do not change, not that anything runs at
// the same time (that needs GPUs: test/gpu/zero-overlap.test.ts).
//   - Equality: with the overlap the shards (master, moments), the weights and the reported
//     gradient norms and clip coefficients after several steps are bit for bit those of the
//     reference (every reduction after the backward), for a bucket smaller than one layer, one
//     larger than the model and an odd size, with gradient accumulation (2 micro-batches on
//     rank 0) and a rank without micro-batches in a step (it starts every reduction from
//     reduceGradients()). Bitwise, because the overlap issues the same calls on the same
//     gradients (the fake sums in rank order either way); global-norm clipping acts (coef < 1).
//   - The calls the fake sees: none during the micro-batches before the last; after the last
//     backward (before the step) each rank's reductions in reverse bucket order, the plan's
//     (computed here from lib/dist/shards.ts and buckets.ts, not from the engine); then the
//     step's norm and gathers.
//   - The timeline of the starts (the engine's trace): each bucket is started at the first point
//     of the backward where all its gradients are final, computed here from the layout (after the
//     head and final norm, after each layer from the last, after the embedding).
//   - Refusals (the CPU engine, before zeroInit), and a peer that never reaches its last
//     backward: the started call is aborted at the deadline and the accumulate rejects naming it.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { flatLayout, reduceBucketBytes, REDUCE_BUCKET_MB, type Bucket } from '../../lib/dist/buckets.js';
import type { NcclCollective } from '../../lib/dist/nccl-collective.js';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { PolicyModel, type TrainBatch } from '../../lib/model/index.js';
import { setNumThreads } from '../../lib/native.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng, testSeed } from '../helpers/random.js';
import { closeWorlds, fakeNcclCalls, ncclLocalWorld, useFakeNccl, ZERO_HYPER as hyper, ZERO_LOSS as loss, zeroStepCalls, zeroTestBatch, zeroTestModels } from './helpers.js';

const seed = testSeed('dist/zero-overlap');
setNumThreads(1);
const root = mkdtempSync(join(tmpdir(), 'murphy-zero-ovl-'));
useFakeNccl(root, () => rmSync(root, { recursive: true, force: true }));


interface Ranks { models: PolicyModel[]; dps: DistributedPolicy[] }

async function ranks(world: NcclCollective[], bucketBytes: number, overlap: boolean): Promise<Ranks> {
  const models = await zeroTestModels(world.length, 'bf16');
  const dps = await Promise.all(world.map((c, r) => DistributedPolicy.create(c, new NativePolicy(models[r]!), models[r]!, { bucketBytes, overlap })));
  return { models, dps };
}

/**
 * One step as the training loop runs it on each rank: its micro-batches (the last marked), then
 * reduceGradients(), then the step; the ranks run concurrently (each rank's last backward waits
 * in the fake for the other rank's matching call).
 */
async function step(x: Ranks, parts: TrainBatch[][]) {
  return Promise.all(x.dps.map(async (d, r) => {
    const mine = parts[r]!;
    for (const [j, b] of mine.entries()) await d.accumulate(b, loss, 0.5, { last: j === mine.length - 1 });
    await d.reduceGradients();
    return d.optimizerStep(hyper);
  }));
}

/** Rank 0 two micro-batches and rank 1 one; at step 2 rank 1 none (it starts every reduction from reduceGradients). */
function stepParts(rng: Rng, s: number, V: number): TrainBatch[][] {
  return [[zeroTestBatch(rng, 2, V), zeroTestBatch(rng, 1, V)], s === 1 ? [] : [zeroTestBatch(rng, 2, V)]];
}

describe('ZeRO-1: gradient reductions overlapped with the backward pass (emulate + fake NCCL)', () => {
  const tiny = { small: 8192, huge: 1 << 30, odd: 12_347 };
  for (const [name, bytes] of Object.entries(tiny)) {
    it(`bucket ${name} (${bytes} bytes): 3 steps bit for bit the reference's`, async () => {
      const rng = new Rng(seed + bytes);
      const ovl = await ranks(await ncclLocalWorld(2), bytes, true);
      const ref = await ranks(await ncclLocalWorld(2), bytes, false);
      assert.ok(ovl.dps[0]!.overlapping && !ref.dps[0]!.overlapping);
      const { params } = flatLayout(ovl.models[0]!.params());
      const layer = params.filter((p) => p.name.startsWith('model.layers.0.')).reduce((a, p) => a + 4 * p.numel, 0);
      const total = params.reduce((a, p) => a + 4 * p.numel, 0);
      if (name === 'small') assert.ok(bytes < layer, `a bucket (${bytes}) smaller than one layer (${layer} bytes)`);
      if (name === 'huge') assert.equal(ovl.dps[0]!.buckets.length, 1, `one bucket for the model (${total} bytes)`);
      const V = ovl.models[0]!.info.vocabSize;
      for (let s = 0; s < 3; s++) {
        const parts = stepParts(rng, s, V);
        const ro = await step(ovl, parts);
        const rr = await step(ref, parts);
        assert.deepEqual(ro, rr, `step ${s + 1}: gradient norms, clip coefficients`);
        assert.ok(ro[0]!.clipCoef < 1, 'the global-norm clip acts');
        for (let r = 0; r < 2; r++) assert.deepEqual(ovl.dps[r]!.shardState(), ref.dps[r]!.shardState(), `rank ${r} shard after step ${s + 1}`);
        for (const p of ovl.models[0]!.params()) {
          const w = ovl.models[0]!.getParam(p.name);
          assert.deepEqual(ref.models[0]!.getParam(p.name), w, p.name);
          assert.deepEqual(ovl.models[1]!.getParam(p.name), w, p.name);
        }
      }
      await closeWorlds();
    });
  }

  it('the calls: nothing before the last micro-batch, then the plan\'s reductions in reverse bucket order from the backward, started where the layout says', async () => {
    const rng = new Rng(seed + 7);
    const BUCKET = 8192;
    const x = await ranks(await ncclLocalWorld(2), BUCKET, true);
    const V = x.models[0]!.info.vocabSize;
    const log = join(root, 'ops.log');
    const lines = (r: number): string[] => fakeNcclCalls(log, r);
    writeFileSync(log, '');
    process.env.FAKE_NCCL_LOG = log;
    try {
      const [a, b, c] = [zeroTestBatch(rng, 2, V), zeroTestBatch(rng, 2, V), zeroTestBatch(rng, 2, V)];
      // gradient accumulation: the first micro-batch issues nothing
      await x.dps[0]!.accumulate(a, loss, 0.5, { last: false });
      assert.equal(readFileSync(log, 'utf8'), '', 'no collective before the last micro-batch');
      // the last micro-batch of each rank (together: each start waits for the other rank's)
      await Promise.all([x.dps[0]!.accumulate(b, loss, 0.5, { last: true }), x.dps[1]!.accumulate(c, loss, 0.5, { last: true })]);
      const afterBackward = [lines(0), lines(1)];
      await Promise.all(x.dps.map((d) => d.reduceGradients()));
      assert.deepEqual([lines(0), lines(1)], afterBackward, 'the backward started every reduction: reduceGradients has none left');
      await Promise.all(x.dps.map((d) => d.optimizerStep(hyper)));

      // the expected calls, from the plans (not from the engine)
      const { params, buckets, reductions, step } = zeroStepCalls(x.models[0]!.params(), 2, BUCKET);
      assert.ok(buckets.length > 3);
      for (let r = 0; r < 2; r++) {
        assert.deepEqual(afterBackward[r], reductions, `rank ${r}: the reductions, issued by the backward`);
        assert.deepEqual(lines(r), step, `rank ${r}: the whole step`);
      }

      // the timeline: bucket k (from the last) starts at the first frontier f of the backward
      // (after the head and final norm, after layer L-1, ..., layer 0, after the embedding) with
      // every gradient from f on final, i.e. the first f <= its begin
      const begin = (prefix: string) => params.find((p) => p.name.startsWith(prefix))!.offset;
      const nLayers = new Set(params.filter((p) => p.name.startsWith('model.layers.')).map((p) => p.name.split('.')[2])).size;
      const frontiers = [begin('model.norm.'), ...Array.from({ length: nLayers }, (_, i) => begin(`model.layers.${nLayers - 1 - i}.`)), 0];
      const startAt = (bk: Bucket) => frontiers.find((f) => f <= bk.begin)!;
      const want = [...buckets].reverse().map(startAt);
      for (let r = 0; r < 2; r++) assert.deepEqual(x.models[r]!.zeroOverlapTrace(), { starts: want, timelineMs: null }, `rank ${r}: where each bucket started`);
      assert.ok(new Set(want).size > 2, 'the buckets start at several points of the backward');
    } finally {
      delete process.env.FAKE_NCCL_LOG;
    }
    await closeWorlds();
  });

  it('refusals, and a peer that never reaches its last backward: the deadline aborts the started call (an error, not a hang)', async () => {
    const [solo] = await ncclLocalWorld(1);
    const cpu = await PolicyModel.random('tiny', { seed: 1 });
    await assert.rejects(solo!.exclusive('accumulate', async (comm, ms) => cpu.zeroOverlapNext(comm.handle, ms)), (e: Error & { code?: string }) => /device engines/.test(e.message));
    const emu = await PolicyModel.random('tiny', { seed: 1, device: 'emulate', storage: 'bf16' });
    await assert.rejects(solo!.exclusive('accumulate', async (comm, ms) => emu.zeroOverlapNext(comm.handle, ms)), /zeroOverlapNext: ZeRO-1 is not set up on this engine \(zeroInit first\)/);
    await closeWorlds();
    const x = await ranks(await ncclLocalWorld(2, { timeoutMs: 2000 }), 8192, true);
    const b = zeroTestBatch(new Rng(seed + 8), 2, x.models[0]!.info.vocabSize);
    await assert.rejects(x.dps[0]!.accumulate(b, loss, 0.5, { last: true }), /accumulate #\d+ on rank 0: NCCL nccl(ReduceScatter|AllReduce) did not complete within 2 s on rank 0 of 2: the communicator was aborted/);
    await closeWorlds();
  });

  it('the bucket size: one default and range, refused with one line outside it', () => {
    assert.equal(reduceBucketBytes(undefined), REDUCE_BUCKET_MB.default * 2 ** 20);
    assert.equal(reduceBucketBytes(4), 4);
    for (const bad of [0, 3, 1.5, REDUCE_BUCKET_MB.max * 2 ** 20 + 1, Number.NaN]) {
      assert.throws(() => reduceBucketBytes(bad), /ZeRO-1 bucket size .* bytes: must be a whole number of bytes from 4 .*; set reduceBucketMb \(--reduce-bucket-mb\)/);
    }
  });
});
