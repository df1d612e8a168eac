// The request batcher shared by the embedded backend and `murphy-native serve`: merges
// concurrent requests into one engine call.
import type { EngineRequest, EngineSample, EngineStepCounts, RolloutEngine } from './types.js';
import { RolloutError } from './types.js';

export interface BatcherOptions {
  /** Most requests (prompts) merged into one engine call. Default 64. */
  maxBatchRequests?: number;
  /** Most samples (sum of n) in one engine call. Default 1024. */
  maxBatchSamples?: number;
  /**
   * Most work admitted at once, waiting or running, in tokens (requestWork summed over
   * requests): beyond it submit() fails with a QueueFullError. Default: unbounded.
   */
  maxQueuedTokens?: number;
}

interface GenEntry {
  kind: 'gen';
  req: EngineRequest;
  work: number;
  /** Aborted by the request's own signal or by abortAll(); what the engine sees. */
  ctl: AbortController;
  running: boolean;
  released: boolean;
  resolve: (s: EngineSample[]) => void;
  reject: (e: unknown) => void;
}
interface ExclusiveEntry {
  kind: 'exclusive';
  run: () => Promise<void>;
  /** Refuses it without running it. */
  fail: (e: unknown) => void;
}

export interface BatcherStats {
  /**
   * Batches the engine ran: its generate() calls for an engine that runs one call at a time;
   * its steps for a continuous engine (PagedEngine: each step is one batch, which requests
   * join and leave), counted from when the batcher was made.
   */
  batches: number;
  /** generate() calls made (a continuous engine gets one per request: they join its running batch). */
  calls: number;
  /** Requests served. */
  requests: number;
  /** Most requests in one batch (a continuous engine: in one of its steps, over the engine's life). */
  maxMerged: number;
  /** Mean requests per batch (batch occupancy in requests; 0 before the first batch). */
  meanMerged: number;
  /** Requests ended by their signal (or abortAll) before or while they ran. */
  aborted: number;
  /** Requests refused because the queue was full. */
  refused: number;
}

/** The work a request may take, in tokens: its prompt (prefill) and every sample at its full budget. */
export function requestWork(req: Pick<EngineRequest, 'promptIds' | 'n' | 'maxTokens'>): number {
  return req.promptIds.length + req.n * req.maxTokens;
}

/** submit() beyond maxQueuedTokens: retry later (HTTP 503 with Retry-After). */
export class QueueFullError extends RolloutError {
  override name = 'QueueFullError';
  constructor(readonly work: number, readonly queued: number, readonly limit: number) {
    super(`the server is busy: ${queued} tokens of work are queued and this request adds ${work} (limit ${limit}); retry later`, { status: 503 });
  }
}

/** A request whose signal fired before it finished (or the batcher was shut down). */
export class AbortedError extends RolloutError {
  override name = 'AbortedError';
}

/**
 * Queues requests to one engine and runs them in batches: while a batch runs, new requests
 * wait; when it ends, the oldest waiting request and every later one the engine can batch
 * with it go together. Exclusive tasks (weight loads) run alone, in queue order. A request
 * whose signal fires leaves the queue at once, or, when running, stops at the engine's next
 * decode step.
 */
export class EngineBatcher {
  readonly engine: RolloutEngine;
  private readonly queue: (GenEntry | ExclusiveEntry)[] = [];
  private readonly inFlight = new Set<GenEntry>();
  private running = false;
  /** Continuous engines: generate() calls in flight. */
  private active = 0;
  private closedReason: string | undefined;
  private readonly maxRequests: number;
  private readonly maxSamples: number;
  private readonly maxQueued: number;
  private work = 0;
  private idleWaiters: (() => void)[] = [];
  /** Counts of the batcher's own calls (what stats reports for an engine run one call at a time). */
  private readonly counts = { calls: 0, requests: 0, maxMerged: 0, aborted: 0, refused: 0 };
  /** A continuous engine's step counts when the batcher was made. */
  private readonly stepsAtStart: EngineStepCounts | undefined;

