// The native policy model (lib/model) as a RolloutEngine: KV-cache generation, batched
// across requests that share sampling options, and weight replacement from disk or memory.
import { randomInt } from 'node:crypto';
import { PolicyModel, type GenerateStep, type ModelInfo } from '../model/index.js';
import type { EngineInfo, EngineRequest, EngineSample, PolicyWeights, RolloutEngine, TokenAlternatives } from './types.js';
import { RolloutError } from './types.js';

/**
 * `policy` or the first object it wraps (NativePolicy.model, DistributedPolicy.inner, a few
 * levels deep) that passes `test`.
 */
export function findWrapped<T>(policy: unknown, test: (x: unknown) => x is T): T | undefined {
  let p = policy;
  for (let i = 0; i < 4 && p !== null && typeof p === 'object'; i++) {
    if (test(p)) return p;
    const o = p as { model?: unknown; inner?: unknown };
    p = o.model ?? o.inner;
  }
  return undefined;
}

/**
 * Whether `policy` is `weights` or wraps it (NativePolicy.model, DistributedPolicy.inner): the
 * engine then generates with the trainer's weights themselves and a sync moves nothing.
 */
export function sameWeights(policy: unknown, weights: unknown): boolean {
  return findWrapped(policy, (x): x is unknown => x === weights) !== undefined;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** [tokens x k] flat arrays as one TokenAlternatives per token. */
function alternatives(ids: Int32Array, logprobs: Float32Array, k: number): TokenAlternatives[] {
  const out: TokenAlternatives[] = [];
  for (let i = 0; i + k <= ids.length; i += k) out.push({ ids: Array.from(ids.subarray(i, i + k)), logprobs: Array.from(logprobs.subarray(i, i + k)) });
  return out;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => { resolve = r; });
  return { promise, resolve };
}

/**
 * Copies every parameter of `src` into `dst` after checking both have the same names and
 * shapes (nothing is copied when they do not). Shared by NativeEngine and PagedEngine.
 */
export function copyParams(dst: Pick<PolicyModel, 'params' | 'setParam'>, src: PolicyWeights): void {
  const theirs = new Map(src.params().map((p) => [p.name, p]));
  const mine = dst.params();
  for (const p of mine) {
    const t = theirs.get(p.name);
    if (t === undefined || t.numel !== p.numel || !sameIds(t.shape, p.shape)) {
      throw new RolloutError(`setWeights: the policy has no parameter '${p.name}' of shape [${p.shape.join(', ')}]`);
    }
  }
  if (theirs.size !== mine.length) throw new RolloutError(`setWeights: the policy has ${theirs.size} parameters, the served model ${mine.length}`);
  for (const p of mine) dst.setParam(p.name, src.getParam(p.name));
}

/** Whether two models have the same architecture and sizes (weights of one fit the other). */
export function sameShape(a: ModelInfo, b: ModelInfo): boolean {
  return shapeKey(a) === shapeKey(b);
}

function shapeKey(i: ModelInfo): string {
  return [i.modelType, i.vocabSize, i.hiddenSize, i.intermediateSize, i.numLayers, i.numHeads, i.numKvHeads, i.headDim,
    i.tieWordEmbeddings].join(',');
}

/**
 * RolloutEngine over a PolicyModel. Requests with equal sampling options share one native
 * call; each prompt carries its own seed (the request's, or a fresh random one), and the
 * native sampler draws a prompt's samples from its seed alone, so a seeded request gets the
 * same samples whoever else is asking.
 */
export class NativeEngine implements RolloutEngine {
  private m: PolicyModel;
  private readonly releaseHeap: boolean;

  /**
   * `releaseHeap`: each generate() returns the memory it freed to the system (a server between
   * requests); off, it stays for the next call (training and eval generate again at once).
   */
  constructor(model: PolicyModel, o: { releaseHeap?: boolean } = {}) {
    this.m = model;
    this.releaseHeap = o.releaseHeap ?? false;
  }

  /** Loads a Hugging Face model directory; `bf16Generate` generates on a bf16 copy of the weights (docs/model.md). */
  static async load(dir: string, o: { bf16Generate?: boolean; releaseHeap?: boolean } = {}): Promise<NativeEngine> {
    const m = await PolicyModel.load(dir);
    if (o.bf16Generate) m.setBf16({ generate: true });
    return new NativeEngine(m, { releaseHeap: o.releaseHeap });
  }

  /** The model currently served (replaced by loadWeights). */
  get model(): PolicyModel { return this.m; }

  info(): EngineInfo {
    const i = this.m.info;
    return { vocabSize: i.vocabSize, maxModelLen: i.maxPositionEmbeddings };
  }

