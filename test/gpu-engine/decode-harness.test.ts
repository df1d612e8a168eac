// The device decode kernels (native/gpu/kernels/paged_attention.h, sampling.h) run on the CPU
// by the kernel harness (the same code over the same grid, block by block, phase by phase)
// against their spec on fresh random inputs (seed printed; MURPHY_SEED replays): the KV append
// against a copy loop, paged attention against native/model's attention over a KV cache, and
// the sampler against the CPU sampler of generate() (model::sample_logits_cpu) with the same
// random numbers. f32 and bf16 storage; blocks and threads forward and in reverse order must
// give identical bits. What only a GPU shows (real concurrency, speed) is test/gpu/decode.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { packSequences, PolicyModel, type ModelSizes } from '../../lib/model/index.js';
import { kernelHarness } from '../../lib/native.js';
import { drain, KvPool, planArrays, Scheduler, type StepPlan } from '../../lib/rollout/paged/index.js';
import { Rng, testSeed, worstRatio } from '../helpers/random.js';
import { assertChiSquare, processedDistribution } from '../helpers/sampling-reference.js';

type Out = Record<string, Float32Array>;
type Case = Record<string, unknown> & { op: string };
const harness = (c: Case): { kernel: Out; reference: Out } => kernelHarness(c);

const seed = testSeed('decode-harness');
const rng = new Rng(seed);
const BF16_RTOL = 2 ** -8;
const blockSize = (): number => [32, 64, 128, 256][rng.int(4)]!;
type Tol = Record<string, { f32: [number, number]; bf16: [number, number] }>;

/** Runs c in both storage types and both orders; returns the forward runs. */
function check(c: Case, tol: Tol): Record<'f32' | 'bf16', { kernel: Out; reference: Out }> {
  const runs = {} as Record<'f32' | 'bf16', { kernel: Out; reference: Out }>;
  for (const dtype of ['f32', 'bf16'] as const) {
    const fwd = harness({ ...c, dtype, order: 'forward' });
    const rev = harness({ ...c, dtype, order: 'reverse' });
    for (const name of Object.keys(fwd.reference)) {
      const k = fwd.kernel[name]!, r = fwd.reference[name]!;
      assert.equal(k.length, r.length);
      assert.deepEqual(rev.kernel[name], k, `${c.op} ${dtype} ${name}: reverse order changed the bits (seed ${seed})`);
      const [atol, rtol] = tol[name]![dtype];
      const w = worstRatio(k, r, atol, rtol);
      assert.ok(w.ratio <= 1, `${c.op} ${dtype} ${name}[${w.index}]: kernel ${k[w.index]} vs spec ${r[w.index]} (ratio ${w.ratio.toFixed(2)}, seed ${seed})`);
    }
    runs[dtype] = fwd;
  }
  return runs;
}

const shuffle = <T>(a: T[]): T[] => {
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
};

/** A paged-attention case: sequences whose first blocks are shared (a common prefix), the rest their own, in random pool blocks. */
function pagedCase(o: { ctx: number[]; qlen: number[]; bs: number; G: number; rep: number; D: number; partition: number }): Case {
  const { ctx, qlen, bs, G, rep, D, partition } = o;
  const H = G * rep;
  const maxBlocks = Math.max(...ctx.map((n) => Math.ceil(n / bs)));
  const shared = Math.min(...ctx.map((n) => Math.floor((n - 1) / bs))); // full blocks every sequence has before its last
  const need = Math.ceil(ctx[0]! / bs) + ctx.slice(1).reduce((s, n) => s + Math.ceil(n / bs) - shared, 0);
  const nBlocks = need + 3; // a few blocks nobody uses
  const free = shuffle(Array.from({ length: nBlocks }, (_, i) => i));
  const table = new Int32Array(ctx.length * maxBlocks).fill(-1);
  ctx.forEach((n, s) => {
    for (let b = 0; b < Math.ceil(n / bs); b++) table[s * maxBlocks + b] = s > 0 && b < shared ? table[b]! : free.pop()!;
  });
  const nNew = qlen.reduce((a, b) => a + b, 0), pool = nBlocks * bs * G * D;
  return {
    op: 'paged_attention', block: blockSize(),
    params: { heads: H, kvHeads: G, headDim: D, blockSize: bs, nBlocks, maxBlocks, partition },
    inputs: { q: rng.normals(nNew * H * D, 1), kPool: rng.normals(pool, 1), vPool: rng.normals(pool, 1) },
    intInputs: { blockTable: table, contextLens: Int32Array.from(ctx), queryLens: Int32Array.from(qlen) },
  };
}
const ATTN_TOL: Tol = {
  out: { f32: [1e-5, 1e-4], bf16: [1e-5, BF16_RTOL + 1e-4] }, // bf16: one rounding of the output
  lse: { f32: [1e-5, 1e-5], bf16: [1e-5, 1e-5] },             // fp32 in both storage types
};

