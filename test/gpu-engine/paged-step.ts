// The device engine's paged step (PolicyModel.pagedStep / pagedLogits) checked against its
// specs, shared by test/gpu-engine/paged-step.test.ts (npm test, 'emulate') and
// test/gpu/paged-step.test.ts (the same checks on 'cuda'; genbench's device tests may reuse
// them). A small hand driver, independent of the scheduler: each sequence gets its blocks from
// a counter as it grows, prefills in chunks of a given size, then decodes; the arrays go
// through lib/rollout/paged's planArrays, as the rollout engine's do. Tolerances: docs/gpu.md,
// "Generation".
import assert from 'node:assert/strict';
import { packSequences, type ModelSizes, type PolicyModel, type PagedSampling } from '../../lib/model/index.js';
import { relError } from '../model/helpers.js';
import type { Rng } from '../helpers/random.js';
import { planArrays, type PlanArrays } from '../../lib/rollout/paged/plan-arrays.js';
import type { PlannedSeq, StepPlan } from '../../lib/rollout/paged/scheduler.js';
import { processedLogp } from '../helpers/sampling-reference.js';

/** One sequence of a step, the way the scheduler plans it. */
export interface StepSeq {
  /** Position of the first new token. */
  start: number;
  tokenIds: number[];
  blockTable: number[];
  /** Sample indices to draw from the last new token's logits (empty: no logits row). */
  sampleIndices?: number[];
}

/** The PlanArrays of one step (slots from the block tables), through planArrays(). */
export function stepArrays(seqs: StepSeq[], blockSize: number, copies: { src: number; dst: number }[] = []): PlanArrays {
  const planned: PlannedSeq[] = seqs.map((q, i) => ({
    seqId: i, requestId: i, start: q.start, tokenIds: q.tokenIds, blockTable: q.blockTable,
    slots: q.tokenIds.map((_, k) => q.blockTable[Math.floor((q.start + k) / blockSize)] * blockSize + ((q.start + k) % blockSize)),
    sampleIndices: q.sampleIndices ?? [], kind: q.start === 0 ? 'prefill' : 'decode',
    request: { promptIds: [], maxTokens: 1 },
  }));
  const plan: StepPlan = {
    step: 0, copies, seqs: planned, preempted: [],
    counts: { prefillTokens: 0, decodeTokens: 0, prefillSaved: 0, cacheHitTokens: 0, preemptions: 0, copies: copies.length },
  };
  return planArrays(plan);
}

/** Greedy sampling options for R rows (temperature 0). */
export function greedy(R: number): PagedSampling {
  return samplingOf(R, { temperature: 0 });
}

/** The same options on R rows; seed and steps per row when given. */
export function samplingOf(R: number, o: { temperature?: number; topP?: number; topK?: number; minP?: number; seed?: number[] | number; step?: number[] | number }): PagedSampling {
  const per = (v: number[] | number | undefined, d: number): number[] => Array.from({ length: R }, (_, r) => (Array.isArray(v) ? v[r] : v ?? d));
  return {
    temperature: new Float32Array(R).fill(o.temperature ?? 1), topP: new Float32Array(R).fill(o.topP ?? 1),
    topK: new Int32Array(R).fill(o.topK ?? 0), minP: new Float32Array(R).fill(o.minP ?? 0),
    seed: Uint32Array.from(per(o.seed, 0)), step: Int32Array.from(per(o.step, 0)),
  };
}

export interface PagedRunOptions {
  blockSize: number;
  /** Prefill tokens per sequence and step (Infinity: the whole prompt in one step). */
  chunk: number;
  /** Tokens to generate per sequence (clipped at the model's context). */
  newTokens: number;
  /** Greedy tokens from pagedStep (default), or the logits of every sampled row from pagedLogits with the argmax taken here. */
  mode?: 'step' | 'logits';
  /** Blocks to allocate (default: enough for every sequence). */
  blocks?: number;
  /** mode 'step': sampling options (default greedy); sequence i draws as the CPU engine's generate()
   * draws prompt i: the stream (seed + i, 0), step = the index of the token in its completion. */
  sample?: { temperature: number; topP?: number; topK?: number; minP?: number; seed?: number };
}

