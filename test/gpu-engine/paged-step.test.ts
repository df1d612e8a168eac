// The device engine's paged generation step (PolicyModel.pagedStep / pagedLogits over the KV
// pools of kvAllocate) on 'emulate' (every kernel run by the CPU harness), against the engine's
// own full-sequence forward (PolicyModel.logits) and the CPU engine's generate(): prefill whole
// or in chunks then decode, several sequences of different lengths in one step, shared prefix
// blocks with a copy-on-write copy, the processed log-probs of sampled tokens recomputed here
// from pagedLogits, and bad inputs. Fresh random model seeds and prompts each run (printed;
// MURPHY_SEED replays). Tolerances and what they measured: docs/gpu.md, "Generation".
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { packSequences, PolicyModel, type ModelSizes } from '../../lib/model/index.js';
import { MurphyNativeError } from '../../lib/native.js';
import { relError } from '../model/helpers.js';
import { Rng, testSeed } from '../helpers/random.js';
import { fixtureCase, fixtures } from './engine-compare.js';
import { argmax, greedy, runPaged, samplingOf, stepArrays } from './paged-step.js';

const seed = testSeed('paged-step');
const rng = new Rng(seed);
const randomPrompt = (n: number, V: number): number[] => Array.from({ length: n }, () => rng.int(V));

/** Logits tolerance (relError: max |paged - full| / max |full|) of a paged row against the full-sequence forward. */
const LOGITS_TOL = { f32: 1e-5, bf16: 3e-2 } as const;

// a tiny Qwen3 with GQA; initStd 0.1 so that greedy continuations do not collapse to one repeated token
const SIZES: ModelSizes = {
  modelType: 'qwen3', vocabSize: 128, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2,
  headDim: 8, maxPositionEmbeddings: 256, tieWordEmbeddings: false,
};

async function fullLogits(m: PolicyModel, seq: number[]): Promise<Float32Array> {
  return m.logits(packSequences([seq]));
}

describe('paged step (emulate) against the full-sequence forward', () => {
  for (const storage of ['f32', 'bf16'] as const) {
    it(`${storage} storage: prefill whole or in chunks, then decode; each sampled row's logits = PolicyModel.logits`, async () => {
      const m = await PolicyModel.random(SIZES, { seed: seed % 1000, initStd: 0.1, device: 'emulate', storage });
      const V = SIZES.vocabSize;
      let worst = 0;
      for (const [chunk, blockSize] of [[Infinity, 16], [1, 4], [2 + rng.int(8), 1 + rng.int(8)]] as const) {
        const prompts = [1 + rng.int(4), 5 + rng.int(20), 20 + rng.int(30)].map((n) => randomPrompt(n, V));
        const run = await runPaged(m, prompts, { blockSize, chunk, newTokens: 6, mode: 'logits' });
        for (let i = 0; i < prompts.length; i++) {
          const seq = [...prompts[i], ...run.tokens[i]];
          const full = await fullLogits(m, seq);
          run.logits[i].forEach((z, k) => {
            const t = prompts[i].length - 1 + k;
            const e = relError(z, full.subarray(t * V, (t + 1) * V));
            worst = Math.max(worst, e);
            assert.ok(e <= LOGITS_TOL[storage], `${storage}, chunk ${chunk}, block ${blockSize}, seq ${i}, row ${k}: logits rel error ${e} > ${LOGITS_TOL[storage]} (seed ${seed})`);
          });
        }
      }
      console.log(`# ${storage}: worst paged vs full logits rel error ${worst.toExponential(2)}`);
      m.kvRelease();
    });
  }

  it('the harness run backwards (blocks and threads in reverse order) gives identical bits', async () => {
    const V = SIZES.vocabSize;
    const outs: Float32Array[] = [];
    for (const reverseHarness of [false, true]) {
      const m = await PolicyModel.random(SIZES, { seed: 7, initStd: 0.1, device: 'emulate', storage: 'bf16', reverseHarness });
      const r = await runPaged(m, [randomPrompt(9, V).map((_, i) => (i * 37) % V), [5, 6, 7]], { blockSize: 4, chunk: 4, newTokens: 3, mode: 'logits' });
      outs.push(Float32Array.from(r.logits.flat().flatMap((z) => Array.from(z))));
    }
    assert.deepEqual(outs[1], outs[0]);
  });
});

