// The NCCL backend of lib/dist's collective interface on a device, world size 1 (npm run
// gpu:check): NcclCollective stages host arrays through device buffers (several sizes, more
// than its staging cache keeps, so buffers are evicted and reallocated) and every call is checked
// against the host result (with one rank: the input itself, bit for bit): all-reduce sum and max
// of f32 and f64, reduce-scatter and all-gather with counts, broadcast of bytes and floats,
// barrier, the JSON helpers, and a ZeRO-1 step over it equal to one over SoloCollective.
// Skipped without a device or without NCCL, saying why. MURPHY_GPU_DRYRUN=1 runs the same logic
// on host buffers (device -1) through the fake libnccl (test/helpers/fake-nccl.ts): it checks
// the test code, not NCCL. Written without a GPU: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allGatherJson, broadcastJson, SoloCollective } from '../../lib/dist/collective.js';
import { NcclCollective } from '../../lib/dist/nccl-collective.js';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { PolicyModel } from '../../lib/model/index.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, dryRun } from './common.js';
import { deviceNccl } from './nccl-setup.js';
import { ZERO_HYPER as hyper, ZERO_LOSS as loss } from '../dist/helpers.js';

const rng = new Rng(announceSeed('gpu/nccl-collective'));
const { nccl, skip } = deviceNccl('murphy-gpu-nccl-coll-');
if (nccl?.found) console.log(`# gpu/nccl-collective: NCCL ${nccl.versionText} from ${nccl.path} (${nccl.origin})${dryRun ? ' (the fake: dry run)' : ''}`);

const create = () => NcclCollective.create({ rank: 0, worldSize: 1, masterAddr: '127.0.0.1', masterPort: 0, device: dryRun ? -1 : 0, connectTimeoutMs: 60_000, timeoutMs: 60_000 });

describe('NCCL collective on the device, world size 1', () => {
  it('every call of the interface equals the host result, over buckets of several sizes', { skip }, async () => {
    const c = await create();
    try {
      const sizes = [1, 7 + rng.int(64), 1000 + rng.int(1000), (1 << 20) + rng.int(1 << 16), 3 + rng.int(5), 4096];
      for (const n of sizes) {
        for (const Arr of [Float32Array, Float64Array]) {
          const x = Arr.from(Array.from({ length: n }, () => rng.normal() * 10 ** rng.int(6)));
          for (const op of ['sum', 'max'] as const) {
            const b = x.slice();
            await c.allReduce(b, op);
            assert.deepEqual(b, x, `allReduce ${op} ${Arr.name} n=${n}`);
          }
          const o = new Arr(n);
          await c.reduceScatter(x, o, { counts: [n] });
          assert.deepEqual(o, x, `reduceScatter ${Arr.name} n=${n}`);
          const g = new Arr(n);
          await c.allGather(x, g, [n]);
          assert.deepEqual(g, x, `allGather ${Arr.name} n=${n}`);
          const bc = x.slice();
          await c.broadcast(bc, 0);
          assert.deepEqual(bc, x, `broadcast ${Arr.name} n=${n}`);
        }
        const bytes = Uint8Array.from({ length: n }, () => rng.int(256));
        const bb = bytes.slice();
        await c.broadcast(bb, 0);
        assert.deepEqual(bb, bytes, `broadcast bytes n=${n}`);
      }
      await c.barrier();
      assert.deepEqual(await allGatherJson(c, { a: [1, 'x'] }), [{ a: [1, 'x'] }]);
      assert.deepEqual(await broadcastJson(c, { dir: '/r' }), { dir: '/r' });
    } finally {
      await c.close();
    }
  });

  it('a ZeRO-1 step over NCCL equals one over the one-rank host collective', { skip }, async () => {
    const models = [await PolicyModel.random('tiny', { seed: 3 }), await PolicyModel.random('tiny', { seed: 3 })];
    const T = 20;
    const V = models[0]!.info.vocabSize;
    const b = {
      tokens: Int32Array.from({ length: T }, () => rng.int(V)), seqOffsets: Int32Array.from([0, 9, T]),
      mask: Uint8Array.from({ length: T }, (_, t) => (t === 0 || t === 9 ? 0 : 1)),
      advantages: Float32Array.from({ length: T }, (_, t) => (t < 9 ? 1 : -0.5)), oldLogp: new Float32Array(T).fill(-2),
    };
    const c = await create();
    try {
      const dps = [await DistributedPolicy.create(c, new NativePolicy(models[0]!), models[0]!, { bucketBytes: 8192 }),
        await DistributedPolicy.create(new SoloCollective(), new NativePolicy(models[1]!), models[1]!, { bucketBytes: 8192 })];
      for (const m of models) await m.accumulate(b, loss);
      const [r0, r1] = [await dps[0]!.optimizerStep(hyper), await dps[1]!.optimizerStep(hyper)];
      assert.equal(r0.gradNorm, r1.gradNorm);
      for (const p of models[0]!.params()) assert.deepEqual(models[0]!.getParam(p.name), models[1]!.getParam(p.name), p.name);
    } finally {
      await c.close();
    }
  });
});