export interface PagedRun {
  /** Generated tokens per sequence. */
  tokens: number[][];
  /** mode 'logits': each sampled row's logits, per sequence (row i predicts tokens[i]). */
  logits: Float32Array[][];
  /** mode 'step': the log-prob pagedStep returned for each token. */
  logprobs: number[][];
  steps: number;
}

/** Lowest id of the largest value (the samplers' greedy rule). */
export function argmax(z: ArrayLike<number>, from = 0, n = z.length): number {
  let best = from;
  for (let i = from + 1; i < from + n; i++) if (z[i] > z[best]) best = i;
  return best - from;
}

/**
 * Greedy generation of every prompt together over the paged cache: each step holds, per
 * unfinished sequence, its next prefill chunk or its one decode token.
 */
export async function runPaged(model: PolicyModel, prompts: number[][], o: PagedRunOptions): Promise<PagedRun> {
  const { blockSize } = o;
  const maxPos = model.info.maxPositionEmbeddings, V = model.info.vocabSize;
  const caps = prompts.map((p) => Math.min(o.newTokens, maxPos - p.length));
  const need = prompts.reduce((a, p, i) => a + Math.ceil((p.length + caps[i]) / blockSize), 0);
  model.kvAllocate({ blocks: o.blocks ?? need, blockSize });
  let next = 0;
  const st = prompts.map((p) => ({ seq: [...p], computed: 0, table: [] as number[], out: [] as number[], logits: [] as Float32Array[], logp: [] as number[] }));
  let steps = 0;
  for (;;) {
    const live = st.map((s, i) => ({ s, i })).filter(({ s, i }) => s.out.length < caps[i]);
    if (live.length === 0) break;
    const seqs: StepSeq[] = live.map(({ s }) => {
      const n = s.computed < s.seq.length - 1 ? Math.min(o.chunk, s.seq.length - s.computed) : 1;
      while (s.table.length * blockSize < s.computed + n) s.table.push(next++);
      const last = s.computed + n === s.seq.length;
      return { start: s.computed, tokenIds: s.seq.slice(s.computed, s.computed + n), blockTable: [...s.table], sampleIndices: last ? [0] : [] };
    });
    const arrays = stepArrays(seqs, blockSize);
    const R = arrays.sampleRows.length;
    let toks: ArrayLike<number>;
    let lps: ArrayLike<number> = [];
    if (o.mode === 'logits') {
      const z = await model.pagedLogits(arrays);
      toks = Array.from({ length: R }, (_, r) => argmax(z, arrays.sampleRows[r] * V, V));
      let r = 0;
      live.forEach(({ s }, k) => { if (seqs[k].sampleIndices!.length) s.logits.push(z.slice(arrays.sampleRows[r] * V, (arrays.sampleRows[r++] + 1) * V)); });
    } else {
      const rows = live.filter((_, k) => seqs[k].sampleIndices!.length > 0);
      const sampling = o.sample === undefined ? greedy(R)
        : samplingOf(R, { ...o.sample, seed: rows.map(({ i }) => (o.sample!.seed ?? 0) + i), step: rows.map(({ s }) => s.out.length) });
      const res = await model.pagedStep(arrays, sampling);
      toks = res.tokens;
      lps = res.logprobs;
    }
    let r = 0;
    live.forEach(({ s }, k) => {
      s.computed += seqs[k].tokenIds.length;
      if (seqs[k].sampleIndices!.length) {
        const t = toks[r];
        if (o.mode !== 'logits') s.logp.push(lps[r]);
        r++;
        s.out.push(t);
        s.seq.push(t);
      }
    });
    steps++;
  }
  return { tokens: st.map((s) => s.out), logits: st.map((s) => s.logits), logprobs: st.map((s) => s.logp), steps };
}

/** A small Qwen3 with GQA and an untied head; with initStd 0.1 its greedy continuations do not collapse to one repeated token. */
export const PAGED_SIZES: ModelSizes = {
  modelType: 'qwen3', vocabSize: 128, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2,
  headDim: 8, maxPositionEmbeddings: 256, tieWordEmbeddings: false,
};