describe('paged step (emulate): greedy tokens equal the CPU engine\'s generate', () => {
  it('tiny preset, f32 storage: 64 tokens for three prompts of different lengths in one step', async () => {
    const s = seed % 1000;
    const cpu = await PolicyModel.random('tiny', { seed: s, initStd: 0.1 });
    const dev = await PolicyModel.random('tiny', { seed: s, initStd: 0.1, device: 'emulate', storage: 'f32' });
    const V = cpu.info.vocabSize;
    const prompts = [2 + rng.int(5), 10 + rng.int(20), 40 + rng.int(30)].map((n) => randomPrompt(n, V));
    const want = await cpu.generate(prompts, { maxNewTokens: 64, temperature: 0 });
    const got = await runPaged(dev, prompts, { blockSize: 16, chunk: 8 + rng.int(24), newTokens: 64 });
    got.tokens.forEach((t, i) => assert.deepEqual(t, Array.from(want[i].tokens), `prompt ${i} (seed ${seed})`));
    const distinct = new Set(got.tokens.flat()).size;
    assert.ok(distinct > 8, `the continuations should vary (got ${distinct} distinct tokens): a test of something`);
  });

  for (const name of fixtures) {
    it(`fixture ${name}, f32 storage: greedy to the end of its 64-position context`, async () => {
      const { dir } = fixtureCase(name);
      const cpu = await PolicyModel.load(dir);
      const dev = await PolicyModel.load(dir, { device: 'emulate', storage: 'f32' });
      const V = cpu.info.vocabSize;
      const prompts = [1, 4, 9].map((n) => randomPrompt(n, V));
      const want = await cpu.generate(prompts, { maxNewTokens: 64, temperature: 0 });
      const got = await runPaged(dev, prompts, { blockSize: 8, chunk: 3, newTokens: 64 });
      got.tokens.forEach((t, i) => assert.deepEqual(t, Array.from(want[i].tokens), `${name} prompt ${i} (seed ${seed})`));
    });
  }

  it('sampled tokens (temperature, top-p, top-k, min-p, per-prompt seeds) and their log-probs equal generate()\'s', async () => {
    const s = seed % 1000;
    const cpu = await PolicyModel.random(SIZES, { seed: s, initStd: 0.1 });
    const dev = await PolicyModel.random(SIZES, { seed: s, initStd: 0.1, device: 'emulate', storage: 'f32' });
    const prompts = [3, 11, 17].map((n) => randomPrompt(n, SIZES.vocabSize));
    const opts = { temperature: 0.9, topP: 0.9, topK: 40, minP: 0.02, seed: rng.int(1 << 30) };
    const want = await cpu.generate(prompts, { maxNewTokens: 24, ...opts });
    const got = await runPaged(dev, prompts, { blockSize: 4, chunk: 5, newTokens: 24, sample: opts });
    got.tokens.forEach((t, i) => {
      assert.deepEqual(t, Array.from(want[i].tokens), `prompt ${i} (seed ${seed})`);
      const e = relError(got.logprobs[i], want[i].logprobs);
      assert.ok(e < 1e-4, `prompt ${i}: log-probs differ by ${e} (seed ${seed})`);
    });
  });
});