  constructor(engine: RolloutEngine, opts: BatcherOptions = {}) {
    this.engine = engine;
    this.stepsAtStart = engine.continuous === true ? engine.stepCounts?.() : undefined;
    this.maxRequests = Math.max(1, opts.maxBatchRequests ?? 64);
    this.maxSamples = Math.max(1, opts.maxBatchSamples ?? 1024);
    this.maxQueued = opts.maxQueuedTokens ?? Infinity;
  }

  /** What happened so far (a snapshot). */
  get stats(): BatcherStats {
    const c = this.counts;
    const now = this.stepsAtStart === undefined ? undefined : this.engine.stepCounts?.();
    if (now === undefined || this.stepsAtStart === undefined) {
      return { batches: c.calls, calls: c.calls, requests: c.requests, maxMerged: c.maxMerged, meanMerged: c.calls ? c.requests / c.calls : 0, aborted: c.aborted, refused: c.refused };
    }
    const steps = now.steps - this.stepsAtStart.steps;
    const requestSteps = now.requestSteps - this.stepsAtStart.requestSteps;
    return { batches: steps, calls: c.calls, requests: c.requests, maxMerged: now.maxRequests, meanMerged: steps ? requestSteps / steps : 0, aborted: c.aborted, refused: c.refused };
  }

  /** Requests waiting (not counting the running batch). */
  get pending(): number { return this.queue.length; }

  /** Work admitted (waiting or running), in tokens. */
  get queuedTokens(): number { return this.work; }

