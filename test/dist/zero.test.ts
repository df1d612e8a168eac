// ZeRO-1 on the CPU engine: two ranks (in one process, loopback TCP) that each accumulate half
// of a batch and step their shards match one model that accumulates the whole batch (within
// float tolerance: the gradient sums run in another order), with clipping and weight decay, in
// small buckets; both ranks hold bit-identical weights; a checkpoint written by 2 ranks loads
// on 2 ranks (each its own shard), on 3 and on 1 (re-sharding) with the same moments, bit for bit.
// ZeRO-1 on the device engine (emulate: its HostBackend, bf16 storage) through the same
// PolicyEngine interface: two ranks match one device-engine model that steps with its own AdamW.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SoloCollective } from '../../lib/dist/collective.js';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { PolicyModel } from '../../lib/model/index.js';
import { setNumThreads } from '../../lib/native.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng, testSeed } from '../helpers/random.js';
import { closeWorlds, localWorld, ZERO_HYPER as hyper, ZERO_LOSS as loss, zeroTestBatch } from './helpers.js';

const seed = testSeed('dist/zero');
// Two ranks share this process (and the CPU with other test files): one kernel thread.
setNumThreads(1);
const root = mkdtempSync(join(tmpdir(), 'murphy-zero-'));
after(() => rmSync(root, { recursive: true, force: true }));

const batch = zeroTestBatch;


after(closeWorlds);

/**
 * `steps` steps of one model (ref) on a whole batch (aSeqs + 2 sequences) and of two ZeRO-1
 * ranks with one half each: the ranks' gradient norms are equal and within 1e-5 of ref's, the
 * global-norm clip acts, and both ranks hold identical weights. Returns max |w_rank - w_ref|.
 */
async function stepLikeOne(rng: Rng, ref: PolicyModel, models: PolicyModel[], dps: DistributedPolicy[], steps: number, aSeqs: number): Promise<number> {
  const V = ref.info.vocabSize;
  const names = ref.params().map((p) => p.name);
  let worst = 0;
  for (let step = 0; step < steps; step++) {
    const a = batch(rng, aSeqs, V), b = batch(rng, 2, V);
    await ref.accumulate(a, loss, 0.5);
    await ref.accumulate(b, loss, 0.5);
    const r1 = await ref.optimizerStep(hyper);
    await models[0]!.accumulate(a, loss, 0.5);
    await models[1]!.accumulate(b, loss, 0.5);
    const rs = await Promise.all(dps.map((d) => d.optimizerStep(hyper)));
    assert.equal(rs[0]!.gradNorm, rs[1]!.gradNorm);
    assert.ok(Math.abs(rs[0]!.gradNorm - r1.gradNorm) <= 1e-5 * r1.gradNorm, `grad norm ${rs[0]!.gradNorm} vs ${r1.gradNorm}`);
    assert.ok(rs[0]!.clipCoef < 1);
    for (const n of names) {
      const w0 = models[0]!.getParam(n), w1 = models[1]!.getParam(n), wr = ref.getParam(n);
      assert.deepEqual(w0, w1, `${n}: ranks differ`);
      for (let i = 0; i < wr.length; i++) worst = Math.max(worst, Math.abs(w0[i]! - wr[i]!));
    }
  }
  return worst;
}

