// The paged rollout engine: a RolloutEngine over the paged KV scheduler (lib/rollout/paged)
// and a StepExecutor (the device engine's paged step, or the reference model in tests).
// Every generate() call submits its requests to one scheduler, and one drain loop runs the
// steps for all callers: requests that arrive while it runs join the running batch at its
// next step (continuous batching), sequences leave it as they finish. The KV pool is taken
// before a rollout phase (at the first generate()) and given back with releaseMemory().
import { randomInt } from 'node:crypto';
import { PolicyModel } from '../model/index.js';
import type { StepExecutor } from './paged/drive.js';
import { copyParams, sameShape, sameWeights } from './engine.js';
import { DeviceExecutor } from './paged/device-executor.js';
import { deviceKv, fixedKv, type KvCacheOptions, type KvLease } from './paged/device-kv.js';
import { KvPool } from './paged/kv-pool.js';
import { kvShapeOf } from './paged/memory.js';
import { Scheduler, type SampleResult, type SchedulerOptions, type StepCounts } from './paged/scheduler.js';
import type { EngineInfo, EngineRequest, EngineSample, EngineStepCounts, PolicyWeights, RolloutEngine } from './types.js';
import { RolloutError } from './types.js';

/** What the engine has done since it was made (cumulative over rollout phases). */
export interface PagedEngineMetrics extends StepCounts {
  steps: number;
  /** Largest number of sequences in one step. */
  maxBatch: number;
  /** Sum over steps of the requests each step advanced, and the most in one step (EngineStepCounts). */
  requestSteps: number;
  maxRequests: number;
  /** Requests served (each prompt of a generate() call). */
  requests: number;
  /** Times the KV pool was taken (rollout phases) and its size the last time. */
  kvAllocations: number;
  kvBlocks: number;
}

export interface PagedEngineOptions extends Omit<SchedulerOptions, 'maxModelLen'> {
  executor: StepExecutor;
  info: EngineInfo;
  kv: KvLease;
  /** The weights the executor reads; setWeights with this object is free (colocated mode). */
  weights?: unknown;
  /** Replaces the weights from a Hugging Face directory (serve's weight loads). */
  loadWeights?: (dir: string) => Promise<void>;
  /** Copies weights from an in-process policy. */
  setWeights?: (policy: PolicyWeights) => Promise<void> | void;
}

interface Pending {
  id: number;
  req: EngineRequest;
  /** Samples that onToken ended: their token count at that point. */
  cut: Map<number, number>;
  /** Tokens streamed to onToken per sample. */
  delivered: number[];
  resolve: (s: EngineSample[]) => void;
  reject: (e: unknown) => void;
  unlisten: () => void;
}

export class PagedEngine implements RolloutEngine {
  /** Concurrent generate() calls share one running batch: the batcher passes them through. */
  readonly continuous = true;
  readonly weights: unknown;
  private readonly o: PagedEngineOptions;
  private sched: Scheduler | null = null;
  private acquiring: Promise<Scheduler> | null = null;
  private loop: Promise<void> | null = null;
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  readonly metrics: PagedEngineMetrics = {
    steps: 0, prefillTokens: 0, decodeTokens: 0, prefillSaved: 0, cacheHitTokens: 0, preemptions: 0, copies: 0, maxBatch: 0,
    requestSteps: 0, maxRequests: 0, requests: 0, kvAllocations: 0, kvBlocks: 0,
  };

  constructor(o: PagedEngineOptions) {
    this.o = o;
    this.weights = o.weights;
  }

  /**
   * The engine over a device PolicyModel (device 'cuda' or 'emulate'), reading its weights in
   * place: the policy the trainer trains (colocated mode), or a served model.
   */
  static onPolicy(model: PolicyModel, o: KvCacheOptions & Omit<SchedulerOptions, 'maxModelLen'> = {}): PagedEngine {
    const { device, storage } = model.engine;
    if (device === 'cpu') throw new RolloutError('the paged engine runs on the device engine (--device cuda or emulate); the CPU engine generates with NativeEngine');
    const i = model.info;
    const info = { vocabSize: i.vocabSize, maxModelLen: i.maxPositionEmbeddings };
    const shape = kvShapeOf({ layers: i.numLayers, kvHeads: i.numKvHeads, headDim: i.headDim }, storage === 'f32' ? 4 : 2);
    return new PagedEngine({
      ...o,
      executor: new DeviceExecutor(model),
      info,
      kv: deviceKv(model, shape, info.maxModelLen, o),
      weights: model,
      loadWeights: (dir) => loadInto(model, dir),
      setWeights: (policy) => copyParams(model, policy),
    });
  }

  /** A pool of fixed size, no device: for executors that simulate the pool (tests). */
  static withPool(executor: StepExecutor, info: EngineInfo, blocks: number, o: Omit<SchedulerOptions, 'maxModelLen'> & { blockSize?: number } = {}): PagedEngine {
    return new PagedEngine({ ...o, executor, info, kv: fixedKv(blocks, o.blockSize) });
  }

