// The device engine's paged generation step on a GPU (CudaBackend: the KV pools in device
// memory, decode_kernels.cu's KV append, paged attention and sampler, cuBLASLt GEMMs): the same
// checks as test/gpu-engine/paged-step.test.ts runs emulated (test/gpu-engine/paged-step.ts):
// each sampled row's logits against the engine's own full-sequence forward (f32 and bf16),
// greedy and sampled tokens against the CPU engine's generate() (f32, the tiny preset, a larger
// random model and the fixtures), prefix sharing with a copy-on-write copy, the processed
// log-probs, and kvInfo's free device memory. Skipped without a device, saying why;
// MURPHY_GPU_DRYRUN=1 runs the same logic on 'emulate' (which checks the test, not the GPU).
// Written without a GPU: it has not yet run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyModel, type EngineOptions } from '../../lib/model/index.js';
import { fixtureCase, fixtures } from '../gpu-engine/engine-compare.js';
import { checkAgainstGenerate, checkLogitsAgainstFull, checkSampling, checkSharedPrefix, PAGED_SIZES, randomPrompt } from '../gpu-engine/paged-step.js';
import { Rng, testSeed } from '../helpers/random.js';
import { announce, dryRun, gpuOnly } from './common.js';

announce('gpu/paged-step');
const device: EngineOptions['device'] = dryRun ? 'emulate' : 'cuda';
const seed = testSeed('gpu/paged-step');
const rng = new Rng(seed);
const dev = (storage: 'f32' | 'bf16') => PolicyModel.random(PAGED_SIZES, { seed: seed % 1000, initStd: 0.1, device, storage });

describe(`paged step (${device})`, () => {
  for (const storage of ['f32', 'bf16'] as const) {
    it(`${storage}: prefill whole or in chunks, then decode; each sampled row's logits = PolicyModel.logits`, gpuOnly, async () => {
      const worst = await checkLogitsAgainstFull(await dev(storage), storage, rng, `${device}, seed ${seed}`);
      console.log(`# ${device} ${storage}: worst paged vs full logits rel error ${worst.toExponential(2)}`);
    });
    it(`${storage}: a forked row's samples and their processed log-probs`, gpuOnly, async () => {
      await checkSampling(await dev(storage), rng, `${device} ${storage}, seed ${seed}`);
    });
  }

  it('f32: shared prefix blocks and a copy-on-write copy give the logits of unshared sequences', gpuOnly, async () => {
    await checkSharedPrefix(await dev('f32'), rng, `${device}, seed ${seed}`);
  });

  for (const [name, sizes] of [['tiny', 'tiny'], ['random 4-layer', { ...PAGED_SIZES, hiddenSize: 128, intermediateSize: 256, numLayers: 4, numHeads: 8, numKvHeads: 2, headDim: 32, vocabSize: 1024 }]] as const) {
    it(`${name}, f32: 64 greedy tokens and 32 sampled ones equal generate()'s, three prompts in one step`, gpuOnly, async () => {
      const s = seed % 1000;
      const cpu = await PolicyModel.random(sizes, { seed: s, initStd: 0.1 });
      const d = await PolicyModel.random(sizes, { seed: s, initStd: 0.1, device, storage: 'f32' });
      const prompts = [2 + rng.int(5), 10 + rng.int(20), 40 + rng.int(60)].map((n) => randomPrompt(rng, n, cpu.info.vocabSize));
      await checkAgainstGenerate(cpu, d, prompts, { blockSize: 16, chunk: 32, newTokens: 64 }, `${name} greedy, seed ${seed}`);
      const sample = { temperature: 1, topP: 0.95, topK: 0, minP: 0, seed: rng.int(2 ** 30) };
      await checkAgainstGenerate(cpu, d, prompts, { blockSize: 16, chunk: 32, newTokens: 32, sample }, `${name} sampled, seed ${seed}`);
    });
  }

  for (const name of fixtures) {
    it(`fixture ${name}, f32: greedy to the end of its context`, gpuOnly, async () => {
      const { dir } = fixtureCase(name);
      const cpu = await PolicyModel.load(dir);
      const d = await PolicyModel.load(dir, { device, storage: 'f32' });
      const prompts = [1, 4, 9].map((n) => randomPrompt(rng, n, cpu.info.vocabSize));
      await checkAgainstGenerate(cpu, d, prompts, { blockSize: 8, chunk: 3, newTokens: 64 }, `${device} ${name}, seed ${seed}`);
    });
  }

  it('kvInfo reports the device\'s free memory, which the pools take from', gpuOnly, async () => {
    const m = await dev('bf16');
    const before = m.kvInfo();
    if (dryRun) { assert.equal(before.freeBytes, null); return; }
    assert.ok(typeof before.freeBytes === 'number' && before.freeBytes > 0);
    const blocks = 32768;  // 64 MiB of K and V at 128 bytes a token
    m.kvAllocate({ blocks, blockSize: 16 });
    const after = m.kvInfo();
    assert.ok(before.freeBytes - after.freeBytes! >= blocks * after.bytesPerBlock * 0.99, `free ${before.freeBytes} -> ${after.freeBytes}`);
    m.kvRelease();
  });
});
