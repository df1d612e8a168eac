// The policy model's own behaviour: save -> load bit-identical (f32, bf16, f16, sharded),
// atomic saves, the fast paths against the plain reference loops on shapes that cross every
// blocking edge of the matrix product, generation (seeded reproducibility, log-probs equal to
// the scoring API's, n samples sharing a prompt, stop ids), async behaviour and bad input.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { checkModelConfig, initModel, packSequences, PolicyModel, setReferenceOps, type ModelSizes } from '../../lib/model/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { relError } from './helpers.js';

const seed = testSeed('model engine');
const rng = new Rng(seed);
const work = mkdtempSync(join(tmpdir(), 'murphy-model-'));
after(() => rmSync(work, { recursive: true, force: true }));

const small: ModelSizes = {
  modelType: 'qwen3', vocabSize: 300, hiddenSize: 32, intermediateSize: 48, numLayers: 2, numHeads: 4, numKvHeads: 2,
  headDim: 16, maxPositionEmbeddings: 128, tieWordEmbeddings: false, dtype: 'float32',
};

function randomSeqs(n: number, len: () => number, vocab: number): number[][] {
  return Array.from({ length: n }, () => Array.from({ length: len() }, () => rng.int(vocab)));
}

describe('save and load', () => {
  for (const dtype of ['float32', 'bfloat16', 'float16'] as const) {
    for (const shard of [0, 20000]) {
      it(`${dtype}${shard ? ', sharded' : ''}: save -> load -> save is bit-identical`, async () => {
        const m = await PolicyModel.random({ ...small, modelType: rng.next() < 0.5 ? 'qwen3' : 'olmo2' }, { seed, initStd: 0.5 });
        const d1 = join(work, `a-${dtype}-${shard}`), d2 = join(work, `b-${dtype}-${shard}`);
        await m.save(d1, { dtype, maxShardBytes: shard });
        const files = readdirSync(d1);
        assert.ok(files.includes('config.json'));
        assert.equal(files.includes('model.safetensors.index.json'), shard > 0, files.join(','));
        assert.ok(!files.some((f) => f.includes('.tmp')), 'no temporary files left');
        const m2 = await PolicyModel.load(d1);
        assert.equal(m2.info.dtype, dtype);
        await m2.save(d2, { maxShardBytes: shard });
        for (const f of files.filter((x) => x.endsWith('.safetensors'))) {
          assert.ok(readFileSync(join(d1, f)).equals(readFileSync(join(d2, f))), `${f} differs`);
        }
        for (const p of m.params()) {
          const a = m.getParam(p.name), b = m2.getParam(p.name);
          if (dtype === 'float32') assert.deepEqual(b, a);
          else assert.ok(relError(b, a) < (dtype === 'bfloat16' ? 8e-3 : 1e-3), p.name);
        }
      });
    }
  }

  it('overwrites an existing directory atomically and copies tokenizer files', async () => {
    const tok = join(work, 'tok');
    rmSync(tok, { recursive: true, force: true });
    const r = await initModel({ out: tok, preset: 'tiny', seed: 1 });
    assert.ok(existsSync(join(r.dir, 'tokenizer.json')) && existsSync(join(r.dir, 'tokenizer_config.json')));
    const cfg = JSON.parse(readFileSync(join(r.dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(cfg.model_type, 'qwen3');
    assert.deepEqual(cfg.architectures, ['Qwen3ForCausalLM']);
    const m = await PolicyModel.load(r.dir);
    await m.save(r.dir); // onto itself: reads the tokenizer from the old directory before replacing it
    assert.ok(existsSync(join(r.dir, 'tokenizer.json')));
    assert.deepEqual(readdirSync(work).filter((f) => f.includes('.tmp-') || f.includes('.old-')), []);
  });
});

describe('fast paths vs reference loops', () => {
  it('scores and gradients agree on shapes crossing the GEMM blocking (K > 256, N > 2048)', async () => {
    const sizes: ModelSizes = {
      modelType: 'olmo2', vocabSize: 2100, hiddenSize: 272, intermediateSize: 300, numLayers: 1, numHeads: 2,
      numKvHeads: 1, headDim: 40, maxPositionEmbeddings: 256, tieWordEmbeddings: rng.next() < 0.5, dtype: 'float32',
    };
    const m = await PolicyModel.random(sizes, { seed, initStd: 0.05 });
    const b = packSequences(randomSeqs(3, () => 5 + rng.int(30), sizes.vocabSize));
    const T = b.tokens.length;
    const lossOpts = { beta: 0.0 };
    const train = { ...b, advantages: rng.normals(T), oldLogp: new Float32Array(T) };
    const fast = await m.score(b);
    train.oldLogp = Float32Array.from(fast, (x) => x + 0.1 * rng.normal());
    await m.accumulate(train, lossOpts);
    const gFast = m.params().map((p) => m.getGrad(p.name));
    m.zeroGrad();
    setReferenceOps(true);
    try {
      const ref = await m.score(b);
      assert.ok(relError(fast, ref) <= 1e-5, `score ${relError(fast, ref)}`);
      await m.accumulate(train, lossOpts);
    } finally {
      setReferenceOps(false);
    }
    m.params().forEach((p, i) => {
      const e = relError(gFast[i], m.getGrad(p.name));
      assert.ok(e <= 1e-4, `${p.name}: ${e}`);
    });
  });
});

describe('chunked loss', () => {
  it('gradients do not depend on the logits chunk size (one chunk vs chunks of 3 rows)', async () => {
    const m = await PolicyModel.random({ ...small, tieWordEmbeddings: true }, { seed, initStd: 0.3 });
    const b = packSequences(randomSeqs(3, () => 4 + rng.int(10), small.vocabSize));
    const T = b.tokens.length;
    const lp = await m.score(b);
    const train = { ...b, advantages: rng.normals(T), oldLogp: Float32Array.from(lp, (x) => x + 0.2 * rng.normal()), refLogp: Float32Array.from(lp, (x) => x + 0.1 * rng.normal()) };
    const s1 = await m.accumulate(train, { beta: 0.05 });
    const g1 = m.params().map((p) => m.getGrad(p.name));
    m.zeroGrad();
    const s3 = await m.accumulate(train, { beta: 0.05, chunkTokens: 3 });
    assert.ok(Math.abs(s1.loss - s3.loss) <= 1e-6 * Math.max(1, Math.abs(s1.loss)));
    m.params().forEach((p, i) => assert.ok(relError(m.getGrad(p.name), g1[i]) <= 1e-5, p.name));
  });

  // keepLogitsMb: the chunks whose logits fit in the budget keep them from the first pass to the
  // second; the others share one slot and are computed again, except the one it still holds; when
  // all are kept, the first pass makes the logits of every chunk of more than 32 rows in one
  // product. With chunks of 512 rows x 300 (600 KiB) and 4 chunks, 1 MiB keeps chunk 0 only
  // (chunks 1 and 2 computed again, 3 still in the shared slot); 0 keeps none; 64 keeps all, a
  // last chunk of 20 rows made apart (the skinny path), one of 100 merged with the others. The
  // same logits bits each way, so the loss and every gradient must be identical, not just close;
  // the calls run on one model in turn (none, all, some, all again), its buffers kept and
  // resized between them (never zero-filled).
  for (const lastRows of [20, 100]) {
    it(`the kept-logits budget (none, some chunks, all) gives the same loss and gradients, bit for bit (last chunk ${lastRows} rows)`, async () => {
      const m = await PolicyModel.random({ ...small, maxPositionEmbeddings: 256 }, { seed, initStd: 0.3 });
      // 8 sequences, n = T - 8 loss rows = 3 x 512 + lastRows
      const n = 3 * 512 + lastRows, lens = Array.from({ length: 8 }, (_, i) => Math.floor((n + 8) / 8) + (i < (n + 8) % 8 ? 1 : 0));
      const b = packSequences(lens.map((len) => Array.from({ length: len }, () => rng.int(small.vocabSize))));
      const T = b.tokens.length;
      assert.equal(T - 8, n);
      const lp = await m.score(b);
      const train = { ...b, advantages: rng.normals(T), oldLogp: Float32Array.from(lp, (x) => x + 0.2 * rng.normal()) };
      const runs: { loss: number; grads: Float32Array[] }[] = [];
      for (const keepLogitsMb of [0, 64, 1, 64]) {
        m.zeroGrad();
        const s = await m.accumulate(train, { chunkTokens: 512, keepLogitsMb });
        runs.push({ loss: s.loss, grads: m.params().map((p) => m.getGrad(p.name)) });
      }
      for (const r of runs.slice(1)) {
        assert.equal(r.loss, runs[0].loss);
        m.params().forEach((p, i) => assert.deepEqual(r.grads[i], runs[0].grads[i], p.name));
      }
    });
  }
});

// No oldLogp: the loss takes the log-probs of its own first pass as the old ones, detached (TRL's
// old_per_token_logps = per_token_logps.detach() for one update per batch), so the training loop
// needs no scoring pass when processed sampling's log-probs cannot serve. Every ratio is exactly 1
// and the token-mean loss is minus the mean advantage over the loss tokens (float64 from the
// inputs). Against passing score()'s log-probs: the same bits when the loss's logits come in one
// product as score()'s do (one chunk); with small chunks the loss's last chunk of <= 32 rows
// takes the skinny path, whose sums run in another order, so there the two agree to rounding.
describe('on-policy loss (no oldLogp)', () => {
  it('equals passing the scored log-probs (bit for bit in one chunk); every ratio 1; loss = -mean advantage', async () => {
    const m = await PolicyModel.random({ ...small, modelType: rng.next() < 0.5 ? 'qwen3' : 'olmo2' }, { seed, initStd: 0.3 });
    const b = packSequences(randomSeqs(4, () => 3 + rng.int(40), small.vocabSize));
    const T = b.tokens.length;
    const advantages = rng.normals(T);
    const temperature = 0.6 + 0.8 * rng.next();
    const oldLogp = await m.score(b, { temperature });
    let sum = 0, n = 0;
    const first = new Set(Array.from(b.seqOffsets.slice(0, -1)));
    for (let t = 0; t < T; t++) if (!first.has(t)) sum += advantages[t], n++;
    for (const chunkTokens of [4096, 1 + rng.int(40)]) {
      const opts = { temperature, chunkTokens, epsLow: 0.2, epsHigh: 0.28 };
      m.zeroGrad();
      const own = await m.accumulate({ ...b, advantages }, opts);
      const gOwn = m.params().map((p) => m.getGrad(p.name));
      assert.equal(own.meanRatio, 1);
      assert.equal(own.clipLowFrac + own.clipHighFrac + own.dualClipFrac, 0);
      assert.ok(Math.abs(own.loss - -sum / n) <= 1e-6 * Math.max(1, Math.abs(sum / n)), `loss ${own.loss} vs ${-sum / n}`);
      m.zeroGrad();
      const scored = await m.accumulate({ ...b, advantages, oldLogp }, opts);
      if (chunkTokens >= T) {
        assert.deepEqual(own, scored, JSON.stringify(opts));
        m.params().forEach((p, i) => assert.deepEqual(m.getGrad(p.name), gOwn[i], p.name));
      } else {
        assert.ok(Math.abs(own.loss - scored.loss) <= 1e-6 * Math.max(1, Math.abs(scored.loss)), JSON.stringify(opts));
        m.params().forEach((p, i) => assert.ok(relError(gOwn[i], m.getGrad(p.name)) <= 1e-5, `${p.name} (${JSON.stringify(opts)})`));
      }
    }
  });
});

describe('buffers kept between calls', () => {
  it('scoring and logits of batches of changing size, reference copy in between, equal a fresh model\'s', async () => {
    const make = () => PolicyModel.random(small, { seed, initStd: 0.3 });
    const kept = await make();
    kept.makeReference();
    const lens = [40, 3, 25, 1, 60].map((n) => n + rng.int(8));
    for (const [i, n] of lens.entries()) {
      const b = packSequences(randomSeqs(1 + rng.int(3), () => 2 + rng.int(n), small.vocabSize));
      const fresh = await make();
      fresh.makeReference();
      const temperature = i % 2 ? 0.7 : 1;
      assert.deepEqual(await kept.score(b, { temperature }), await fresh.score(b, { temperature }), `batch ${i}: score`);
      assert.deepEqual(await kept.score(b, { reference: true }), await fresh.score(b, { reference: true }), `batch ${i}: reference score`);
      assert.deepEqual(await kept.logits(b), await fresh.logits(b), `batch ${i}: logits`);
    }
  });
});

describe('optimizer state', () => {
  it('a model restored from weights + optimizerState() continues exactly like the original', async () => {
    const mk = () => PolicyModel.random(small, { seed, initStd: 0.3 });
    const a = await mk();
    const b = packSequences(randomSeqs(3, () => 4 + rng.int(8), small.vocabSize));
    const lp = await a.score(b);
    const train = { ...b, advantages: rng.normals(b.tokens.length), oldLogp: Float32Array.from(lp, (x) => x + 0.1 * rng.normal()) };
    const h = { lr: 1e-2, weightDecay: 0.01, maxGradNorm: 1 };
    for (let i = 0; i < 2; i++) await a.trainStep([train], {}, h);
    const state = a.optimizerState();
    assert.equal(state.step, 2);
    assert.equal(Object.keys(state.tensors).length, 2 * a.params().length);
    const c = await mk();
    for (const p of a.params()) c.setParam(p.name, a.getParam(p.name));
    c.loadOptimizerState(state);
    await a.trainStep([train], {}, h);
    await c.trainStep([train], {}, h);
    for (const p of a.params()) assert.deepEqual(c.getParam(p.name), a.getParam(p.name), p.name);
    const { [`${a.params()[0].name}.exp_avg`]: _dropped, ...partial } = state.tensors;
    assert.throws(() => c.loadOptimizerState({ step: 2, tensors: partial }), /no moments for parameter/);
  });
});

describe('generation', () => {
  it('logprobs: false gives the same samples with NaN log-probs (greedy skips its softmax); not with topLogprobs', async () => {
    const m = await PolicyModel.random(small, { seed, initStd: 0.5 });
    const prompts = randomSeqs(3, () => 1 + rng.int(12), small.vocabSize);
    for (const o of [{ temperature: 0 }, { temperature: 0.9, seed: rng.int(1e6), n: 2 }, { temperature: 1.1, topP: 0.9, minP: 0.02, seed: rng.int(1e6) }]) {
      const want = await m.generate(prompts, { maxNewTokens: 8, ...o });
      const got = await m.generate(prompts, { maxNewTokens: 8, ...o, logprobs: false });
      assert.deepEqual(got.map((g) => [Array.from(g.tokens), g.finishReason]), want.map((g) => [Array.from(g.tokens), g.finishReason]), JSON.stringify(o));
      assert.ok(got.every((g) => g.logprobs.length === g.tokens.length && g.logprobs.every(Number.isNaN)), JSON.stringify(o));
      assert.ok(want.every((g) => g.logprobs.every(Number.isFinite)));
    }
    await assert.rejects(m.generate(prompts, { maxNewTokens: 2, logprobs: false, topLogprobs: 2 }), /'topLogprobs' \(2\) needs the log-probs; drop 'logprobs: false' or set topLogprobs to 0/);
  });

  // Above 4,096 tokens the alternatives and top-k select by the k-th largest logit first
  // (native/model/generate.cc, top_k_ids: a min-heap for k <= V / 16, else nth_element on the
  // values): the first step's alternatives against that step's logits from logits(). Those come
  // from another product than the decode step's (the last bits can differ), so values within
  // 1e-4 of each other may come in either order; the greedy alternatives' log-probs (the
  // logits shifted by one constant, in float) must be non-increasing. (Exact ties, lowest id
  // first: the decode-harness tests, where both samplers see the same logits.)
  it('alternatives over a vocabulary above 4,096: the k largest logits, largest first, lowest id on ties', async () => {
    const V = 4097 + rng.int(3000);
    const m = await PolicyModel.random({ ...small, vocabSize: V }, { seed, initStd: 0.5 });
    const prompt = randomSeqs(1, () => 2 + rng.int(8), V)[0]!;
    const lg = await m.logits(packSequences([prompt]));
    const last = lg.slice((prompt.length - 1) * V, prompt.length * V);
    const order = Array.from({ length: V }, (_, i) => i).sort((a, b) => last[b]! - last[a]! || a - b);
    const tol = 1e-4;
    for (const k of [1, 1 + rng.int(20), Math.ceil(V / 16) + rng.int(V / 2)]) {
      for (const o of [{ temperature: 0 }, { temperature: 0.8, topK: 1 + rng.int(40), seed: rng.int(1e6) }]) {
        const [g] = await m.generate([prompt], { maxNewTokens: 1, topLogprobs: k, ...o });
        const at = `k ${k}, ${JSON.stringify(o)} (seed ${seed})`;
        const ids = Array.from(g!.topIds!.subarray(0, k));
        assert.equal(new Set(ids).size, k, `${at}: distinct ids`);
        // the same ids as the sort, up to values within tol of the k-th
        const kth = last[order[k - 1]!]!;
        for (const id of ids) assert.ok(last[id]! >= kth - tol, `${at}: id ${id} (${last[id]}) below the k-th largest ${kth}`);
        for (const id of order.slice(0, k)) assert.ok(ids.includes(id) || last[id]! <= kth + tol, `${at}: id ${id} (${last[id]}) missing`);
        // in order: by the logits up to tol; greedy: by the reported log-probs exactly
        for (let r = 0; r + 1 < k; r++) assert.ok(last[ids[r]!]! >= last[ids[r + 1]!]! - tol, `${at}: ids ${ids[r]}, ${ids[r + 1]} out of order`);
        if (o.temperature === 0) {
          const lp = Array.from(g!.topLogprobs!.subarray(0, k));
          for (let r = 0; r + 1 < k; r++) assert.ok(lp[r]! >= lp[r + 1]!, `${at}: log-probs ${lp[r]}, ${lp[r + 1]} of ids ${ids[r]}, ${ids[r + 1]}`);
        }
      }
    }
  });

  it('seeded sampling is reproducible; log-probs equal the scoring API; n samples share a prompt', async () => {
    const m = await PolicyModel.random({ ...small, modelType: 'olmo2', tieWordEmbeddings: true }, { seed, initStd: 0.3 });
    const prompts = randomSeqs(3, () => 1 + rng.int(12), small.vocabSize);
    const opts = { maxNewTokens: 10, temperature: 0.8, n: 3, seed: rng.int(1e6) };
    const g1 = await m.generate(prompts, opts);
    const g2 = await m.generate(prompts, opts);
    assert.equal(g1.length, 9);
    assert.deepEqual(g1.map((g) => Array.from(g.tokens)), g2.map((g) => Array.from(g.tokens)));
    assert.deepEqual(g1.map((g) => Array.from(g.logprobs)), g2.map((g) => Array.from(g.logprobs)));
    // (batching and per-prompt seeds: test/model/generate-seeds.test.ts, on the reference GEMM)
    await assert.rejects(m.generate(prompts, { ...opts, seeds: [1, 2] }), /'seeds' has 2 entries but there are 3 prompts/);
    // the samples of one prompt differ from each other (vocab 300, 10 tokens)
    assert.notDeepEqual(Array.from(g1[0].tokens), Array.from(g1[1].tokens));
    // log-probs equal scoring at the same temperature
    const seqs = g1.map((g, i) => [...prompts[Math.floor(i / 3)], ...g.tokens]);
    const b = packSequences(seqs);
    const lp = await m.score(b, { temperature: 0.8 });
    g1.forEach((g, i) => {
      const start = b.seqOffsets[i] + prompts[Math.floor(i / 3)].length;
      const e = relError(g.logprobs, lp.subarray(start, start + g.tokens.length));
      assert.ok(e <= 1e-4, `sample ${i}: ${e}`);
      assert.equal(g.finishReason, 'length');
    });
  });

  it('greedy with KV cache equals greedy by full recomputation; stop ids end a sample', async () => {
    const m = await PolicyModel.random(small, { seed, initStd: 0.3 });
    const prompt = randomSeqs(1, () => 6, small.vocabSize)[0];
    const [g] = await m.generate([prompt], { maxNewTokens: 6, temperature: 0 });
    const seq = [...prompt];
    for (let i = 0; i < 6; i++) {
      const lg = await m.logits(packSequences([seq]));
      const last = lg.subarray((seq.length - 1) * small.vocabSize, seq.length * small.vocabSize);
      let best = 0;
      for (let j = 1; j < last.length; j++) if (last[j] > last[best]) best = j;
      seq.push(best);
    }
    assert.deepEqual(Array.from(g.tokens), seq.slice(prompt.length));
    const [s] = await m.generate([prompt], { maxNewTokens: 6, temperature: 0, stopIds: [g.tokens[2]] });
    assert.equal(s.finishReason, 'stop');
    assert.deepEqual(Array.from(s.tokens), Array.from(g.tokens).slice(0, Array.from(g.tokens).indexOf(g.tokens[2]) + 1));
    const top = await m.generate([prompt], { maxNewTokens: 4, temperature: 1, topK: 5, topP: 0.9, seed: 7, n: 2 });
    for (const t of top) for (const x of t.logprobs) assert.ok(x <= 0 && x > -Math.log(5) - 1e-6 - 10);
    // min-p 1 keeps only the most likely token: the greedy tokens, each with log-prob 0
    const [mp] = await m.generate([prompt], { maxNewTokens: 6, temperature: 1.3, minP: 1, seed: 3 });
    assert.deepEqual(Array.from(mp.tokens), Array.from(g.tokens));
    assert.deepEqual(Array.from(mp.logprobs), [0, 0, 0, 0, 0, 0]);
  });

  it('a long generation runs off the event loop', async () => {
    const m = await PolicyModel.random(small, { seed });
    let ticks = 0;
    const timer = setInterval(() => { ticks++; }, 1);
    await m.generate(randomSeqs(4, () => 20, small.vocabSize), { maxNewTokens: 100, n: 2, temperature: 1, seed: 1 });
    clearInterval(timer);
    assert.ok(ticks > 0, 'the event loop kept running');
  });
});

describe('bad input', () => {
  const cfgText = (o: Record<string, unknown>) => JSON.stringify({
    model_type: 'qwen3', vocab_size: 64, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1,
    num_attention_heads: 2, num_key_value_heads: 1, head_dim: 8, max_position_embeddings: 32, ...o,
  });
  it('config.json errors name the field', () => {
    assert.throws(() => checkModelConfig(cfgText({ model_type: 'llama' })), /model_type 'llama' is not supported/);
    assert.throws(() => checkModelConfig(cfgText({ rope_scaling: { rope_type: 'yarn', factor: 4 } })), /rope_scaling 'yarn'/);
    assert.throws(() => checkModelConfig(cfgText({ hidden_size: undefined })), /'hidden_size' is missing/);
    assert.throws(() => checkModelConfig(cfgText({ num_key_value_heads: 3 })), /multiple of num_key_value_heads/);
    assert.throws(() => checkModelConfig('{"model_type": "qwen3",'), /config.json: invalid JSON/);
  });

  it('missing, corrupt or mismatched safetensors are clear errors', async () => {
    const m = await PolicyModel.random(small, { seed });
    const d = join(work, 'bad');
    await m.save(d, { dtype: 'bfloat16' });
    const st = join(d, 'model.safetensors');
    const good = readFileSync(st);
    await assert.rejects(PolicyModel.load(join(work, 'nope')), /config.json: cannot open/);
    writeFileSync(st, good.subarray(0, good.length - 100));
    await assert.rejects(PolicyModel.load(d), /model.safetensors: corrupt safetensors file.*truncated/);
    writeFileSync(st, good.subarray(0, 4));
    await assert.rejects(PolicyModel.load(d), /model.safetensors: corrupt/);
    writeFileSync(st, good);
    const cfg = JSON.parse(readFileSync(join(d, 'config.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(d, 'config.json'), JSON.stringify({ ...cfg, intermediate_size: 50 }));
    await assert.rejects(PolicyModel.load(d), /'model.layers.0.mlp.gate_proj.weight' has shape \[48, 32\] but config.json \(hidden_size, intermediate_size\) implies \[50, 32\]/);
    rmSync(st);
    writeFileSync(join(d, 'config.json'), JSON.stringify(cfg));
    await assert.rejects(PolicyModel.load(d), /no model.safetensors or model.safetensors.index.json/);
  });

  it('token ids outside the vocabulary and positions beyond max_position_embeddings are rejected', async () => {
    const m = await PolicyModel.random(small, { seed });
    await assert.rejects(m.score(packSequences([[1, 2, 300]])), /token id 300 at position 2 is outside the vocabulary \[0, 300\)/);
    await assert.rejects(m.score(packSequences([Array.from({ length: 129 }, () => 1)])), /beyond max_position_embeddings \(128\)/);
    await assert.rejects(m.generate([[1, -1]], { maxNewTokens: 2 }), /outside the vocabulary/);
    await assert.rejects(m.generate([Array.from({ length: 128 }, () => 1)], { maxNewTokens: 2 }), /max_position_embeddings/);
    await assert.rejects(m.accumulate({ ...packSequences([[1, 2]]) }, {}), /'advantages' are required for the GRPO loss/);
    await assert.rejects(m.accumulate({ ...packSequences([[1, 2]]), advantages: new Float32Array(2), oldLogp: new Float32Array(2) }, { beta: 0.1 }), /reference/);
  });

  it('a NaN logit anywhere in a row (not only at its maximum) stops generation with one clear error', async () => {
    const m = await PolicyModel.random(small, { seed, initStd: 0.3 });
    const w = m.getParam('lm_head.weight');
    const row = 1 + rng.int(small.vocabSize - 1);
    w.fill(Number.NaN, row * small.hiddenSize, (row + 1) * small.hiddenSize);
    m.setParam('lm_head.weight', w);
    for (const o of [{ temperature: 0 }, { temperature: 1 }, { temperature: 1, topP: 0.9 }, { temperature: 1, minP: 0.1 }]) {
      await assert.rejects(m.generate([[1, 2, 3]], { maxNewTokens: 2, ...o }), /the model produced NaN or -inf logits/, JSON.stringify(o));
    }
  });

  it('an impossible allocation is an out-of-memory error, not a crash', async () => {
    await assert.rejects(
      PolicyModel.random({ ...small, vocabSize: 2 ** 31 - 1, hiddenSize: 65536 }, { seed }),
      /out of memory allocating .* for the model weights/,
    );
  });
});