/** Logits tolerance (relError: max |paged - full| / max |full|) of a paged row against the full-sequence forward. */
export const LOGITS_TOL = { f32: 1e-5, bf16: 3e-2 } as const;

export const randomPrompt = (rng: Rng, n: number, V: number): number[] => Array.from({ length: n }, () => rng.int(V));

/** The model's own full-sequence logits (PolicyModel.logits) of one sequence, [len x vocab]. */
export async function fullLogits(m: PolicyModel, seq: number[]): Promise<Float32Array> {
  return m.logits(packSequences([seq]));
}

/**
 * Three prompts of different lengths generated together, prefill whole (block 16), one token per
 * step (block 4) and in random chunks (random block): each sampled row's logits against
 * PolicyModel.logits of the finished sequence. Returns the worst relError.
 */
export async function checkLogitsAgainstFull(m: PolicyModel, storage: 'f32' | 'bf16', rng: Rng, what: string): Promise<number> {
  const V = m.info.vocabSize;
  let worst = 0;
  for (const [chunk, blockSize] of [[Infinity, 16], [1, 4], [2 + rng.int(8), 1 + rng.int(8)]] as const) {
    const prompts = [1 + rng.int(4), 5 + rng.int(20), 20 + rng.int(30)].map((n) => randomPrompt(rng, n, V));
    const run = await runPaged(m, prompts, { blockSize, chunk, newTokens: 6, mode: 'logits' });
    for (let i = 0; i < prompts.length; i++) {
      const full = await fullLogits(m, [...prompts[i], ...run.tokens[i]]);
      run.logits[i].forEach((z, k) => {
        const t = prompts[i].length - 1 + k;
        const e = relError(z, full.subarray(t * V, (t + 1) * V));
        worst = Math.max(worst, e);
        assert.ok(e <= LOGITS_TOL[storage], `${what}: ${storage}, chunk ${chunk}, block ${blockSize}, seq ${i}, row ${k}: logits rel error ${e} > ${LOGITS_TOL[storage]}`);
      });
    }
  }
  m.kvRelease();
  return worst;
}

/** Tokens (and log-probs when sampling) of the paged engine against the CPU engine's generate() on the same prompts. */
export async function checkAgainstGenerate(cpu: PolicyModel, dev: PolicyModel, prompts: number[][], o: Omit<PagedRunOptions, 'mode'>, what: string): Promise<{ tokens: number[][]; logpError: number }> {
  const s = o.sample ?? { temperature: 0 };
  const want = await cpu.generate(prompts, { maxNewTokens: o.newTokens, ...s });
  const got = await runPaged(dev, prompts, o);
  let logpError = 0;
  got.tokens.forEach((t, i) => {
    assert.deepEqual(t, Array.from(want[i].tokens), `${what}: prompt ${i}`);
    if (o.sample !== undefined) {
      const e = relError(got.logprobs[i], want[i].logprobs);
      logpError = Math.max(logpError, e);
      assert.ok(e < 1e-4, `${what}: prompt ${i}: log-probs differ by ${e}`);
    }
  });
  dev.kvRelease();
  return { tokens: got.tokens, logpError };
}

/**
 * Two sequences sharing two full prefix blocks and a copied partial one (copy-on-write before
 * the step's KV writes) against each sequence alone in blocks of its own, and against the full
 * forward.
 */