interface SampleOpts { T: number; topK: number; topP: number; minP: number }
/** A sampling case: one row of logits per draw, per-row options and seeds. */
function sampleCase(logits: Float32Array, V: number, opts: (r: number) => SampleOpts, seeds: (r: number) => [number, number, number]): Case {
  const rows = logits.length / V;
  const o = Array.from({ length: rows }, (_, r) => opts(r));
  const s = Array.from({ length: rows }, (_, r) => seeds(r));
  return {
    op: 'sample', block: blockSize(), params: { vocab: V },
    inputs: {
      logits, temperature: Float32Array.from(o, (x) => x.T), topP: Float32Array.from(o, (x) => x.topP), minP: Float32Array.from(o, (x) => x.minP),
    },
    intInputs: {
      topK: Int32Array.from(o, (x) => x.topK), seed: Int32Array.from(s, (x) => x[0]), sampleIndex: Int32Array.from(s, (x) => x[1]),
      step: Int32Array.from(s, (x) => x[2]),
    },
  };
}
// Tokens exact; log-probs: both sides evaluate the same fp64 formula, the masses summed in a
// different order (~1e-16 relative), then rounded to f32: within 1e-6 absolute + relative.
const SAMPLE_TOL: Tol = { token: { f32: [0, 0], bf16: [0, 0] }, logp: { f32: [1e-6, 1e-6], bf16: [1e-6, 1e-6] } };
const freshSeeds = (): [number, number, number] => [rng.int(2 ** 31), rng.int(16), rng.int(4096)];