describe('paged step (emulate): prefix sharing and copy-on-write', () => {
  it('two sequences sharing full prefix blocks and a copied partial block give the logits of unshared ones', async () => {
    const m = await PolicyModel.random(SIZES, { seed: seed % 1000, initStd: 0.1, device: 'emulate', storage: 'f32' });
    const V = SIZES.vocabSize, bs = 4;
    const prompt = randomPrompt(2 * bs + 1 + rng.int(bs - 1), V);  // two full blocks and a partial one
    const P = prompt.length;
    const [a, b] = [rng.int(V), rng.int(V)];
    // shared: prefill once into blocks 0..2, then A decodes `a` in block 2 and B, forked, decodes `b`
    // in block 3, a copy of block 2 (the copy happens before the step's KV writes)
    m.kvAllocate({ blocks: 8, blockSize: bs });
    await m.pagedLogits(stepArrays([{ start: 0, tokenIds: prompt, blockTable: [0, 1, 2], sampleIndices: [0] }], bs));
    const shared = await m.pagedLogits(stepArrays([
      { start: P, tokenIds: [a], blockTable: [0, 1, 2], sampleIndices: [0] },
      { start: P, tokenIds: [b], blockTable: [0, 1, 3], sampleIndices: [0] },
    ], bs, [{ src: 2, dst: 3 }]));
    // unshared: each sequence alone, in its own blocks of a fresh pool
    for (const [k, tok] of [a, b].entries()) {
      m.kvAllocate({ blocks: 8, blockSize: bs });
      const alone = await m.pagedLogits(stepArrays([{ start: 0, tokenIds: [...prompt, tok], blockTable: [5, 6, 7], sampleIndices: [0] }], bs));
      const e = relError(shared.subarray(k * V, (k + 1) * V), alone);
      assert.ok(e <= LOGITS_TOL.f32, `sequence ${k}: shared vs unshared logits rel error ${e} (seed ${seed})`);
      const full = await fullLogits(m, [...prompt, tok]);
      assert.ok(relError(alone, full.subarray(P * V, (P + 1) * V)) <= LOGITS_TOL.f32);
    }
  });
});

/** log p(token) under softmax(z / T) restricted to the kept set of min-p, then top-k, then top-p (renormalised), in fp64. */
function processedLogp(z: Float32Array, token: number, o: { temperature: number; topK: number; topP: number; minP: number }): { logp: number; kept: boolean } {
  const V = z.length;
  let m = -Infinity;
  for (const v of z) m = Math.max(m, v);
  const x = Array.from(z, (v) => (v - m) / o.temperature);
  let order = Array.from({ length: V }, (_, i) => i).sort((i, j) => z[j] - z[i] || i - j);
  if (o.minP > 0) order = order.filter((i) => x[i] >= Math.log(o.minP));
  if (o.topK > 0) order = order.slice(0, o.topK);
  if (o.topP < 1) {
    const total = order.reduce((s, i) => s + Math.exp(x[i]), 0);
    let acc = 0, n = 0;
    while (n < order.length && acc < o.topP * total) acc += Math.exp(x[order[n++]]);
    order = order.slice(0, n);
  }
  const S = order.reduce((s, i) => s + Math.exp(x[i]), 0);
  return { logp: x[token] - Math.log(S), kept: order.includes(token) };
}