  info(): EngineInfo { return this.o.info; }

  /** Any requests may run together: sampling options are per sample row. */
  canBatch(): boolean { return true; }

  stepCounts(): EngineStepCounts {
    const m = this.metrics;
    return { steps: m.steps, requestSteps: m.requestSteps, maxRequests: m.maxRequests };
  }

  /** The scheduler of the current rollout phase (null while the KV pool is released). */
  get scheduler(): Scheduler | null { return this.sched; }

  generate(batch: EngineRequest[]): Promise<EngineSample[][]> {
    if (this.closed) return Promise.reject(new RolloutError('the paged engine is closed'));
    for (const r of batch) {
      if ((r.topLogprobs ?? 0) > 0) return Promise.reject(new RolloutError('the paged engine does not report top log-prob alternatives (logprobs > 0); ask for logprobs 0, or serve without --device', { status: 400 }));
    }
    if (batch.length === 0) return Promise.resolve([]);
    return (async () => {
      let s = await this.schedulerNow();
      // the pool may have been released meanwhile (releaseMemory): take it again
      while (s !== this.sched) s = await this.schedulerNow();
      const out = batch.map((r) => this.submit(s, r));
      this.kick(s);
      return Promise.all(out);
    })();
  }

  /**
   * Gives the KV pool back (before the training phase): waits for the running batch, drops the
   * prefix cache, releases the device memory. The next generate() takes it again.
   */
  async releaseMemory(): Promise<void> {
    for (;;) {
      if (this.acquiring !== null) await this.acquiring.catch(() => undefined);
      if (this.loop !== null) await this.loop;
      else break;
    }
    const s = this.sched;
    if (s === null || s.hasWork) return;
    this.sched = null;
    s.releaseCached();
    await this.o.kv.release();
  }

  /** Drops the prefix cache (serve's /reset_prefix_cache); running sequences keep their blocks. */
  resetPrefixCache(): void {
    this.sched?.releaseCached();
  }

  /** Ends every request (their samples end with 'abort'), then releases the pool. */
  async close(): Promise<void> {
    this.closed = true;
    const s = this.sched;
    if (s !== null) for (const p of [...this.pending.values()]) this.abortRequest(s, p);
    await this.releaseMemory();
  }

  async loadWeights(dir: string): Promise<void> {
    if (this.o.loadWeights === undefined) throw new RolloutError('this paged engine cannot load weights from a directory');
    await this.o.loadWeights(dir);
    this.sched?.releaseCached(); // cached KV was computed with the old weights
  }

  /** Colocated (the policy is the weights the engine reads): nothing moves; the prefix cache is dropped. */
  async setWeights(policy: PolicyWeights): Promise<void> {
    if (!sameWeights(policy, this.weights)) {
      if (this.o.setWeights === undefined) throw new RolloutError('this paged engine cannot take weights from memory');
      await this.o.setWeights(policy);
    }
    this.sched?.releaseCached();
  }

  private async schedulerNow(): Promise<Scheduler> {
    if (this.sched !== null) return this.sched;
    this.acquiring ??= (async () => {
      try {
        const g = await this.o.kv.acquire();
        const pool = new KvPool({ blocks: g.blocks, blockSize: g.blockSize, bytesPerBlock: g.bytesPerBlock });
        this.sched = new Scheduler(pool, { ...this.o, maxModelLen: this.o.info.maxModelLen });
        this.metrics.kvAllocations++;
        this.metrics.kvBlocks = g.blocks;
        return this.sched;
      } finally {
        this.acquiring = null;
      }
    })();
    return this.acquiring;
  }

  private submit(s: Scheduler, r: EngineRequest): Promise<EngineSample[]> {
    return new Promise<EngineSample[]>((resolve, reject) => {
      const id = s.submit({
        promptIds: r.promptIds, n: r.n, maxTokens: r.maxTokens, stopTokenIds: r.stopTokenIds,
        // unseeded: one seed drawn per request, kept for all its samples
        seed: r.seed ?? randomInt(2 ** 32),
        sampling: { temperature: r.temperature, topP: r.topP, topK: r.topK, minP: r.minP ?? 0 },
      });
      this.metrics.requests++;
      const p: Pending = { id, req: r, cut: new Map(), delivered: new Array<number>(r.n).fill(0), resolve, reject, unlisten: () => undefined };
      this.pending.set(id, p);
      if (s.isDone(id)) return this.settle(s, p); // no room in the context: 'length', no tokens
      const sig = r.signal;
      if (sig !== undefined) {
        if (sig.aborted) return this.abortRequest(s, p);
        const on = () => this.abortRequest(s, p);
        sig.addEventListener('abort', on, { once: true });
        p.unlisten = () => sig.removeEventListener('abort', on);
      }
    });
  }

