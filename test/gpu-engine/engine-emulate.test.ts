// The device engine over HostBackend ('emulate': the GPU engine's code with every kernel run by
// the CPU harness) against the CPU engine, its spec: the committed PyTorch fixtures (Qwen3 and
// OLMo-2, tied and untied, three loss kinds) and random tiny models, in f32 storage (tight
// tolerances) and bf16 storage (bf16 tolerances); checkpointing on and off give identical
// bits; save then load, and NativePolicy's saveState / loadState, are exact.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { PolicyModel, type LossOptions, type TrainStats } from '../../lib/model/index.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { ADAM, assertKeptLogitsBitsEqual, BF16_FIXTURE_TOL, BF16_TOL, bitsEqual, compareEngines, F32_TOL, fixtureCase, fixtures, randomBatch } from './engine-compare.js';

const tmp = mkdtempSync(join(tmpdir(), 'engine-emulate-'));
after(() => rmSync(tmp, { recursive: true, force: true }));


describe('device engine (emulate) vs the CPU engine', () => {
  for (const name of fixtures) {
    for (const storage of ['f32', 'bf16'] as const) {
      it(`${name}, ${storage} storage: logits, log-probs, loss, every gradient, two AdamW steps`, async () => {
        const { dir, batch, loss } = fixtureCase(name);
        const cpu = await PolicyModel.load(dir);
        const dev = await PolicyModel.load(dir, { device: 'emulate', storage });
        assert.deepEqual(dev.engine, { device: 'emulate', storage });
        // bf16: the cross-entropy loss (the GRPO clip switches tokens on and off under rounding)
        const l: LossOptions = storage === 'f32' ? loss : { crossEntropy: true };
        const r = await compareEngines(cpu, dev, batch, { ...l, chunkTokens: 7 }, storage === 'f32' ? F32_TOL : BF16_FIXTURE_TOL, 2, name);
        console.log(`# ${name} ${storage}: logits ${r.logits.toExponential(1)}, logp ${r.logp.toExponential(1)}, loss ${r.loss.toExponential(1)}, grad ${r.grad.toExponential(1)} (${r.worstGrad}), min cos ${r.gradCos.toFixed(5)}, weights ${r.weights.toExponential(1)}`);
      });
    }
  }

  for (const arch of ['qwen3', 'olmo2'] as const) {
    for (const tie of [true, false]) {
      it(`random ${arch} ${tie ? 'tied' : 'untied'} model, GRPO with the KL reference made on the engine (f32 and bf16)`, async () => {
        const seed = 1000 + Number(tie) + (arch === 'olmo2' ? 10 : 0);
        const sizes = { modelType: arch, vocabSize: 300, hiddenSize: 48, intermediateSize: 80, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, maxPositionEmbeddings: 128, tieWordEmbeddings: tie } as const;
        const batch = randomBatch(300, [9, 5, 12], seed);
        for (const storage of ['f32', 'bf16'] as const) {
          const cpu = await PolicyModel.random(sizes, { seed });
          const dev = await PolicyModel.random(sizes, { seed, device: 'emulate', storage });
          const r = await compareEngines(cpu, dev, { ...batch, oldLogp: undefined }, { beta: 0.05, chunkTokens: 4 }, storage === 'f32' ? F32_TOL : BF16_TOL, 1, `${arch} ${storage} seed ${seed}`);
          console.log(`# ${arch} ${tie ? 'tied' : 'untied'} ${storage}: logits ${r.logits.toExponential(1)}, loss ${r.loss.toExponential(1)}, grad ${r.grad.toExponential(1)}, min cos ${r.gradCos.toFixed(5)}, weights ${r.weights.toExponential(1)}`);
        }
      });
    }
  }
});

