// ZeRO-1 on the device engine's own memory (lib/dist/zero-device.ts over
// native/gpu/engine/zero_shard.h), without a GPU: emulated engines (HostBackend: "device"
// memory on the host) and the NCCL backend over the tests' fake libnccl (test/helpers/
// fake-nccl.ts: the communicators of one id form a world in this process, reduce in rank order
// and compute on host pointers), two ranks on libuv worker threads.
//   - The device path (reduce-scatter from the engine's gradient buffer, norm, AdamW on the
//     shard, all-gather of the compute weights, all native) gives bit for bit the shards
//     (master, moments) of the host path (per-parameter host copies) on the same batches, the
//     same compute weights (scores), and, like the host path, matches one engine stepping on
//     the summed gradients within test/dist/zero.test.ts's tolerances. World size 1 runs the
//     in-place collectives (equal parts).
//   - The calls the fake sees, computed here from the shard and bucket plans: in reverse bucket
//     order a reduce-scatter of each bucket with equal parts, an all-reduce of any other; one f64
//     all-reduce (the norm); then in bucket order an all-gather of each bucket with equal parts,
//     a bf16 broadcast from each owning rank of any other.
//   - Checkpoints: a device-path checkpoint equals the host path's (master.safetensors, shards),
//     and loads on 2 ranks (device path, exact) and on 1 (host path, re-sharded).
//   - Refusals, one line each: the CPU engine, a step before zeroInit, a plan that does not
//     cover the model, a communicator of another world, the engine's own optimizer after
//     zeroInit; and a rank whose peer never steps: the deadline aborts the communicator.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SoloCollective, type Collective } from '../../lib/dist/collective.js';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { PolicyModel, type TrainBatch } from '../../lib/model/index.js';
import { setNumThreads } from '../../lib/native.js';
import { readSafetensorsF32 } from '../../lib/safetensors.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng, testSeed } from '../helpers/random.js';
import { closeWorlds, fakeNcclCalls, ncclLocalWorld, useFakeNccl, ZERO_HYPER as hyper, ZERO_LOSS as loss, zeroStepCalls, zeroTestBatch, zeroTestModels } from './helpers.js';

const seed = testSeed('dist/zero-device');
setNumThreads(1);
const root = mkdtempSync(join(tmpdir(), 'murphy-zero-dev-'));
useFakeNccl(root, () => rmSync(root, { recursive: true, force: true }));

const BUCKET = 8192;

const batch = zeroTestBatch;

type Storage = 'f32' | 'bf16';
interface Ranks { models: PolicyModel[]; dps: DistributedPolicy[] }

/** N emulated engines (rank 1.. from another seed: create() broadcasts rank 0's weights) wrapped by ZeRO-1 over `world`. */
async function ranks(world: Collective[], storage: Storage, device: boolean): Promise<Ranks> {
  const models = await zeroTestModels(world.length, storage);
  const dps = await Promise.all(world.map((c, r) => DistributedPolicy.create(c, new NativePolicy(models[r]!), models[r]!, { bucketBytes: BUCKET, device })));
  return { models, dps };
}

/** One step of every rank, rank r accumulating parts[r]. */
async function step(x: Ranks, parts: TrainBatch[]): Promise<{ gradNorm: number; clipCoef: number }[]> {
  for (let r = 0; r < x.models.length; r++) await x.models[r]!.accumulate(parts[r]!, loss, 0.5);
  return Promise.all(x.dps.map((d) => d.optimizerStep(hyper)));
}

const probeScores = (m: PolicyModel, b: TrainBatch) => m.score(b);

