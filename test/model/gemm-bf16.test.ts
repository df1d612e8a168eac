// bf16 weights in the policy model (PolicyModel.setBf16): numerics against the PyTorch float64-
// checked fp32 fixtures within the bf16 tolerance, generation on the bf16 copy, and the copy kept
// in step with the fp32 master weights (refreshed by AdamW in its own pass, and after setParam).
//
// bf16 tolerance (docs/model.md): per tensor max |bf16 run - fp32 torch| / max |fp32 torch|
// <= 3e-2 for the logits and log-probs of the fixtures' tiny models (each projection rounds its
// input and weights to 8 significant bits: ~2^-8 relative per product, through 2 layers).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { packSequences, PolicyModel, type ModelSizes, type TrainBatch } from '../../lib/model/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { readSafetensorsF32, relError } from './helpers.js';

const BF16_TOL = 3e-2;
const seed = testSeed('gemm bf16 model');
const rng = new Rng(seed);
const root = new URL('../fixtures/model/', import.meta.url).pathname;
const cases = readdirSync(root).filter((d) => statSync(join(root, d)).isDirectory()).sort();

describe('bf16 weights vs the fp32 PyTorch fixtures', () => {
  for (const name of cases) {
    it(`${name}: logits and log-probs with bf16 forward within ${BF16_TOL}; fp32 again after switching off`, async () => {
      const dir = join(root, name);
      const meta = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8')) as { tokens: number[]; positions: number[]; seq_offsets: number[] };
      const exp = readSafetensorsF32(join(dir, 'expected.safetensors'));
      const batch: TrainBatch = { tokens: Int32Array.from(meta.tokens), positions: Int32Array.from(meta.positions), seqOffsets: Int32Array.from(meta.seq_offsets) };
      const m = await PolicyModel.load(dir);
      const fp32 = await m.logits(batch);
      m.setBf16({ forward: true });
      assert.deepEqual(m.bf16(), { generate: false, forward: true });
      const logits = await m.logits(batch);
      const e = relError(logits, exp.get('logits')!);
      assert.ok(e <= BF16_TOL, `logits rel err ${e}`);
      assert.ok(relError(logits, fp32) > 0, 'the bf16 forward ran (results differ from fp32)');
      const lp = await m.score(batch);
      assert.ok(relError(lp, exp.get('logp')!) <= BF16_TOL, `logp rel err ${relError(lp, exp.get('logp')!)}`);
      m.setBf16({ forward: false });
      assert.deepEqual(await m.logits(batch), fp32);
    });
  }
});

const sizes: ModelSizes = {
  modelType: 'qwen3', vocabSize: 300, hiddenSize: 64, intermediateSize: 96, numLayers: 2, numHeads: 4, numKvHeads: 2,
  headDim: 16, maxPositionEmbeddings: 128, tieWordEmbeddings: false, dtype: 'float32',
};
const seqs = (n: number, len: number) => Array.from({ length: n }, () => Array.from({ length: len }, () => rng.int(sizes.vocabSize)));

describe(`bf16 weights in the engine (seed ${seed})`, () => {
  it('generation on bf16 weights: log-probs within the bf16 tolerance of fp32 scoring', async () => {
    const m = await PolicyModel.random(sizes, { seed, initStd: 0.1 });
    const prompts = seqs(3, 5);
    m.setBf16({ generate: true });
    const gens = await m.generate(prompts, { maxNewTokens: 6, temperature: 0 });
    const batch = packSequences(prompts.map((p, i) => [...p, ...gens[i]!.tokens]));
    const lp = await m.score(batch);  // fp32 (forward is off)
    const want: number[] = [], got: number[] = [];
    prompts.forEach((p, i) => gens[i]!.logprobs.forEach((x, j) => {
      got.push(x);
      want.push(lp[batch.seqOffsets[i]! + p.length + j]!);
    }));
    const e = relError(got, want);
    assert.ok(e <= BF16_TOL, `generation logp vs fp32 score: rel err ${e}`);
    assert.ok(e > 0, 'generation ran on the bf16 copy');
  });

  it('the bf16 copy follows the master weights: AdamW refreshes it, setParam marks it stale', async () => {
    const m = await PolicyModel.random(sizes, { seed: seed + 1, initStd: 0.1 });
    const batch = packSequences(seqs(2, 12));
    m.setBf16({ forward: true });
    const before = await m.logits(batch);
    await m.accumulate(batch, { crossEntropy: true });
    await m.optimizerStep({ lr: 1e-2 });
    const afterStep = await m.logits(batch);   // the copy AdamW wrote in its pass
    assert.ok(relError(afterStep, before) > 1e-4, 'the step changed the bf16 results');
    m.setBf16({ forward: false });
    m.setBf16({ forward: true });               // dropped, converted afresh from the master weights
    assert.deepEqual(await m.logits(batch), afterStep);

    const name = m.params().find((p) => p.name.endsWith('mlp.down_proj.weight'))!.name;
    const w = m.getParam(name);
    for (let i = 0; i < w.length; i++) w[i] = -w[i]!;
    m.setParam(name, w);
    const afterSet = await m.logits(batch);
    assert.ok(relError(afterSet, afterStep) > 1e-4, 'setParam reached the bf16 copy');
    m.setBf16({ forward: false });
    m.setBf16({ forward: true });
    assert.deepEqual(await m.logits(batch), afterSet);
  });

  it('memory counts the bf16 copy; bad options fail with one line', async () => {
    const m = await PolicyModel.random(sizes, { seed, initStd: 0.1 });
    const w0 = m.memory().weights;
    m.setBf16({ generate: true });
    await m.generate([[1, 2, 3]], { maxNewTokens: 1, temperature: 0 });
    assert.equal(m.memory().weights, w0 + w0 / 2);
    assert.throws(() => m.setBf16({ fast: true } as never), /unknown option 'fast'/);
    assert.throws(() => m.setBf16({ generate: 1 } as never), /'generate' must be a boolean/);
  });
});
