// ZeRO-1 on the device engine's own memory with world size 1 (npm run gpu:check): the CUDA
// engine (bf16 and f32 storage) over an NCCL communicator on device 0 takes the device path
// (lib/dist/zero-device.ts: the reduce-scatter, norm, AdamW and all-gather on the engine's
// buffers, in place since one rank's parts are equal) and is compared with the host path
// (per-parameter host copies, AdamW on the CPU) on the same batches: the gradient norms, the
// shards (fp32 master and moments) and the weights agree within float tolerance (the CUDA
// AdamW kernel against the CPU one), and the clip acts. Skipped without a device or without
// NCCL, saying why. MURPHY_GPU_DRYRUN=1 runs the same logic on the emulated engine through the
// fake libnccl (test/helpers/fake-nccl.ts), where the paths agree bit for bit: it checks the
// test code, not the device. Written without a GPU: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SoloCollective } from '../../lib/dist/collective.js';
import { NcclCollective } from '../../lib/dist/nccl-collective.js';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { PolicyModel } from '../../lib/model/index.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, dryRun } from './common.js';
import { deviceNccl } from './nccl-setup.js';
import { ZERO_HYPER as hyper, ZERO_LOSS as loss } from '../dist/helpers.js';

const rng = new Rng(announceSeed('gpu/zero-device'));
const { nccl, skip } = deviceNccl('murphy-gpu-zero-');

const device = dryRun ? 'emulate' : 'cuda';

function maxAbs(a: Float32Array, b: Float32Array): number {
  let w = 0;
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs(a[i]! - b[i]!));
  return w;
}

describe('ZeRO-1 on the device engine, world size 1', () => {
  for (const storage of ['bf16', 'f32'] as const) {
    it(`${storage} storage: the device path equals the host path within tolerance over 2 steps`, { skip }, async () => {
      const c = await NcclCollective.create({ rank: 0, worldSize: 1, masterAddr: '127.0.0.1', masterPort: 0, device: dryRun ? -1 : 0, connectTimeoutMs: 60_000, timeoutMs: 60_000 });
      try {
        const models = [await PolicyModel.random('tiny', { seed: 3, device, storage }), await PolicyModel.random('tiny', { seed: 3, device, storage })];
        const dev = await DistributedPolicy.create(c, new NativePolicy(models[0]!), models[0]!, { bucketBytes: 8192 });
        const host = await DistributedPolicy.create(new SoloCollective(), new NativePolicy(models[1]!), models[1]!, { bucketBytes: 8192 });
        assert.ok(dev.onDevice && !host.onDevice);
        const V = models[0]!.info.vocabSize;
        for (let s = 0; s < 2; s++) {
          const T = 24 + rng.int(16), cut = 8 + rng.int(8);
          const b = {
            tokens: Int32Array.from({ length: T }, () => rng.int(V)), seqOffsets: Int32Array.from([0, cut, T]),
            mask: Uint8Array.from({ length: T }, (_, t) => (t === 0 || t === cut ? 0 : 1)),
            advantages: Float32Array.from({ length: T }, (_, t) => (t < cut ? 1 : -0.5)), oldLogp: new Float32Array(T).fill(-2),
          };
          for (const m of models) await m.accumulate(b, loss);
          const rd = await dev.optimizerStep(hyper), rh = await host.optimizerStep(hyper);
          assert.ok(Math.abs(rd.gradNorm - rh.gradNorm) <= 1e-5 * rh.gradNorm, `grad norm ${rd.gradNorm} vs ${rh.gradNorm}`);
          assert.ok(rd.clipCoef < 1 && rd.step === s + 1);
          const sd = dev.shardState(), sh = host.shardState();
          const dm = maxAbs(sd.master, sh.master), dmo = maxAbs(sd.m, sh.m);
          console.log(`# ${storage} step ${s + 1}: max |master_dev - master_host| = ${dm}, max |m_dev - m_host| = ${dmo}`);
          // Adam's update is about lr per element; the kernels differ in rounding only
          assert.ok(dm <= 1e-5, `master differs by ${dm}`);
          assert.ok(dmo <= 1e-6, `exp_avg differs by ${dmo}`);
        }
      } finally {
        await c.close();
      }
    });
  }
});