describe('ZeRO-1 on the device engine\'s memory (emulate + fake NCCL)', () => {
  for (const storage of ['f32', 'bf16'] as const) {
    it(`${storage} storage: 2 ranks equal the host path bit for bit and one engine within tolerance`, async () => {
      const rng = new Rng(seed + (storage === 'f32' ? 0 : 1));
      const dev = await ranks(await ncclLocalWorld(2), storage, true);
      const host = await ranks(await ncclLocalWorld(2), storage, false);
      assert.ok(dev.dps.every((d) => d.onDevice) && host.dps.every((d) => !d.onDevice));
      const ref = await PolicyModel.random('tiny', { seed: 3, device: 'emulate', storage });
      const V = ref.info.vocabSize;
      for (let s = 0; s < 2; s++) {
        const a = batch(rng, 2, V), b = batch(rng, 2, V);
        await ref.accumulate(a, loss, 0.5);
        await ref.accumulate(b, loss, 0.5);
        const r1 = await ref.optimizerStep(hyper);
        const rd = await step(dev, [a, b]);
        const rh = await step(host, [a, b]);
        assert.equal(rd[0]!.gradNorm, rd[1]!.gradNorm);
        assert.ok(Math.abs(rd[0]!.gradNorm - rh[0]!.gradNorm) <= 1e-12 * rh[0]!.gradNorm, `grad norm ${rd[0]!.gradNorm} vs host ${rh[0]!.gradNorm}`);
        // against one engine: zero.test.ts's comparisons (bf16: the first step only; after it a
        // master weight an ulp away can round to another bf16 compute weight)
        const vsOne = storage === 'f32' || s === 0;
        if (vsOne) assert.ok(Math.abs(rd[0]!.gradNorm - r1.gradNorm) <= 1e-5 * r1.gradNorm, `grad norm ${rd[0]!.gradNorm} vs one engine ${r1.gradNorm}`);
        assert.ok(rd[0]!.clipCoef < 1, 'the global-norm clip acts');
        // the shards: bit for bit the host path's
        for (let r = 0; r < 2; r++) {
          const d = dev.dps[r]!.shardState(), h = host.dps[r]!.shardState();
          assert.deepEqual(d, h, `rank ${r} shard after step ${s + 1}`);
          assert.equal(d.step, s + 1);
        }
        // every rank's model is the same, and computes as the host path's (the compute copies)
        for (const p of dev.models[0]!.params()) assert.deepEqual(dev.models[1]!.getParam(p.name), dev.models[0]!.getParam(p.name), p.name);
        const probe = batch(rng, 2, V);
        const [sd0, sd1, sh0] = await Promise.all([probeScores(dev.models[0]!, probe), probeScores(dev.models[1]!, probe), probeScores(host.models[0]!, probe)]);
        assert.deepEqual(sd0, sd1);
        assert.deepEqual(sd0, sh0);
        // the weights (f32: every step within 1e-5; bf16: the first within 1e-6)
        if (vsOne) {
          const full = new Float32Array(dev.dps[0]!.total);
          for (const d of dev.dps) { const st = d.shardState(); full.set(st.master, st.range.begin); }
          let worst = 0;
          for (const p of dev.dps[0]!.layout) {
            const w = ref.getParam(p.name);
            for (let i = 0; i < p.numel; i++) worst = Math.max(worst, Math.abs(full[p.offset + i]! - w[i]!));
          }
          assert.ok(worst <= (storage === 'f32' ? 1e-5 : 1e-6), `max |w - w_ref| = ${worst}`);
        }
      }
      // memory: each rank keeps its shard's moments only; with bf16 storage the full fp32 master
      // is released (the compute copy's 2 bytes a parameter remain) and the shard's master is kept
      const total = dev.dps[0]!.total, shard = dev.dps[0]!.range.end - dev.dps[0]!.range.begin;
      const md = dev.models[0]!.memory(), mh = host.models[0]!.memory();
      assert.equal(md.weights, storage === 'bf16' ? 2 * total : 4 * total);
      assert.equal(mh.weights, storage === 'bf16' ? 6 * total : 4 * total);
      assert.equal(md.optimizer, (storage === 'bf16' ? 12 : 8) * shard, `optimizer memory (shard ${shard} of ${total})`);
      if (storage === 'bf16') {
        // the model's weights are the gathered bf16 ones (widened): every value is a bf16
        const w = dev.models[0]!.getParam(dev.models[0]!.params()[0]!.name);
        const u = new Uint32Array(w.buffer, w.byteOffset, w.length);
        assert.ok(u.every((x) => (x & 0xffff) === 0));
      }
      await closeWorlds();
    });
  }

  it('world size 1 (equal parts: in-place collectives) equals the host path', async () => {
    const rng = new Rng(seed + 2);
    const [c] = await ncclLocalWorld(1);
    const dev = await ranks([c!], 'bf16', true);
    const host = await ranks([new SoloCollective()], 'bf16', false);
    assert.ok(dev.dps[0]!.onDevice);
    const V = dev.models[0]!.info.vocabSize;
    for (let s = 0; s < 2; s++) {
      const a = batch(rng, 3, V);
      const [rd] = await step(dev, [a]);
      const [rh] = await step(host, [a]);
      assert.ok(Math.abs(rd!.gradNorm - rh!.gradNorm) <= 1e-12 * rh!.gradNorm);
      assert.deepEqual(dev.dps[0]!.shardState(), host.dps[0]!.shardState());
    }
    await closeWorlds();
  });

  it('the calls NCCL sees: reduce-scatters or all-reduces in reverse bucket order, the f64 norm, all-gathers or broadcasts in order', async () => {
    const rng = new Rng(seed + 3);
    const world = await ncclLocalWorld(2);
    const x = await ranks(world, 'bf16', true);
    const V = x.models[0]!.info.vocabSize;
    const log = join(root, 'ops.log');
    process.env.FAKE_NCCL_LOG = log;
    try {
      await step(x, [batch(rng, 2, V), batch(rng, 2, V)]);
    } finally {
      delete process.env.FAKE_NCCL_LOG;
    }
    // the expected calls, from the plans (lib/dist/shards.ts, buckets.ts), not from the engine
    const { buckets, parts, step: want } = zeroStepCalls(x.models[0]!.params(), 2, BUCKET);
    assert.ok(buckets.length > 3);
    assert.ok(parts.some((c) => c.filter((x) => x > 0).length > 1), 'some bucket straddles two shards');
    for (let r = 0; r < 2; r++) assert.deepEqual(fakeNcclCalls(log, r), want, `rank ${r}`);
    await closeWorlds();
  });

  it('checkpoints: the device path writes what the host path writes, and resumes on 2 ranks (exact) and on 1 (re-sharded)', async () => {
    const rng = new Rng(seed + 4);
    const dev = await ranks(await ncclLocalWorld(2), 'bf16', true);
    const host = await ranks(await ncclLocalWorld(2), 'bf16', false);
    const V = dev.models[0]!.info.vocabSize;
    for (let s = 0; s < 2; s++) {
      const a = batch(rng, 2, V), b = batch(rng, 2, V);
      await step(dev, [a, b]);
      await step(host, [a, b]);
    }
    const dd = join(root, 'ck-dev'), dh = join(root, 'ck-host');
    await Promise.all([dev.dps[0]!.saveState(dd), dev.dps[1]!.joinSave()]);
    await Promise.all([host.dps[0]!.saveState(dh), host.dps[1]!.joinSave()]);
    for (const f of ['master.safetensors', 'optimizer-shard-00000-of-00002.safetensors', 'optimizer-shard-00001-of-00002.safetensors']) {
      const a = readSafetensorsF32(join(dd, f)), b = readSafetensorsF32(join(dh, f));
      assert.deepEqual(a.metadata, b.metadata, f);
      for (const [n, t] of Object.entries(b.tensors)) assert.deepEqual(a.tensors[n]!.data, t.data, `${f} ${n}`);
    }
    const before = dev.dps.map((d) => d.shardState());
    const probe = batch(rng, 2, V);
    const scores = await dev.models[0]!.score(probe);

    // the same world size on the device path: each rank its own shard, the same model, and the
    // next step the same as the uninterrupted run's
    const again = await ranks(await ncclLocalWorld(2), 'bf16', true);
    await Promise.all(again.dps.map((d) => d.loadState(dd)));
    assert.deepEqual(again.dps.map((d) => d.shardState()), before);
    assert.deepEqual(await again.models[1]!.score(probe), scores);
    const a = batch(rng, 2, V), b = batch(rng, 2, V);
    await step(again, [a, b]);
    await step(dev, [a, b]);
    assert.deepEqual(again.dps.map((d) => d.shardState()), dev.dps.map((d) => d.shardState()));
    await closeWorlds();

    // one rank, host path: re-sharded from the two shards
    const one = await ranks([new SoloCollective()], 'bf16', false);
    await one.dps[0]!.loadState(dd);
    const st = one.dps[0]!.shardState();
    assert.deepEqual(st.m, Float32Array.from([...before[0]!.m, ...before[1]!.m]));
    assert.deepEqual(st.master, Float32Array.from([...before[0]!.master, ...before[1]!.master]));
    assert.equal(st.step, 2);
  });
});