describe('device decode kernels through the CPU harness, against their CPU spec', () => {
  it('KV append into a paged pool at a slot mapping (padding slots -1 skipped): exact', () => {
    const G = 1 + rng.int(4), D = [16, 24, 64][rng.int(3)]!, bs = [4, 8, 16][rng.int(3)]!, nBlocks = 4 + rng.int(6);
    const nNew = 1 + rng.int(Math.min(20, nBlocks * bs));
    const slots = Int32Array.from(shuffle(Array.from({ length: nBlocks * bs }, (_, i) => i)).slice(0, nNew), (s) => (rng.int(6) === 0 ? -1 : s));
    const pool = nBlocks * bs * G * D;
    check({
      op: 'kv_append', block: blockSize(), params: { kvHeads: G, headDim: D, nBlocks, blockSize: bs },
      inputs: { k: rng.normals(nNew * G * D), v: rng.normals(nNew * G * D), kPool: rng.normals(pool), vPool: rng.normals(pool) },
      intInputs: { slots },
    }, { kPool: { f32: [0, 0], bf16: [0, 0] }, vPool: { f32: [0, 0], bf16: [0, 0] } });
  });

  it('paged attention: decode and chunked prefill, shared prefix blocks, contexts not multiples of the block, several partitions, GQA', () => {
    for (let rep = 0; rep < 3; rep++) {
      const nSeqs = 1 + rng.int(4), partition = [16, 32, 48][rng.int(3)]!;
      const ctx = Array.from({ length: nSeqs }, () => 1 + rng.int(5 * partition));
      ctx[0] = 2 * partition + 1 + rng.int(partition); // at least three partitions
      const qlen = ctx.map((n) => (rng.int(2) === 0 ? 1 : 1 + rng.int(Math.min(n, 7))));
      check(pagedCase({ ctx, qlen, bs: [4, 8, 16][rng.int(3)]!, G: [1, 2, 4][rng.int(3)]!, rep: [1, 2, 4][rng.int(3)]!, D: [16, 40, 64, 128][rng.int(4)]!, partition }), ATTN_TOL);
    }
  });

  it('paged attention at partition and block boundaries (context = 1, = partition, = 2 partitions + 1)', () => {
    const p = 32;
    check(pagedCase({ ctx: [1, p, 2 * p, 2 * p + 1], qlen: [1, p, 3, 1], bs: 8, G: 2, rep: 2, D: 32, partition: p }), ATTN_TOL);
  });

  it('KV append + paged attention execute the paged scheduler\'s plans (prefix-cache hits, forks with copy-on-write, chunks, preemption) as dense attention over each sequence', async () => {
    const bs = 4, blocks = 14, G = 2, H = 4, D = 8, VOC = 16, row = G * D;
    const pool = new KvPool({ blocks, blockSize: bs });
    const s = new Scheduler(pool, { maxModelLen: 40, tokenBudget: 10 });
    // k, v, q of a token: fixed pseudo-random vectors of (token, position), so shared prefixes hold the same KV
    const vec = (tok: number, pos: number, what: number, n: number) => new Rng((seed ^ (tok * 7919 + pos * 104729 + what * 15485863)) >>> 0).normals(n);
    let kPool = rng.normals(blocks * bs * row), vPool = rng.normals(blocks * bs * row); // garbage where nothing was written
    const own = new Map<number, number[]>(); // seqId -> its tokens at positions >= prompt length
    let checked = 0, copies = 0, preempted = 0;
    const execute = (plan: StepPlan) => {
      for (const c of plan.copies) {
        kPool.copyWithin(c.dst * bs * row, c.src * bs * row, (c.src + 1) * bs * row);
        vPool.copyWithin(c.dst * bs * row, c.src * bs * row, (c.src + 1) * bs * row);
      }
      copies += plan.copies.length, preempted += plan.preempted.length;
      const a = planArrays(plan), T = a.inputIds.length;
      const k = new Float32Array(T * row), v = new Float32Array(T * row), q = new Float32Array(T * H * D);
      for (let t = 0; t < T; t++) {
        k.set(vec(a.inputIds[t]!, a.positions[t]!, 0, row), t * row);
        v.set(vec(a.inputIds[t]!, a.positions[t]!, 1, row), t * row);
        q.set(vec(a.inputIds[t]!, a.positions[t]!, 2, H * D), t * H * D);
      }
      const app = harness({ op: 'kv_append', dtype: 'f32', params: { kvHeads: G, headDim: D, nBlocks: blocks, blockSize: bs }, inputs: { k, v, kPool, vPool }, intInputs: { slots: a.slotMapping } });
      kPool = app.kernel.kPool!, vPool = app.kernel.vPool!;
      const queryLens = Int32Array.from(plan.seqs, (_, i) => a.queryStartLoc[i + 1]! - a.queryStartLoc[i]!);
      const att = harness({
        op: 'paged_attention', dtype: 'f32', block: 32, params: { heads: H, kvHeads: G, headDim: D, blockSize: bs, nBlocks: blocks, maxBlocks: a.maxBlocks, partition: 8 },
        inputs: { q, kPool, vPool }, intInputs: { blockTable: a.blockTables, contextLens: a.seqLens, queryLens },
      });
      const out = att.kernel.out!;
      const tokens = plan.seqs.map((p, i) => {
        const P = p.request.promptIds.length, mine = own.get(p.seqId) ?? [];
        p.tokenIds.forEach((tok, j) => { if (p.start + j >= P) mine[p.start + j - P] = tok; });
        own.set(p.seqId, mine);
        const tokAt = (x: number) => (x < P ? p.request.promptIds[x]! : mine[x - P]!);
        for (let j = 0; j < p.tokenIds.length; j++) { // dense attention of this token over positions 0..pos
          const t = a.queryStartLoc[i]! + j, pos = p.start + j;
          for (let h = 0; h < H; h++) {
            const g = Math.floor(h / (H / G)), qh = q.subarray((t * H + h) * D, (t * H + h + 1) * D);
            const sc = Array.from({ length: pos + 1 }, (_, x) => vec(tokAt(x), x, 0, row).subarray(g * D, (g + 1) * D).reduce((acc, kd, d) => acc + kd * qh[d]!, 0) / Math.sqrt(D));
            const mx = Math.max(...sc), e = sc.map((z) => Math.exp(z - mx)), S = e.reduce((x, y) => x + y, 0);
            const dense = new Float64Array(D);
            for (let x = 0; x <= pos; x++) vec(tokAt(x), x, 1, row).subarray(g * D, (g + 1) * D).forEach((vd, d) => { dense[d] += e[x]! / S * vd; });
            const w = worstRatio(out.subarray((t * H + h) * D, (t * H + h + 1) * D), dense, 1e-5, 1e-4);
            assert.ok(w.ratio <= 1, `step ${plan.step} seq ${p.seqId} position ${pos} head ${h}: paged ${out[(t * H + h) * D + w.index]} vs dense ${dense[w.index]} (seed ${seed})`);
            checked++;
          }
        }
        // the drawn tokens: a function of the attention output (the loop feeds them back)
        const last = a.queryStartLoc[i + 1]! - 1;
        return p.sampleIndices.map((j) => Math.floor(Math.abs(out[last * H * D + j]!) * 1000) % VOC);
      });
      return { tokens };
    };
    const prompt = Array.from({ length: 10 }, () => rng.int(VOC));
    s.submit({ promptIds: prompt, n: 3, maxTokens: 6 });
    s.submit({ promptIds: prompt, n: 2, maxTokens: 5 });                                         // the prefix cache
    s.submit({ promptIds: [...prompt.slice(0, 5), ...Array.from({ length: 6 }, () => rng.int(VOC))], n: 2, maxTokens: 7 });
    await drain(s, { execute });
    assert.ok(checked > 100, `${checked} (token, head) outputs checked`);
    assert.ok(copies > 0, 'no copy-on-write happened: the test lost its point');
    console.log(`# paged plans: ${checked} (token, head) outputs checked, ${copies} block copies, ${preempted} preemptions`);
  });

  it('sampling: the same token as the CPU sampler for the same seed and options, over many seeds (temperature, top-k, top-p, min-p, greedy)', () => {
    const V = 50 + rng.int(100), rows = 240;
    const logits = rng.normals(rows * V, 1 + 2 * rng.next());
    const menu: SampleOpts[] = [
      { T: 1, topK: 0, topP: 1, minP: 0 },                      // plain: drawn in id order
      { T: 0.3 + rng.next(), topK: 0, topP: 1, minP: 0 },
      { T: 1, topK: 1 + rng.int(20), topP: 1, minP: 0 },
      { T: 0.8, topK: 0, topP: 0.5 + 0.5 * rng.next(), minP: 0 },
      { T: 1.2, topK: 0, topP: 1, minP: 0.01 + 0.3 * rng.next() },
      { T: 0.7, topK: 2 + rng.int(30), topP: 0.9, minP: 0.05 },  // all three
      { T: 0, topK: 5, topP: 0.5, minP: 0.1 },                   // greedy: filters ignored
      { T: 1, topK: 1, topP: 1, minP: 0 },                       // one token kept: logp 0
      { T: 1, topK: V + 5, topP: 1, minP: 0 },                   // top-k beyond the vocabulary: off
    ];
    check(sampleCase(logits, V, (r) => menu[r % menu.length]!, freshSeeds), SAMPLE_TOL);
  });

  it('sampling ties: equal logits are ordered lowest id first, as the CPU sampler does (bf16-like and integer logits, -0 = +0)', () => {
    const V = 64, rows = 200;
    const logits = Float32Array.from({ length: rows * V }, () => (rng.int(7) - 3) * (rng.int(2) === 0 ? 1 : 0.5));
    for (let i = 0; i < logits.length; i += 11) logits[i] = -0;
    const opts = (r: number): SampleOpts => [
      { T: 1, topK: 1 + rng.int(10), topP: 1, minP: 0 }, { T: 0.9, topK: 0, topP: 0.6, minP: 0 }, { T: 1, topK: 0, topP: 1, minP: 0.3 },
      { T: 0, topK: 0, topP: 1, minP: 0 }, { T: 1.5, topK: 3, topP: 0.7, minP: 0.1 },
    ][r % 5]!;
    check(sampleCase(logits, V, opts, freshSeeds), SAMPLE_TOL);
  });

  // Above 4096 kept ids the CPU sampler orders them by a radix sort (native/model/generate.cc,
  // sort_desc), not a comparison sort: ties, -0 and +0, -inf and the min-p prefix must come out
  // in the same order, so the device sampler's independent search draws the same tokens.
  it('sampling ties on a vocabulary above 4096 (the CPU sampler\'s radix sort and top-k selection): lowest id first, -0 = +0, -inf last', () => {
    const V = 4100 + rng.int(3000), rows = 20;
    // 0 the largest logit, so most draws fall among the zeros, a third of them -0
    const logits = Float32Array.from({ length: rows * V }, () => (rng.int(5) - 4) * 0.25);
    for (let i = 0; i < logits.length; i += 3) if (logits[i] === 0) logits[i] = -0;
    for (let i = 5; i < logits.length; i += 17) logits[i] = -Infinity;
    // top-k above 4,096 ids selects by a histogram of the keys' top bits first (top_k_ids): k
    // lands inside a bucket of equal logits, or at its edge
    const opts = (r: number): SampleOpts => [
      { T: 1, topK: 0, topP: 0.5 + 0.45 * rng.next(), minP: 0 }, { T: 0.8, topK: 0, topP: 1, minP: 0.2 + 0.3 * rng.next() },
      { T: 1.3, topK: 0, topP: 0.9, minP: 0.01 }, { T: 1, topK: 1 + rng.int(3 * V / 5), topP: 1, minP: 0 },
      { T: 0.9, topK: 1 + rng.int(50), topP: 0.8, minP: 0 },
    ][r % 5]!;
    check(sampleCase(logits, V, opts, freshSeeds), SAMPLE_TOL);
  });

  it('sampling a larger vocabulary (not a multiple of the block) with -inf logits (masked tokens)', () => {
    const V = 3000 + rng.int(3000), rows = 12;
    const logits = rng.normals(rows * V, 3);
    for (let i = 0; i < logits.length; i += 7) logits[i] = -Infinity;
    check(sampleCase(logits, V, (r) => ({ T: 0.6 + 0.1 * r, topK: r % 2 ? 40 : 0, topP: r % 3 ? 0.95 : 1, minP: r % 4 ? 0 : 0.02 }), freshSeeds), SAMPLE_TOL);
  });

  // With no filter the CPU sampler finds the draw's block of 512 terms by the block sums, then the
  // token within it (native/model/generate.cc, kTermBlock); the device searches the whole row by
  // bisection. Many blocks, draws near block edges (u s at a boundary falls on either side by
  // rounding only), -inf tokens and whole blocks of them (terms 0: never drawn).
  it('sampling with no filter over many term blocks: the same token and log-prob as the CPU sampler\'s block walk', () => {
    const V = 2048 + rng.int(6000), rows = 40;
    const logits = rng.normals(rows * V, 0.5 + 3 * rng.next());
    for (let i = 0; i < logits.length; i += 5) logits[i] = -Infinity;
    for (let r = 0; r < rows; r += 4) logits.fill(-Infinity, r * V + 512, r * V + 1536);  // blocks 1-2 of the row: no mass
    check(sampleCase(logits, V, (r) => ({ T: [1, 0.7, 1.6][r % 3]!, topK: 0, topP: 1, minP: 0 }), freshSeeds), SAMPLE_TOL);
  });

  // Top-p alone over 4,096 tokens or more: the CPU sampler orders only the ids above the highest
  // cut x = (z - max z) / T >= -2, -4, ... -64 whose mass reaches top_p (generate.cc,
  // top_p_by_cut), the whole vocabulary when none does. Peaked rows (a few tokens hold the
  // mass: a low cut), flat rows (most of the vocabulary), ties and -inf, top_p up to 1 - 1e-7.
  it('sampling with top-p alone over a vocabulary above 4,096 (the CPU sampler\'s cut): the same tokens', () => {
    const V = 4096 + rng.int(4000), rows = 36;
    const logits = new Float32Array(rows * V);
    for (let r = 0; r < rows; r++) {
      const scale = [0.5, 3, 12][r % 3]!;
      for (let i = 0; i < V; i++) logits[r * V + i] = r % 4 === 3 ? Math.round(rng.normal() * 2) * 0.5 : rng.normal() * scale;
      for (let i = r; i < V; i += 13) logits[r * V + i] = -Infinity;
    }
    const opts = (r: number): SampleOpts => ({ T: [1, 0.6, 1.4][r % 3]!, topK: 0, topP: [0.9, 0.5 + 0.49 * rng.next(), 0.99, 0.9999999][r % 4]!, minP: 0 });
    check(sampleCase(logits, V, opts, freshSeeds), SAMPLE_TOL);
  });

  it('sampling: the device sampler draws what generate() draws from the same logits and seed (first token of n samples)', async () => {
    const sizes: ModelSizes = {
      modelType: 'qwen3', vocabSize: 300, hiddenSize: 32, intermediateSize: 48, numLayers: 2, numHeads: 4, numKvHeads: 2,
      headDim: 16, maxPositionEmbeddings: 64, tieWordEmbeddings: false, dtype: 'float32',
    };
    const m = await PolicyModel.random(sizes, { seed: rng.int(1e6), initStd: 0.5 });
    const prompt = Array.from({ length: 5 }, () => rng.int(sizes.vocabSize));
    const lg = await m.logits(packSequences([prompt]));
    const last = lg.slice((prompt.length - 1) * sizes.vocabSize, prompt.length * sizes.vocabSize);
    const n = 16, s = rng.int(2 ** 31);
    for (const o of [{ T: 1, topK: 0, topP: 1, minP: 0 }, { T: 0.8, topK: 40, topP: 0.9, minP: 0.02 }]) {
      const gens = await m.generate([prompt], { maxNewTokens: 1, temperature: o.T, topK: o.topK, topP: o.topP, minP: o.minP, seed: s, n });
      const logits = new Float32Array(n * sizes.vocabSize);
      for (let j = 0; j < n; j++) logits.set(last, j * sizes.vocabSize);
      const r = harness({ ...sampleCase(logits, sizes.vocabSize, () => o, (j) => [s, j, 0]), dtype: 'f32' }); // prompt 0: seed s, sample j, step 0
      assert.deepEqual(Array.from(r.kernel.token), gens.map((g) => g.tokens[0]), `options ${JSON.stringify(o)} (seed ${seed})`);
      const ref = Float32Array.from(gens, (g) => g.logprobs[0]!);
      const w = worstRatio(r.kernel.logp!, ref, 1e-5, 1e-5);
      assert.ok(w.ratio <= 1, `log-prob [${w.index}]: kernel ${r.kernel.logp![w.index]} vs generate() ${ref[w.index]} (seed ${seed})`);
    }
  });

  it('sampling: chi-square test of the sampled distribution on a small vocabulary (fixed seeds, significance 0.001)', () => {
    // Fixed seeds: the outcome is deterministic, so this cannot flake; the expected
    // distribution is computed here in float64 from the formula in docs/kernels.md.
    const V = 8, N = 2000;
    const row = Float32Array.of(1.2, -0.3, 0.8, 2.0, 0.8, -1.5, 0.1, 1.9);
    for (const o of [{ T: 1, topK: 0, topP: 1, minP: 0 }, { T: 0.7, topK: 5, topP: 1, minP: 0 }, { T: 1.3, topK: 0, topP: 0.8, minP: 0 }, { T: 1, topK: 0, topP: 1, minP: 0.2 }]) {
      const logits = new Float32Array(N * V);
      for (let r = 0; r < N; r++) logits.set(row, r * V);
      const c = sampleCase(logits, V, () => o, (r) => [1000 + r, r % 4, r % 7]);
      const run = harness({ ...c, dtype: 'f32', block: 32 });
      assert.deepEqual(run.kernel.token, run.reference.token, 'kernel and CPU sampler differ');
      const counts = new Array<number>(V).fill(0);
      for (const t of run.kernel.token) counts[t]!++;
      assertChiSquare(counts, processedDistribution(row, { temperature: o.T, topK: o.topK, topP: o.topP, minP: o.minP }), `options ${JSON.stringify(o)}`);
    }
  });

  it('deliberately broken variants are caught (a reduce that skips partitions; an id search one step short)', () => {
    const c = pagedCase({ ctx: [150, 97], qlen: [2, 1], bs: 8, G: 2, rep: 2, D: 32, partition: 16 });
    const broken = harness({ ...c, params: { ...(c.params as object), fault: 1 } });
    assert.ok(worstRatio(broken.kernel.out!, broken.reference.out!, 1e-5, 1e-4).ratio > 1, 'the broken reduce was not caught');
    const V = 100, rows = 300;
    const s = sampleCase(rng.normals(rows * V, 1), V, (r) => ({ T: 1, topK: r % 2 ? 20 : 0, topP: 1, minP: 0 }), freshSeeds);
    const b2 = harness({ ...s, params: { vocab: V, fault: 1 } });
    assert.notDeepEqual(b2.kernel.token, b2.reference.token, 'the short id search was not caught');
  });

  it('the sampler refuses a block larger than its launch bounds (512 threads: its fp64 partials need the registers)', () => {
    const V = 40;
    const s = sampleCase(rng.normals(2 * V, 1), V, () => ({ T: 1, topK: 0, topP: 1, minP: 0 }), freshSeeds);
    assert.throws(() => harness({ ...s, block: 1024 }), /harness: block size 1024 outside 1\.\.512/);
    assert.equal(harness({ ...s, block: 512 }).kernel.token!.length, 2);
  });

  it('bad cases are one clear error', () => {
    const base = pagedCase({ ctx: [10], qlen: [1], bs: 4, G: 1, rep: 2, D: 16, partition: 16 });
    const ii = base.intInputs as Record<string, Int32Array>;
    assert.throws(() => harness({ ...base, intInputs: { ...ii, blockTable: Int32Array.of(0, 1, 99) } }), /blockTable\[0\]\[2\] = 99 outside \[0, nBlocks\)/);
    assert.throws(() => harness({ ...base, params: { ...(base.params as object), heads: 3, kvHeads: 2 } }), /heads \(3\) must be a multiple of kvHeads \(2\)/);
    assert.throws(() => harness({ ...base, params: { ...(base.params as object), partition: 1024 } }), /param 'partition' = 1024.* must be an integer in \[1, 512\]/);
    assert.throws(() => harness({ op: 'kv_append', params: { kvHeads: 1, headDim: 2, nBlocks: 1, blockSize: 4 }, inputs: {}, intInputs: { slots: Int32Array.of(1, 1) } }), /slot 1 appears twice/);
    const s = sampleCase(new Float32Array(8), 4, () => ({ T: 1, topK: 0, topP: 0, minP: 0 }), () => [1, 0, 0]);
    assert.throws(() => harness(s), /kernelHarness\(sample\): topP must be in \(0, 1\]/);
  });
});
