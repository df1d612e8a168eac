// Weight-sync buckets packed on the device (npm run gpu:check): the CUDA engine (bf16 and f32
// storage) packs every bucket of the weight-sync plan from its compute weights into a u8 device
// array (PolicyModel.packBf16, what NcclChannel.broadcastDevice broadcasts), equal bit for bit to
// the host packing (packBucket: getParam, toBf16), after a training step; devicePacker finds the
// engine behind a NativePolicy. Skipped without a device, saying why. MURPHY_GPU_DRYRUN=1 runs
// the same logic on the emulated engine with host arrays: it checks the test code, not the
// device. Written without a GPU: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';
import { devicePacker } from '../../lib/rollout/device-pack.js';
import { bucketPlan, packBucket } from '../../lib/rollout/weight-sync-plan.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, dryRun, empty, freeAll, gpuOnly, host } from './common.js';

const rng = new Rng(announceSeed('gpu/weight-pack'));
const device = dryRun ? 'emulate' : 'cuda';

describe('weight-sync buckets packed on the device', () => {
  for (const storage of ['bf16', 'f32'] as const) {
    it(`${storage} storage: every bucket equals the host packing`, gpuOnly, async () => {
      const m = await PolicyModel.random('tiny', { seed: rng.int(1000), device, storage });
      const V = m.info.vocabSize, T = 20;
      await m.accumulate({
        tokens: Int32Array.from({ length: T }, () => rng.int(V)), seqOffsets: Int32Array.from([0, 9, T]),
        advantages: Float32Array.from({ length: T }, (_, t) => (t < 9 ? 1 : -0.5)), oldLogp: new Float32Array(T).fill(-2),
      }, { epsLow: 0.2, epsHigh: 0.2, beta: 0, lossType: 'dapo' });
      await m.optimizerStep({ lr: 1e-2, maxGradNorm: 1 });
      assert.equal(devicePacker(new NativePolicy(m)) !== null, !dryRun, 'devicePacker finds the CUDA engine (none on emulate)');
      for (const b of bucketPlan(m.params(), 4096 + 2 * rng.int(4096))) {
        const out = empty('u8', b.bytes);
        try {
          m.packBf16(b.tensors.map((t) => ({ name: t.name, offset: t.offset })), out as never);
          assert.deepEqual(host<Uint8Array>(out), packBucket(m, b));
        } finally {
          freeAll(out);
        }
      }
    });
  }
});