describe('ZeRO-1 on the CPU engine', () => {
  it('two ranks with half a batch each step like one process with the whole batch; checkpoints re-shard', async () => {
    const rng = new Rng(seed);
    const ref = await PolicyModel.random('tiny', { seed: 3 });
    const models = [await PolicyModel.random('tiny', { seed: 3 }), await PolicyModel.random('tiny', { seed: 99 })];
    const world = await localWorld(2);
    // rank 1 starts from other weights: create() broadcasts rank 0's
    const dps = await Promise.all(world.map((c, r) => DistributedPolicy.create(c, new NativePolicy(models[r]!), models[r]!, { bucketBytes: 8192 })));
    assert.ok(dps[0]!.buckets.length > 3);
    const names = ref.params().map((p) => p.name);
    const worst = await stepLikeOne(rng, ref, models, dps, 2, 3);
    // Adam's update is at most ~lr per element per step; summation order moves it far less.
    assert.ok(worst <= 1e-4, `max |w - w_ref| = ${worst}`);

    const dir = join(root, 'ck');
    const [info] = await Promise.all([dps[0]!.saveState(dir), dps[1]!.joinSave()]);
    assert.equal(info.optimizerState, true);
    assert.deepEqual(readdirSync(dir).filter((f) => f.startsWith('optimizer-shard')).sort(), ['optimizer-shard-00000-of-00002.safetensors', 'optimizer-shard-00001-of-00002.safetensors']);
    const cat = (xs: Float32Array[]) => Float32Array.from(xs.flatMap((x) => Array.from(x)));
    const before = dps.map((d) => d.shardState());
    await Promise.all(world.map((c) => c.close()));

    // the same world size: each rank reads its own shard back, bit for bit
    const w2 = await localWorld(2);
    const m2 = await Promise.all(w2.map(() => PolicyModel.random('tiny', { seed: 5 })));
    const d2 = await Promise.all(w2.map((c, r) => DistributedPolicy.create(c, new NativePolicy(m2[r]!), m2[r]!)));
    await Promise.all(d2.map((d) => d.loadState(dir)));
    assert.deepEqual(d2.map((d) => d.shardState()), before);
    await Promise.all(w2.map((c) => c.close()));

    const w3 = await localWorld(3);
    const m3 = await Promise.all(w3.map(() => PolicyModel.random('tiny', { seed: 7 })));
    const d3 = await Promise.all(w3.map((c, r) => DistributedPolicy.create(c, new NativePolicy(m3[r]!), m3[r]!)));
    await Promise.all(d3.map((d) => d.loadState(dir)));
    const after3 = d3.map((d) => d.shardState());
    assert.deepEqual(cat(after3.map((s) => s.m)), cat(before.map((s) => s.m)));
    assert.deepEqual(cat(after3.map((s) => s.v)), cat(before.map((s) => s.v)));
    assert.deepEqual(cat(after3.map((s) => s.master)), cat(before.map((s) => s.master)));
    assert.ok(after3.every((s) => s.step === 2));
    for (const n of names) assert.deepEqual(m3[2]!.getParam(n), models[0]!.getParam(n));
    await Promise.all(w3.map((c) => c.close()));

    const m1 = await PolicyModel.random('tiny', { seed: 8 });
    const d1 = await DistributedPolicy.create(new SoloCollective(), new NativePolicy(m1), m1);
    await d1.loadState(dir);
    assert.deepEqual(d1.shardState().m, cat(before.map((s) => s.m)));
  });
});

describe('ZeRO-1 on the device engine (emulate)', () => {
  // The gradients differ from the one model's by their summation order only (each rank's half,
  // then across ranks). f32 storage: two steps, the weights within 1e-5 (Adam's update is up to
  // lr = 1e-2 an element; measured <= 7e-7 in 4 seeds). bf16 storage: one step, within 1e-6
  // (measured <= 1.2e-7); later steps are not comparable element by element, since a master
  // weight that differs by an ulp can round to the neighbouring bf16 compute weight.
  for (const [storage, steps] of [['f32', 2], ['bf16', 1]] as const) {
    it(`${storage} storage: two ranks with half a batch each step like one device-engine model with the whole batch (${steps} step${steps > 1 ? 's' : ''})`, async () => {
      const rng = new Rng(seed + 1);
      const emu = { device: 'emulate' as const, storage };
      const ref = await PolicyModel.random('tiny', { seed: 3, ...emu });
      const models = [await PolicyModel.random('tiny', { seed: 3, ...emu }), await PolicyModel.random('tiny', { seed: 99, ...emu })];
      const world = await localWorld(2);
      const dps = await Promise.all(world.map((c, r) => DistributedPolicy.create(c, new NativePolicy(models[r]!), models[r]!, { bucketBytes: 8192 })));
      const V = ref.info.vocabSize;
      const worst = await stepLikeOne(rng, ref, models, dps, steps, 2);
      assert.ok(worst <= (storage === 'f32' ? 1e-5 : 1e-6), `max |w - w_ref| = ${worst}`);
      // the compute copies (bf16: refreshed from the gathered master weights) score alike on both ranks
      const probe = batch(rng, 2, V);
      const [s0, s1] = await Promise.all([models[0]!.score(probe), models[1]!.score(probe)]);
      assert.deepEqual(s0, s1);
      await Promise.all(world.map((c) => c.close()));
    });
  }
});