describe('ZeRO-1 on the device engine: refusals and the deadline', () => {
  it('refuses the CPU engine, a step before zeroInit, a bad plan, another world, and the engine\'s own optimizer after zeroInit', async () => {
    const cpu = await PolicyModel.random('tiny', { seed: 1 });
    const total = cpu.params().reduce((a, p) => a + p.numel, 0);
    const plan = { rank: 0, worldSize: 1, shards: [0, total], buckets: [0, total] };
    assert.throws(() => cpu.zeroInit(plan), (e: Error & { code?: string }) => e.code === 'ENOTSUP' && /device engines/.test(e.message));
    const emu = await PolicyModel.random('tiny', { seed: 1, device: 'emulate', storage: 'bf16' });
    assert.throws(() => emu.zeroShard(), /zeroInit first/);
    assert.throws(() => emu.zeroInit({ ...plan, shards: [0, total - 1] }), /shard plan must run from 0 to the model's/);
    assert.throws(() => emu.zeroInit({ ...plan, buckets: [0, 10, 10, total] }), /bucket plan bounds must increase/);
    emu.zeroInit(plan);
    assert.equal(emu.zeroShard().master.length, total);
    await assert.rejects(emu.optimizerStep(hyper), /sharded \(ZeRO-1/);
    assert.throws(() => emu.optimizerState(), /sharded \(ZeRO-1/);
    const world = await ncclLocalWorld(2);
    await assert.rejects(world[0]!.exclusive('zeroStep', (comm, ms) => emu.zeroStep(comm.handle, hyper, ms)), /the communicator is rank 0 of 2, the shard plan rank 0 of 1/);
    await closeWorlds();
  });

  it('a rank whose peer never steps: its collective is aborted at the deadline and the step rejects naming it', async () => {
    const world = await ncclLocalWorld(2, { timeoutMs: 2000 });
    const x = await ranks(world, 'f32', true);
    await x.models[0]!.accumulate(batch(new Rng(seed + 5), 2, x.models[0]!.info.vocabSize), loss);
    await assert.rejects(x.dps[0]!.optimizerStep(hyper), /zeroStep #\d+ on rank 0: NCCL ncclAllReduce did not complete within 2 s on rank 0 of 2: the communicator was aborted/);
    await closeWorlds();
  });
});