  submit(req: EngineRequest): Promise<EngineSample[]> {
    try {
      return this.submitAll([req])[0];
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Submits requests together: all are admitted or none, so one HTTP request never holds
   * part of its work in the queue. Throws at once (QueueFullError; AbortedError after
   * abortAll) when refused. A request larger than the limit is admitted when nothing else is.
   */
  submitAll(reqs: readonly EngineRequest[]): Promise<EngineSample[]>[] {
    const works = reqs.map(requestWork);
    const total = works.reduce((a, b) => a + b, 0);
    if (this.closedReason !== undefined) throw new AbortedError(this.closedReason, { status: 503 });
    if (this.work > 0 && this.work + total > this.maxQueued) {
      this.counts.refused++;
      throw new QueueFullError(total, this.work, this.maxQueued);
    }
    return reqs.map((req, i) => new Promise<EngineSample[]>((resolve, reject) => {
      if (req.signal?.aborted) {
        this.counts.aborted++;
        reject(new AbortedError('the request was aborted'));
        return;
      }
      const ctl = new AbortController();
      const e: GenEntry = { kind: 'gen', req: { ...req, signal: ctl.signal }, work: works[i], ctl, running: false, released: false, resolve, reject };
      this.work += e.work;
      const onAbort = () => {
        this.counts.aborted++;
        if (!e.running) {
          const at = this.queue.indexOf(e);
          if (at >= 0) this.queue.splice(at, 1);
          this.release(e);
          reject(new AbortedError('the request was aborted'));
        }
        ctl.abort();
      };
      req.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => req.signal?.removeEventListener('abort', onAbort);
      e.resolve = (s) => { this.release(e); done(); resolve(s); };
      e.reject = (err) => { this.release(e); done(); reject(err); };
      this.queue.push(e);
      this.pump();
    }));
  }

  /** Runs fn with no generation in flight (after everything queued before it). */
  exclusive<T>(fn: () => Promise<T> | T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        kind: 'exclusive',
        run: async () => {
          try {
            resolve(await fn());
          } catch (e) {
            reject(e);
          }
        },
        fail: reject,
      });
      this.pump();
    });
  }

  /**
   * Stops everything: waiting requests and exclusive tasks fail with an AbortedError,
   * running ones end at the engine's next decode step, and later submits are refused.
   * Resolves when no engine call is running.
   */
  async abortAll(reason = 'the server is shutting down'): Promise<void> {
    this.closedReason ??= reason;
    for (const e of this.queue.splice(0)) {
      if (e.kind === 'gen') this.release(e);
      (e.kind === 'gen' ? e.reject : e.fail)(new AbortedError(reason, { status: 503 }));
    }
    for (const e of this.inFlight) e.ctl.abort();
    await this.idle();
  }

  /** Resolves when no engine call is running. */
  idle(): Promise<void> {
    if (!this.running && this.active === 0) return Promise.resolve();
    return new Promise((ok) => this.idleWaiters.push(ok));
  }

  private release(e: GenEntry): void {
    if (e.released) return;
    e.released = true;
    this.work -= e.work;
    this.inFlight.delete(e);
  }

  private pump(): void {
    if (this.engine.continuous === true) return this.pumpContinuous();
    if (this.running) return;
    if (this.queue.length === 0) {
      for (const w of this.idleWaiters.splice(0)) w();
      return;
    }
    this.running = true;
    const head = this.queue[0];
    let work: Promise<void>;
    if (head.kind === 'exclusive') {
      this.queue.shift();
      work = head.run();
    } else {
      const batch: GenEntry[] = [];
      let samples = 0;
      for (let i = 0; i < this.queue.length && batch.length < this.maxRequests; i++) {
        const e = this.queue[i];
        if (e.kind === 'exclusive') break; // nothing jumps over a weight load
        if (batch.length > 0 && (samples + e.req.n > this.maxSamples || !this.engine.canBatch(head.req, e.req))) continue;
        batch.push(e);
        samples += e.req.n;
        this.queue.splice(i, 1);
        i--;
      }
      for (const e of batch) {
        e.running = true;
        this.inFlight.add(e);
      }
      work = this.runBatch(batch);
    }
    void work.finally(() => {
      this.running = false;
      this.pump();
    });
  }

  /**
   * A continuous engine (its calls join one running batch): every request goes to the engine
   * as soon as it reaches the head of the queue; an exclusive task waits for the calls in
   * flight, runs alone, and holds the requests queued after it.
   */
  private pumpContinuous(): void {
    while (this.queue.length > 0 && !this.running) {
      const head = this.queue[0];
      if (head.kind === 'exclusive') {
        if (this.active > 0) return;
        this.queue.shift();
        this.running = true;
        void head.run().finally(() => {
          this.running = false;
          this.pump();
        });
        return;
      }
      this.queue.shift();
      head.running = true;
      this.inFlight.add(head);
      this.active++;
      void this.runBatch([head]).finally(() => {
        this.active--;
        this.pump();
      });
    }
    if (!this.running && this.active === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  private async runBatch(batch: GenEntry[]): Promise<void> {
    this.counts.calls++;
    this.counts.requests += batch.length;
    this.counts.maxMerged = Math.max(this.counts.maxMerged, batch.length);
    try {
      const out = await this.engine.generate(batch.map((e) => e.req));
      if (out.length !== batch.length) throw new RolloutError(`engine returned ${out.length} results for ${batch.length} requests`);
      batch.forEach((e, i) => e.resolve(out[i]));
    } catch (err) {
      if (batch.length === 1) {
        batch[0].reject(err);
        return;
      }
      // one bad request must not fail the others: run each alone
      for (const e of batch) {
        if (e.ctl.signal.aborted) {
          e.reject(new AbortedError('the request was aborted'));
          continue;
        }
        if (e.req.onToken !== undefined) {
          e.reject(err); // a streamed request may have sent tokens already: running it again would repeat them
          continue;
        }
        try {
          const [r] = await this.engine.generate([e.req]);
          e.resolve(r);
        } catch (err1) {
          e.reject(err1);
        }
      }
    }
  }
}