export async function checkSharedPrefix(m: PolicyModel, rng: Rng, what: string): Promise<number> {
  const V = m.info.vocabSize, bs = 4;
  const prompt = randomPrompt(rng, 2 * bs + 1 + rng.int(bs - 1), V);
  const P = prompt.length;
  const [a, b] = [rng.int(V), rng.int(V)];
  // shared: prefill once into blocks 0..2, then A decodes `a` in block 2 and B, forked, decodes `b`
  // in block 3, a copy of block 2
  m.kvAllocate({ blocks: 8, blockSize: bs });
  await m.pagedLogits(stepArrays([{ start: 0, tokenIds: prompt, blockTable: [0, 1, 2], sampleIndices: [0] }], bs));
  const shared = await m.pagedLogits(stepArrays([
    { start: P, tokenIds: [a], blockTable: [0, 1, 2], sampleIndices: [0] },
    { start: P, tokenIds: [b], blockTable: [0, 1, 3], sampleIndices: [0] },
  ], bs, [{ src: 2, dst: 3 }]));
  let worst = 0;
  for (const [k, tok] of [a, b].entries()) {
    m.kvAllocate({ blocks: 8, blockSize: bs });  // a fresh pool: nothing shared
    const alone = await m.pagedLogits(stepArrays([{ start: 0, tokenIds: [...prompt, tok], blockTable: [5, 6, 7], sampleIndices: [0] }], bs));
    const e = relError(shared.subarray(k * V, (k + 1) * V), alone);
    worst = Math.max(worst, e);
    assert.ok(e <= LOGITS_TOL.f32, `${what}: sequence ${k}: shared vs unshared logits rel error ${e}`);
    const full = await fullLogits(m, [...prompt, tok]);
    const ef = relError(alone, full.subarray(P * V, (P + 1) * V));
    assert.ok(ef <= LOGITS_TOL.f32, `${what}: sequence ${k}: paged vs full logits rel error ${ef}`);
  }
  m.kvRelease();
  return worst;
}


/**
 * One step drawing 6 samples of one row (a fork) and 3 of another, each with other options
 * (temperature, top-k, top-p, min-p, greedy, top-k 1): every token is in its kept set and its
 * log-prob is log softmax(logits / T) over that set, recomputed here from pagedLogits.
 */
export async function checkSampling(m: PolicyModel, rng: Rng, what: string): Promise<number> {
  const V = m.info.vocabSize, bs = 8;
  m.kvAllocate({ blocks: 8, blockSize: bs });
  const seqs: StepSeq[] = [
    { start: 0, tokenIds: randomPrompt(rng, 5 + rng.int(10), V), blockTable: [0, 1, 2], sampleIndices: [0, 1, 2, 3, 4, 5] },
    { start: 0, tokenIds: randomPrompt(rng, 3, V), blockTable: [3], sampleIndices: [0, 1, 2] },
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
  const s = samplingOf(R, { seed: rng.int(2 ** 31) });
  opts.forEach((o, r) => { s.temperature[r] = o.temperature; s.topK[r] = o.topK; s.topP[r] = o.topP; s.minP[r] = o.minP; s.step[r] = rng.int(100); });
  // the same arrays again: the step rewrites the same K and V at the same slots
  const res = await m.pagedStep(arrays, s);
  assert.equal(res.tokens.length, R);
  let worst = 0;
  for (let r = 0; r < R; r++) {
    const row = z.subarray(arrays.sampleRows[r] * V, (arrays.sampleRows[r] + 1) * V);
    const o = opts[r], tok = res.tokens[r];
    if (o.temperature === 0 || o.topK === 1) assert.equal(tok, argmax(row), `${what}: row ${r}: the argmax`);
    if (o.topK === 1 && o.temperature > 0) { assert.equal(res.logprobs[r], 0, `${what}: row ${r}: one token kept`); continue; }
    const ref = processedLogp(row, tok, o.temperature === 0 ? { ...o, temperature: 1 } : o);
    assert.ok(ref.kept, `${what}: row ${r}: token ${tok} is outside the kept set of ${JSON.stringify(o)}`);
    worst = Math.max(worst, Math.abs(res.logprobs[r] - ref.logp));
    assert.ok(Math.abs(res.logprobs[r] - ref.logp) < 1e-4, `${what}: row ${r}: log-prob ${res.logprobs[r]} vs ${ref.logp}`);
  }
  // the fork's first five samples (other streams, no filter that keeps one token): not all one token
  assert.ok(new Set(Array.from(res.tokens.subarray(0, 5))).size > 1, `${what}: the fork's samples are all ${res.tokens[0]}`);
  m.kvRelease();
  return worst;
}