  /** Starts the drain loop unless it runs. */
  private kick(s: Scheduler): void {
    if (this.loop !== null || !s.hasWork) return;
    this.loop = this.drain(s).finally(() => {
      this.loop = null;
      // work submitted after the loop's last check and before this: run it
      if (this.sched === s) this.kick(s);
    });
  }

  private async drain(s: Scheduler): Promise<void> {
    try {
      // requests submitted in the same turn of the event loop (callers awaiting the pool) join the first step
      await new Promise<void>((ok) => setImmediate(ok));
      while (s.hasWork) {
        const plan = s.schedule();
        const out = await this.o.executor.execute(plan);
        const finished = s.complete(plan, out);
        // (after complete(): it adds the savings of the forks it makes to plan.counts)
        const m = this.metrics;
        m.steps++;
        m.maxBatch = Math.max(m.maxBatch, plan.seqs.length);
        const requests = new Set(plan.seqs.map((q) => q.requestId)).size;
        m.requestSteps += requests;
        m.maxRequests = Math.max(m.maxRequests, requests);
        for (const k of ['prefillTokens', 'decodeTokens', 'prefillSaved', 'cacheHitTokens', 'preemptions', 'copies'] as const) m[k] += plan.counts[k];
        this.stream(plan.seqs, out.tokens, out.logprobs);
        for (const id of finished) {
          const p = this.pending.get(id);
          if (p !== undefined) this.settle(s, p);
        }
        // let requests arriving meanwhile (HTTP, timers) join the next step
        await new Promise<void>((ok) => setImmediate(ok));
      }
    } catch (e) {
      // the step failed: its scheduler is mid-step; every request of it fails, the pool is given back
      this.sched = null;
      for (const p of [...this.pending.values()]) {
        this.pending.delete(p.id);
        p.unlisten();
        p.reject(e);
      }
      s.releaseCached();
      await Promise.resolve(this.o.kv.release()).catch(() => undefined);
    }
  }

  private stream(seqs: readonly { requestId: number; sampleIndices: number[] }[], tokens: readonly (readonly number[])[], lps: readonly (readonly number[])[] | undefined): void {
    seqs.forEach((q, i) => {
      if (q.sampleIndices.length === 0) return;
      const p = this.pending.get(q.requestId);
      if (p === undefined || p.req.onToken === undefined) return;
      q.sampleIndices.forEach((j, k) => {
        if (p.cut.has(j) || !this.pending.has(p.id)) return;
        p.delivered[j]++;
        try {
          if (p.req.onToken!(j, { id: tokens[i][k], logprob: lps?.[i][k] ?? 0 }) === true) this.cutSample(p, j);
        } catch (e) {
          // a throwing callback fails its request
          const s = this.sched;
          if (s !== null) s.abort(p.id);
          this.pending.delete(p.id);
          p.unlisten();
          p.reject(e);
        }
      });
    });
  }

  /**
   * onToken ended sample j: it keeps the tokens it has and leaves the batch (Scheduler.abortSample);
   * the request settles when that was its last running sample.
   */
  private cutSample(p: Pending, j: number): void {
    const s = this.sched!;
    p.cut.set(j, p.delivered[j]);
    s.abortSample(p.id, j);
    if (p.cut.size === p.req.n) this.abortRequest(s, p);
    else if (s.isDone(p.id)) this.settle(s, p);
  }

  private abortRequest(s: Scheduler, p: Pending): void {
    if (!this.pending.has(p.id)) return;
    s.abort(p.id);
    this.settle(s, p);
  }

  private settle(s: Scheduler, p: Pending): void {
    this.pending.delete(p.id);
    p.unlisten();
    let res: SampleResult[];
    try {
      res = s.result(p.id);
      s.forget(p.id);
    } catch (e) {
      p.reject(e);
      return;
    }
    p.resolve(res.map((x, j) => {
      const lps = x.logprobs ?? [];
      const cut = p.cut.get(j);
      if (cut !== undefined && cut < x.tokenIds.length) return { tokenIds: x.tokenIds.slice(0, cut), logprobs: lps.slice(0, cut), finishReason: 'abort' };
      if (cut !== undefined) return { tokenIds: x.tokenIds, logprobs: lps, finishReason: 'abort' };
      return { tokenIds: x.tokenIds, logprobs: lps, finishReason: x.finishReason };
    }));
  }
}

/** Loads a Hugging Face directory's weights (read on the CPU engine) into `model`. */
async function loadInto(model: PolicyModel, dir: string): Promise<void> {
  const src = await PolicyModel.load(dir);
  if (!sameShape(src.info, model.info)) throw new RolloutError(`weights in ${dir} are for a different model than the one served`, { status: 400 });
  copyParams(model, src);
}