describe('paged step (emulate): sampling on the device', () => {
  it('a row drawn several times (a fork); each log-prob = log softmax(logits / T) over the kept set, from pagedLogits', async () => {
    for (const storage of ['f32', 'bf16'] as const) {
      const m = await PolicyModel.random(SIZES, { seed: seed % 1000, initStd: 0.1, device: 'emulate', storage });
      const V = SIZES.vocabSize, bs = 8;
      m.kvAllocate({ blocks: 8, blockSize: bs });
      const p1 = randomPrompt(5 + rng.int(10), V), p2 = randomPrompt(3, V);
      const seqs = [
        { start: 0, tokenIds: p1, blockTable: [0, 1, 2], sampleIndices: [0, 1, 2, 3, 4, 5] },
        { start: 0, tokenIds: p2, blockTable: [3], sampleIndices: [0, 1, 2] },
      ];
      const arrays = stepArrays(seqs, bs);
      const z = await m.pagedLogits(arrays);
      const R = arrays.sampleRows.length;
      const opts = [
        { temperature: 1, topK: 0, topP: 1, minP: 0 }, { temperature: 0.7, topK: 5, topP: 1, minP: 0 },
        { temperature: 1.3, topK: 0, topP: 0.6, minP: 0 }, { temperature: 0.8, topK: 0, topP: 1, minP: 0.1 },
        { temperature: 1, topK: 20, topP: 0.9, minP: 0.05 }, { temperature: 0, topK: 0, topP: 1, minP: 0 },
        { temperature: 0.5, topK: 1, topP: 1, minP: 0 }, { temperature: 2, topK: 0, topP: 1, minP: 0 },
        { temperature: 1, topK: 3, topP: 0.5, minP: 0 },
      ];
      const s = samplingOf(R, { seed: rng.int(1 << 30) });
      opts.forEach((o, r) => { s.temperature[r] = o.temperature; s.topK[r] = o.topK; s.topP[r] = o.topP; s.minP[r] = o.minP; s.step[r] = rng.int(100); });
      // the same arrays again: the step rewrites the same K and V at the same slots
      const res = await m.pagedStep(arrays, s);
      assert.equal(res.tokens.length, R);
      for (let r = 0; r < R; r++) {
        const row = z.subarray(arrays.sampleRows[r] * V, (arrays.sampleRows[r] + 1) * V);
        const o = opts[r], tok = res.tokens[r];
        if (o.temperature === 0) {
          assert.equal(tok, argmax(row), `row ${r}: greedy`);
          const ref = processedLogp(row, tok, { ...o, temperature: 1 });
          assert.ok(Math.abs(res.logprobs[r] - ref.logp) < 1e-4, `row ${r}: greedy log-prob ${res.logprobs[r]} vs ${ref.logp}`);
          continue;
        }
        if (o.topK === 1) { assert.equal(tok, argmax(row)); assert.equal(res.logprobs[r], 0); continue; }
        const ref = processedLogp(row, tok, o);
        assert.ok(ref.kept, `${storage} row ${r}: token ${tok} is outside the kept set of ${JSON.stringify(o)} (seed ${seed})`);
        assert.ok(Math.abs(res.logprobs[r] - ref.logp) < 1e-4, `${storage} row ${r}: log-prob ${res.logprobs[r]} vs ${ref.logp} (seed ${seed})`);
      }
      // the fork's six samples of one row: different streams, so (almost surely) not one token
      assert.ok(new Set(Array.from(res.tokens.subarray(0, 5))).size > 1, `the fork's samples are all ${res.tokens[0]} (seed ${seed})`);
    }
  });
});

