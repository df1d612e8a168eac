// The paged rollout engine (lib/rollout/paged-engine.ts) on a GPU: the scheduler's steps run by
// the device engine's paged step (CudaBackend), against NativeEngine on the CPU engine with the
// same weights: greedy tokens for 64 tokens with and without prefix sharing, seeded sampled
// tokens, a pool small enough to preempt giving the same tokens, and the KV pool sized from the
// device's free memory and given back by releaseMemory (colocated mode, docs/rollout.md).
// Skipped without a device, saying why; MURPHY_GPU_DRYRUN=1 runs the same logic on 'emulate'
// (which checks the test, not the GPU). Written without a GPU: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyModel, type EngineOptions } from '../../lib/model/index.js';
import { NativeEngine } from '../../lib/rollout/engine.js';
import { PagedEngine } from '../../lib/rollout/paged-engine.js';
import type { EngineRequest } from '../../lib/rollout/types.js';
import { Rng, testSeed } from '../helpers/random.js';
import { checkAgainstNative } from '../rollout/paged-engine-helpers.js';
import { announce, dryRun, gpuOnly } from './common.js';

announce('gpu/paged-engine');
const device: EngineOptions['device'] = dryRun ? 'emulate' : 'cuda';
const seed = testSeed('gpu/paged-engine');
const rng = new Rng(seed);
// sharp logits (initStd 0.5): greedy margins well above the engines' float32 rounding differences
const SIZES = { modelType: 'qwen3', vocabSize: 512, hiddenSize: 128, intermediateSize: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, maxPositionEmbeddings: 512, tieWordEmbeddings: true } as const;
const models = async () => ({
  cpu: new NativeEngine(await PolicyModel.random(SIZES, { seed: seed % 1000, initStd: 0.5 })),
  dev: await PolicyModel.random(SIZES, { seed: seed % 1000, initStd: 0.5, device, storage: 'f32' }),
});
const req = (promptIds: number[], o: Partial<EngineRequest> = {}): EngineRequest =>
  ({ promptIds, n: 1, maxTokens: 64, temperature: 0, topP: 1, topK: 0, minP: 0, seed: 1, stopTokenIds: [], ...o });
const prompt = (n: number) => Array.from({ length: n }, () => rng.int(SIZES.vocabSize));

describe(`paged engine (${device})`, () => {
  it('f32: greedy (64 tokens) and seeded sampled completions equal NativeEngine\'s, with and without prefix sharing', gpuOnly, async () => {
    const { cpu, dev } = await models();
    const shared = prompt(40);
    const reqs = [
      req(shared, { n: 3 }), req([...shared, ...prompt(9)]), req(prompt(5)), req(prompt(120)),
      req([...shared, ...prompt(3)], { n: 4, temperature: 0.9, topP: 0.95, topK: 50, minP: 0.01, seed: rng.int(2 ** 31), maxTokens: 32 }),
    ];
    for (const prefixSharing of [true, false]) {
      const e = PagedEngine.onPolicy(dev, { kvCacheBlocks: 256, prefixSharing });
      await checkAgainstNative(e, cpu, reqs, 1e-4, `${device}, sharing ${prefixSharing}, seed ${seed}`);
      console.log(`# ${device}, sharing ${prefixSharing}: ${e.metrics.steps} steps, prefill ${e.metrics.prefillTokens} computed / ${e.metrics.prefillSaved} saved`);
      await e.close();
    }
  });

  it('f32: a pool that must preempt gives the same tokens', gpuOnly, async () => {
    const { cpu, dev } = await models();
    const reqs = Array.from({ length: 8 }, () => req(prompt(20 + rng.int(100)), { n: 2, maxTokens: 48 }));
    // the smallest pool the engine takes: one sequence of the full context (512 tokens)
    const e = PagedEngine.onPolicy(dev, { kvCacheBlocks: 32 });
    await checkAgainstNative(e, cpu, reqs, 1e-4, `${device} small pool, seed ${seed}`);
    assert.ok(e.metrics.preemptions > 0, 'it preempted');
    await e.close();
  });

  it('bf16: the pool takes kvCacheFraction of the free memory for a rollout phase and gives it back', gpuOnly, async () => {
    const dev = await PolicyModel.random(SIZES, { seed: seed % 1000, initStd: 0.5, device, storage: 'bf16' });
    const before = dev.kvInfo();
    const e = PagedEngine.onPolicy(dev, { kvCacheFraction: 0.05 });
    await e.generate([req(prompt(10), { maxTokens: 8 })]);
    const during = dev.kvInfo();
    assert.equal(during.blocks, e.metrics.kvBlocks);
    if (!dryRun) {
      assert.ok(before.freeBytes! - during.freeBytes! >= during.blocks * during.bytesPerBlock * 0.99, `free ${before.freeBytes} -> ${during.freeBytes}`);
      assert.ok(Math.abs(during.blocks * during.bytesPerBlock - 0.05 * before.freeBytes!) <= 0.05 * before.freeBytes! * 0.01 + during.bytesPerBlock, `${during.blocks} blocks of ${during.bytesPerBlock} from ${before.freeBytes} free`);
    }
    await e.releaseMemory();
    const after = dev.kvInfo();
    assert.equal(after.blocks, 0);
    if (!dryRun) assert.ok(after.freeBytes! >= before.freeBytes! - 64 * 2 ** 20, `free ${before.freeBytes} -> ${after.freeBytes} after release`);
  });
});
