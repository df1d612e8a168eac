// The request batcher shared by the embedded backend and `murphy-native serve`: merges
// concurrent requests into one engine call.
import type { EngineRequest, EngineSample, RolloutEngine } from './types.js';
import { RolloutError } from './types.js';

export interface BatcherOptions {
  /** Most requests (prompts) merged into one engine call. Default 64. */
  maxBatchRequests?: number;
  /** Most samples (sum of n) in one engine call. Default 1024. */
  maxBatchSamples?: number;
}

interface GenEntry {
  kind: 'gen';
  req: EngineRequest;
  resolve: (s: EngineSample[]) => void;
  reject: (e: unknown) => void;
}
interface ExclusiveEntry {
  kind: 'exclusive';
  run: () => Promise<void>;
}

export interface BatcherStats {
  /** Engine calls made. */
  batches: number;
  /** Requests served. */
  requests: number;
  /** Largest number of requests merged into one call. */
  maxMerged: number;
}

/**
 * Queues requests to one engine and runs them in batches: while a batch runs, new requests
 * wait; when it ends, the oldest waiting request and every later one the engine can batch
 * with it go together. Exclusive tasks (weight loads) run alone, in queue order.
 */
export class EngineBatcher {
  readonly engine: RolloutEngine;
  private readonly queue: (GenEntry | ExclusiveEntry)[] = [];
  private running = false;
  private readonly maxRequests: number;
  private readonly maxSamples: number;
  readonly stats: BatcherStats = { batches: 0, requests: 0, maxMerged: 0 };

  constructor(engine: RolloutEngine, opts: BatcherOptions = {}) {
    this.engine = engine;
    this.maxRequests = Math.max(1, opts.maxBatchRequests ?? 64);
    this.maxSamples = Math.max(1, opts.maxBatchSamples ?? 1024);
  }

  /** Requests waiting (not counting the running batch). */
  get pending(): number { return this.queue.length; }

  submit(req: EngineRequest): Promise<EngineSample[]> {
    return new Promise<EngineSample[]>((resolve, reject) => {
      this.queue.push({ kind: 'gen', req, resolve, reject });
      this.pump();
    });
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
      });
      this.pump();
    });
  }

  private pump(): void {
    if (this.running || this.queue.length === 0) return;
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
      work = this.runBatch(batch);
    }
    void work.finally(() => {
      this.running = false;
      this.pump();
    });
  }

  private async runBatch(batch: GenEntry[]): Promise<void> {
    this.stats.batches++;
    this.stats.requests += batch.length;
    this.stats.maxMerged = Math.max(this.stats.maxMerged, batch.length);
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
