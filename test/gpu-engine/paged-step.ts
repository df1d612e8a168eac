// Helpers for the device engine's paged step (PolicyModel.pagedStep / pagedLogits), shared by
// test/gpu-engine/paged-step.test.ts (npm test, 'emulate') and the device tests under test/gpu/
// (the same calls on 'cuda'). A small hand driver, independent of the scheduler: each sequence
// gets its blocks from a counter as it grows, prefills in chunks of a given size, then decodes;
// the arrays go through lib/rollout/paged's planArrays, as the rollout engine's do.
import { type PolicyModel, type PagedSampling } from '../../lib/model/index.js';
import { planArrays, type PlanArrays } from '../../lib/rollout/paged/plan-arrays.js';
import type { PlannedSeq, StepPlan } from '../../lib/rollout/paged/scheduler.js';

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
}

export interface PagedRun {
  /** Generated tokens per sequence. */
  tokens: number[][];
  /** mode 'logits': each sampled row's logits, per sequence (row i predicts tokens[i]). */
  logits: Float32Array[][];
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
  const st = prompts.map((p) => ({ seq: [...p], computed: 0, table: [] as number[], out: [] as number[], logits: [] as Float32Array[] }));
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
    if (o.mode === 'logits') {
      const z = await model.pagedLogits(arrays);
      toks = Array.from({ length: R }, (_, r) => argmax(z, arrays.sampleRows[r] * V, V));
      let r = 0;
      live.forEach(({ s }, k) => { if (seqs[k].sampleIndices!.length) s.logits.push(z.slice(arrays.sampleRows[r] * V, (arrays.sampleRows[r++] + 1) * V)); });
    } else {
      toks = (await model.pagedStep(arrays, greedy(R))).tokens;
    }
    let r = 0;
    live.forEach(({ s }, k) => {
      s.computed += seqs[k].tokenIds.length;
      if (seqs[k].sampleIndices!.length) {
        const t = toks[r++];
        s.out.push(t);
        s.seq.push(t);
      }
    });
    steps++;
  }
  return { tokens: st.map((s) => s.out), logits: st.map((s) => s.logits), steps };
}