describe('paged step: pools and bad inputs', () => {
  it('kvInfo sizes the pools; kvRelease frees them; a step without pools is refused', async () => {
    for (const storage of ['f32', 'bf16'] as const) {
      const m = await PolicyModel.random(SIZES, { seed: 1, device: 'emulate', storage });
      const bpt = 2 * SIZES.numLayers * SIZES.numKvHeads! * SIZES.headDim! * (storage === 'f32' ? 4 : 2);
      assert.deepEqual(m.kvInfo(), { blocks: 0, blockSize: 0, bytesPerToken: bpt, bytesPerBlock: bpt * 16, freeBytes: null });
      m.kvAllocate({ blocks: 5, blockSize: 8 });
      assert.deepEqual(m.kvInfo(), { blocks: 5, blockSize: 8, bytesPerToken: bpt, bytesPerBlock: bpt * 8, freeBytes: null });
      assert.equal(m.kvInfo({ blockSize: 32 }).bytesPerBlock, bpt * 32);
      m.kvRelease();
      assert.equal(m.kvInfo().blocks, 0);
      await assert.rejects(m.pagedStep(stepArrays([{ start: 0, tokenIds: [1], blockTable: [0], sampleIndices: [0] }], 8), greedy(1)),
        /pagedStep: no KV pools allocated; call kvAllocate/);
      assert.throws(() => m.kvAllocate({ blocks: 0, blockSize: 8 }), /blocks/);
    }
  });

  it('the CPU engine refuses with ENOTSUP, naming the device engines', async () => {
    const m = await PolicyModel.random(SIZES, { seed: 1 });
    assert.throws(() => m.kvAllocate({ blocks: 4, blockSize: 4 }), (e: unknown) => e instanceof MurphyNativeError && e.code === 'ENOTSUP' && /--device emulate\|cuda/.test(e.message));
    await assert.rejects(m.pagedStep(stepArrays([{ start: 0, tokenIds: [1], blockTable: [0], sampleIndices: [0] }], 4), greedy(1)),
      (e: unknown) => e instanceof MurphyNativeError && e.code === 'ENOTSUP');
  });

  it('bad inputs: one clear line each, and the pools still work after', async () => {
    const m = await PolicyModel.random(SIZES, { seed: 2, device: 'emulate', storage: 'f32' });
    const bs = 4;
    m.kvAllocate({ blocks: 4, blockSize: bs });
    const good = () => stepArrays([{ start: 0, tokenIds: [1, 2, 3, 4, 5], blockTable: [0, 1], sampleIndices: [0] }, { start: 0, tokenIds: [9], blockTable: [2], sampleIndices: [0] }], bs);
    const cases: [string, (a: ReturnType<typeof good>) => unknown, RegExp][] = [
      ['slot out of range', (a) => { a.slotMapping[5] = 999; }, /slotMapping\[5\] = 999 is outside the pool's 16 slots/],
      ['slot not where the table puts it', (a) => { a.slotMapping[1] = 3; }, /slotMapping\[1\] = 3 but the block table of sequence 0 puts position 1 at slot 1/],
      ['block id out of range', (a) => { a.blockTables[1] = 4; }, /block id 4 \(blockTables entry 1\) is outside the pool's 4 blocks/],
      ['negative block id', (a) => { a.blockTables[a.maxBlocks] = -1; }, /block id -1/],
      ['seqLens disagrees with positions', (a) => { a.seqLens[0] = 6; }, /positions\[0\] = 0 but its new tokens sit at positions 1 \.\. 5.*lengths disagree/],
      ['queryStartLoc not ending at T', (a) => { a.queryStartLoc[2] = 5; }, /queryStartLoc must start at 0 and end at the number of tokens \(6\)/],
      ['array lengths disagree', (a) => ({ ...a, positions: a.positions.subarray(1) }), /'positions' has 5 entries but inputIds \(6 tokens\) needs 6/],
      ['block table shorter than the context', (a) => { a.seqLens[1] = 9; }, /sequence 1: seqLens = 9 needs 3 blocks of 4 but maxBlocks is 2/],
      ['token id outside the vocabulary', (a) => { a.inputIds[2] = 128; }, /inputIds\[2\] = 128 is outside the vocabulary/],
      ['logits index out of range', (a) => { a.logitsIndices[1] = 6; }, /logitsIndices\[1\] = 6 is outside the step's 6 tokens/],
      ['sample row out of range', (a) => { a.sampleRows[1] = 2; }, /sampleRows\[1\] = 2 is outside the 2 logits rows/],
      ['copy outside the pool', (a) => ({ ...a, copies: Int32Array.from([3, 4]) }), /copies\[0\] = \(3, 4\) names a block outside the pool's 4 blocks/],
      ['two copies into one block', (a) => ({ ...a, copies: Int32Array.from([0, 3, 1, 3]) }), /block 3 is the destination of two copies/],
      ['a slot written twice', (a) => { a.blockTables[a.maxBlocks] = 0; a.slotMapping[5] = 0; }, /slot 0 is written by two tokens of the step/],
    ];
    for (const [what, edit, re] of cases) {
      const a = good();
      const b = (edit(a) as ReturnType<typeof good> | undefined) ?? a;
      await assert.rejects(m.pagedStep(b, greedy(b.sampleRows.length)), (e: unknown) => e instanceof MurphyNativeError && e.code === 'EINVAL' && re.test(e.message) && !e.message.includes('\n'), what);
    }
    await assert.rejects(m.pagedStep(good(), { ...greedy(2), topP: new Float32Array([1, 0]) }), /topP\[1\] must be in \(0, 1\]/);
    await assert.rejects(m.pagedStep(good(), { ...greedy(2), seed: new Uint32Array(1) }), /'seed' has 1 entries but sampleRows \(2 samples\) needs 2/);
    const ok = await m.pagedStep(good(), greedy(2));
    assert.equal(ok.tokens.length, 2);
  });
});