describe('device engine (emulate): checkpointing, save / load, resume, errors', () => {
  // keepLogitsMb, as on the CPU engine (test/model/engine.test.ts): the chunks whose logits fit
  // in the budget keep them from the loss's first pass to its second; the others share one slot
  // and are computed again, except the one it still holds. A vocabulary of 4,096 and chunks of
  // 64 rows make a chunk's logits 1 MiB; 142 loss rows are 3 chunks (64, 64, 14): 1 MiB keeps
  // chunk 0 (chunk 1 computed again, then chunk 2, which the shared slot no longer holds), 0
  // keeps none, 64 all. The same product on the same rows each way: the loss and every gradient
  // must be identical, not just close. The calls run on one model in turn (none, all, some, all
  // again), its buffers kept and resized between them.
  it('the kept-logits budget (none, some chunks, all) gives the same loss and gradients, bit for bit; the peak counts the kept logits', async () => {
    const sizes = { modelType: 'qwen3', vocabSize: 4096, hiddenSize: 48, intermediateSize: 80, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, maxPositionEmbeddings: 128, tieWordEmbeddings: false } as const;
    const batch = randomBatch(4096, [50, 50, 48], 11);
    const m = await PolicyModel.random(sizes, { seed: 11, device: 'emulate', storage: 'bf16' });
    const peaks = await assertKeptLogitsBitsEqual(m, batch, 64, [0, 64, 1, 64]);
    // three slots of 1 MiB (all kept) instead of one (none kept, the shared slot)
    assert.ok(peaks[1]! - peaks[0]! >= 2 * 2 ** 20, `peaks ${peaks[0]}, ${peaks[1]}`);
  });

  it('gradient checkpointing on and off give identical bits (loss, every gradient, the step)', async () => {
    const batch = randomBatch(512, [10, 7], 7);
    const runs: { st: TrainStats; grads: Float32Array[]; w: Float32Array[] }[] = [];
    for (const gradientCheckpointing of [false, true]) {
      const m = await PolicyModel.random('tiny', { seed: 5, device: 'emulate', storage: 'bf16', gradientCheckpointing });
      const st = await m.accumulate(batch, { chunkTokens: 5 });
      const grads = m.params().map((p) => m.getGrad(p.name));
      await m.optimizerStep(ADAM);
      runs.push({ st, grads, w: m.params().map((p) => m.getParam(p.name)) });
    }
    assert.equal(runs[1].st.loss, runs[0].st.loss);
    runs[0].grads.forEach((g, i) => assert.ok(bitsEqual(g, runs[1].grads[i]), `gradient ${i} differs with checkpointing`));
    runs[0].w.forEach((w, i) => assert.ok(bitsEqual(w, runs[1].w[i]), `weights ${i} differ with checkpointing`));
  });

  it('the harness run backwards (blocks and threads in reverse order) gives identical bits: no kernel races', async () => {
    const batch = randomBatch(512, [12, 5], 17);
    for (const arch of ['qwen3', 'olmo2'] as const) {
      const sizes = { modelType: arch, vocabSize: 512, hiddenSize: 64, intermediateSize: 96, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, maxPositionEmbeddings: 64, tieWordEmbeddings: arch === 'qwen3' } as const;
      const runs: { loss: number; grads: Float32Array[] }[] = [];
      for (const reverseHarness of [false, true]) {
        const m = await PolicyModel.random(sizes, { seed: 3, device: 'emulate', storage: 'bf16', reverseHarness });
        const st = await m.accumulate(batch, { chunkTokens: 6 });
        runs.push({ loss: st.loss, grads: m.params().map((p) => m.getGrad(p.name)) });
      }
      assert.equal(runs[1].loss, runs[0].loss, arch);
      runs[0].grads.forEach((g, i) => assert.ok(bitsEqual(g, runs[1].grads[i]), `${arch}: gradient ${i} differs in reverse order`));
    }
  });

  it('no oldLogp: the loss takes its own log-probs, detached: the bits of passing score()\'s, every ratio 1', async () => {
    for (const storage of ['f32', 'bf16'] as const) {
      const m = await PolicyModel.random('tiny', { seed: 8, device: 'emulate', storage });
      const batch = randomBatch(512, [11, 6], 9);
      const opts = { temperature: 0.8, chunkTokens: 5 };
      const own = await m.accumulate({ ...batch, oldLogp: undefined }, opts);
      const grads = m.params().map((p) => m.getGrad(p.name));
      m.zeroGrad();
      const scored = await m.accumulate({ ...batch, oldLogp: await m.score(batch, { temperature: 0.8 }) }, opts);
      assert.deepEqual(own, scored, storage);
      assert.equal(own.meanRatio, 1, storage);
      m.params().forEach((p, i) => assert.ok(bitsEqual(m.getGrad(p.name), grads[i]), `${storage}: ${p.name}`));
    }
  });

  it('save then load is bit-identical (f32 on disk), for both storage dtypes', async () => {
    for (const storage of ['f32', 'bf16'] as const) {
      const m = await PolicyModel.random('tiny', { seed: 11, device: 'emulate', storage });
      await m.accumulate(randomBatch(512, [6, 6], 3), {});
      await m.optimizerStep(ADAM);
      const dir = join(tmp, `saved-${storage}`);
      await m.save(dir, { dtype: 'float32' });
      const back = await PolicyModel.load(dir, { device: 'emulate', storage });
      for (const p of m.params()) assert.ok(bitsEqual(back.getParam(p.name), m.getParam(p.name)), `${storage}: ${p.name} changed through save/load`);
      const batch = randomBatch(512, [8], 4);
      assert.ok(bitsEqual(await back.score(batch), await m.score(batch)), `${storage}: log-probs differ after load`);
    }
  });

  it('exact resume: NativePolicy.saveState / loadState on the device engine continue bit for bit', async () => {
    const batch = randomBatch(512, [9, 4], 21);
    const a = new NativePolicy(await PolicyModel.random('tiny', { seed: 2, device: 'emulate' }));
    await a.accumulate(batch, {}, 1);
    await a.optimizerStep(ADAM);
    const dir = join(tmp, 'state');
    await a.saveState(dir);
    const b = new NativePolicy(await PolicyModel.random('tiny', { seed: 99, device: 'emulate' }));
    const info = await b.loadState(dir);
    assert.equal(info.optimizerState, true);
    for (const p of [a, b]) {
      await p.accumulate(batch, {}, 1);
      await p.optimizerStep(ADAM);
    }
    for (const p of a.params()) assert.ok(bitsEqual(b.getParam(p.name), a.getParam(p.name)), `${p.name} differs after resume`);
  });

  it('generates with the current weights (the CPU engine samples a copy of the master weights)', async () => {
    const cpu = await PolicyModel.random('tiny', { seed: 8 });
    const dev = await PolicyModel.random('tiny', { seed: 8, device: 'emulate', storage: 'f32' });
    const o = { maxNewTokens: 6, temperature: 0 };
    assert.deepEqual((await dev.generate([[1, 2, 3]], o))[0].tokens, (await cpu.generate([[1, 2, 3]], o))[0].tokens);
    const batch = randomBatch(512, [8], 6);
    for (const m of [cpu, dev]) {
      await m.accumulate(batch, { crossEntropy: true });
      await m.optimizerStep({ ...ADAM, lr: 0.05 });
    }
    assert.deepEqual((await dev.generate([[1, 2, 3]], o))[0].tokens, (await cpu.generate([[1, 2, 3]], o))[0].tokens);
  });

  it('memory(): the state as docs/gpu.md lists it (bf16: 2P compute + 4P master, 4P gradients, 8P moments, 2P reference)', async () => {
    const m = await PolicyModel.random('tiny', { seed: 1, device: 'emulate', storage: 'bf16' });
    const P = m.params().reduce((a, p) => a + p.numel, 0);
    let mem = m.memory();
    assert.deepEqual([mem.weights, mem.grads, mem.optimizer, mem.reference], [6 * P, 4 * P, 0, 0]);
    await m.accumulate(randomBatch(512, [6], 1), {});
    await m.optimizerStep(ADAM);
    m.makeReference();
    mem = m.memory();
    assert.deepEqual([mem.weights, mem.grads, mem.optimizer, mem.reference], [6 * P, 4 * P, 8 * P, 2 * P]);
    assert.ok(mem.activationsPeak > 0);
    const f = (await PolicyModel.random('tiny', { seed: 1, device: 'emulate', storage: 'f32' })).memory();
    assert.equal(f.weights, 4 * P, 'f32 storage: the master weights are the compute weights');
  });

  it('setBf16: generate samples with the bf16 copy as the CPU engine does; forward is the CPU engine\'s only', async () => {
    const cpu = await PolicyModel.random('tiny', { seed: 8 });
    const dev = await PolicyModel.random('tiny', { seed: 8, device: 'emulate' });
    for (const m of [cpu, dev]) m.setBf16({ generate: true });
    assert.deepEqual(dev.bf16(), { generate: true, forward: false });
    const o = { maxNewTokens: 6, temperature: 0 };
    assert.deepEqual((await dev.generate([[5, 6, 7]], o))[0].logprobs, (await cpu.generate([[5, 6, 7]], o))[0].logprobs);
    assert.throws(() => dev.setBf16({ forward: true }), /'forward' is the CPU engine's option; the device engine computes in its storage dtype \(bf16\)/);
  });

  it('bad options and a CPU-only binary fail with one line', async () => {
    await assert.rejects(PolicyModel.random('tiny', { device: 'tpu' as 'cpu' }), /device must be 'cpu', 'cuda' or 'emulate', got 'tpu'/);
    await assert.rejects(PolicyModel.random('tiny', { device: 'emulate', storage: 'f16' as 'f32' }), /storage must be 'bf16' or 'f32', got 'f16'/);
    const dev = await PolicyModel.random('tiny', { device: 'emulate' });
    await assert.rejects(dev.accumulate({ ...randomBatch(512, [4], 1), tokens: Int32Array.from([1, 2, 3, 600]) }, {}), /token id 600 at position 3 is outside the vocabulary/);
    await assert.rejects(dev.score({ tokens: Int32Array.from([1]), seqOffsets: Int32Array.from([0, 1]) }, { reference: true }), /no reference copy/);
    const { cuda } = await import('../../lib/native.js');
    if (!cuda.status().built) {
      await assert.rejects(PolicyModel.random('tiny', { device: 'cuda' }), (e: Error) => {
        assert.match(e.message, /the loaded native binary is CPU-only; build the CUDA one with `npm run build:cuda`/);
        assert.equal(e.message.split('\n').length, 1);
        return true;
      });
    }
  });
});
