// Weight-sync buckets packed in the device engine's memory (PolicyModel.packBf16: the engine
// copies its bf16 compute weights, or rounds its f32 ones, into the bucket where they live),
// on the emulated engine: every bucket of the weight-sync plan (lib/rollout/weight-sync-plan.ts)
// equals the host packing (packBucket: getParam, toBf16) bit for bit, after a training step
// (the compute copy rewritten by AdamW) and after ZeRO-1's zeroInit (the model's weights are
// then the widened bf16 ones); the CPU engine and entries outside the bucket are refused with one line.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';
import { bucketPlan, packBucket } from '../../lib/rollout/weight-sync-plan.js';
import { Rng, testSeed } from '../helpers/random.js';
import { ZERO_LOSS as loss } from './helpers.js';

const rng = new Rng(testSeed('dist/weight-pack-device'));
const hyper = { lr: 1e-2, maxGradNorm: 1, weightDecay: 0.1 };

async function trained(storage: 'bf16' | 'f32'): Promise<PolicyModel> {
  const m = await PolicyModel.random('tiny', { seed: rng.int(1000), device: 'emulate', storage });
  const V = m.info.vocabSize, T = 20;
  await m.accumulate({
    tokens: Int32Array.from({ length: T }, () => rng.int(V)), seqOffsets: Int32Array.from([0, 9, T]),
    advantages: Float32Array.from({ length: T }, (_, t) => (t < 9 ? 1 : -0.5)), oldLogp: new Float32Array(T).fill(-2),
  }, loss);
  await m.optimizerStep(hyper);
  return m;
}

function packsLikeHost(m: PolicyModel): void {
  const plan = bucketPlan(m.params(), 4096 + 2 * rng.int(4096));
  assert.ok(plan.length > 2);
  for (const b of plan) {
    const out = new Uint8Array(b.bytes).fill(0xa5);
    m.packBf16(b.tensors.map((t) => ({ name: t.name, offset: t.offset })), out);
    assert.deepEqual(out, packBucket(m, b));
  }
}

describe('weight-sync buckets packed in the device engine\'s memory (emulate)', () => {
  for (const storage of ['bf16', 'f32'] as const) {
    it(`${storage} storage: every bucket equals the host packing`, async () => {
      packsLikeHost(await trained(storage));
    });
  }

  it('after zeroInit (the engine\'s weights are then the widened bf16 ones) too', async () => {
    const m = await trained('bf16');
    const total = m.params().reduce((a, p) => a + p.numel, 0);
    m.zeroInit({ rank: 0, worldSize: 1, shards: [0, total], buckets: [0, total] });
    packsLikeHost(m);
  });

  it('refuses the CPU engine and an entry outside the bucket', async () => {
    const cpu = await PolicyModel.random('tiny', { seed: 1 });
    const p = cpu.params()[0]!;
    assert.throws(() => cpu.packBf16([{ name: p.name, offset: 0 }], new Uint8Array(2 * p.numel)), (e: Error & { code?: string }) => e.code === 'ENOTSUP');
    const emu = await PolicyModel.random('tiny', { seed: 1, device: 'emulate' });
    assert.throws(() => emu.packBf16([{ name: p.name, offset: 2 }], new Uint8Array(2 * p.numel)), /lies outside the bucket of/);
    assert.throws(() => emu.packBf16([{ name: 'nope', offset: 0 }], new Uint8Array(8)), /no parameter named 'nope'/);
  });
});