  canBatch(a: EngineRequest, b: EngineRequest): boolean {
    return a.n === b.n && a.maxTokens === b.maxTokens && (a.topLogprobs ?? 0) === (b.topLogprobs ?? 0) && (a.logprobs !== false) === (b.logprobs !== false) &&
      a.temperature === b.temperature && a.topP === b.topP && a.topK === b.topK && (a.minP ?? 0) === (b.minP ?? 0) && sameIds(a.stopTokenIds, b.stopTokenIds);
  }

  /**
   * One native call for the batch. Each sample has a stop flag in shared memory: a request's
   * signal sets all of its own, onToken returning true sets that sample's; the native loop
   * reads them between decode steps.
   */
  async generate(batch: EngineRequest[]): Promise<EngineSample[][]> {
    if (batch.length === 0) return [];
    const r = batch[0];
    for (const b of batch) {
      if (b !== r && !this.canBatch(r, b)) throw new RolloutError('NativeEngine.generate: requests in one batch must share their sampling options');
    }
    const n = r.n, k = r.topLogprobs ?? 0;
    const cancel = new Int32Array(new SharedArrayBuffer(4 * batch.length * n));
    const stopAll = (p: number) => { for (let j = 0; j < n; j++) Atomics.store(cancel, p * n + j, 1); };
    const unlisten: (() => void)[] = [];
    batch.forEach((b, p) => {
      if (b.signal === undefined) return;
      if (b.signal.aborted) return stopAll(p);
      const on = () => stopAll(p);
      b.signal.addEventListener('abort', on, { once: true });
      unlisten.push(() => b.signal?.removeEventListener('abort', on));
    });
    const streaming = batch.some((b) => b.onToken !== undefined);
    // the native call may resolve before its last steps reach this thread: count them in
    let delivered = 0, expected = -1;
    const allDelivered = deferred();
    let failed: unknown;
    const onStep = !streaming ? undefined : (st: GenerateStep) => {
      delivered += st.samples.length;
      for (let i = 0; i < st.samples.length; i++) {
        const s = st.samples[i], p = Math.floor(s / n), req = batch[p];
        if (req.onToken === undefined || Atomics.load(cancel, s) !== 0) continue;
        const top = k > 0 ? { ids: Array.from(st.topIds.subarray(i * k, (i + 1) * k)), logprobs: Array.from(st.topLogprobs.subarray(i * k, (i + 1) * k)) } : undefined;
        try {
          if (req.onToken(s - p * n, { id: st.tokens[i], logprob: st.logprobs[i], top }) === true) Atomics.store(cancel, s, 1);
        } catch (e) {
          // a throwing callback stops the whole call, which then fails with its error
          failed ??= e;
          Atomics.store(cancel, s, 1);
          cancel.fill(1);
        }
      }
      if (expected >= 0 && delivered >= expected) allDelivered.resolve();
    };
    try {
      const gens = await this.m.generate(batch.map((b) => b.promptIds), {
        maxNewTokens: r.maxTokens, temperature: r.temperature, topP: r.topP, topK: r.topK, minP: r.minP ?? 0, n,
        seeds: batch.map((b) => b.seed ?? randomInt(2 ** 47)), stopIds: r.stopTokenIds, topLogprobs: k, releaseHeap: this.releaseHeap, cancel, onStep,
        logprobs: r.logprobs !== false,
      });
      if (streaming) {
        expected = gens.reduce((a, g) => a + g.tokens.length, 0);
        if (delivered < expected) await allDelivered.promise;
        if (failed !== undefined) throw failed;
      }
      return batch.map((_, p) => gens.slice(p * n, (p + 1) * n).map((g) => ({
        tokenIds: Array.from(g.tokens), logprobs: Array.from(g.logprobs), finishReason: g.finishReason,
        top: k > 0 && g.topIds !== undefined && g.topLogprobs !== undefined ? alternatives(g.topIds, g.topLogprobs, k) : undefined,
      })));
    } finally {
      for (const u of unlisten) u();
    }
  }

  async loadWeights(dir: string): Promise<void> {
    const next = await PolicyModel.load(dir);
    if (shapeKey(next.info) !== shapeKey(this.m.info)) {
      throw new RolloutError(`weights in ${dir} are for a different model (${shapeKey(next.info)}) than the one served (${shapeKey(this.m.info)})`, { status: 400 });
    }
    next.setBf16(this.m.bf16()); // the new weights are served as the old ones were (bf16 or not)
    this.m = next;
  }

  setWeights(policy: PolicyWeights): void {
    if (sameWeights(policy, this.m)) return;
    copyParams(this.m, policy);
  }

}
