// The in-process generation path shared by the embedded backend and `murphy-native serve`:
// a batcher that merges concurrent requests into one engine call, and the post-processing
// that turns engine samples into completions (decoded text, stop strings).
import type { EngineRequest, EngineSample, RolloutEngine, TextCodec } from './types.js';
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

/** A finished sample after stop-string handling, with its text. */
export interface LocalSample {
  tokenIds: number[];
  logprobs: number[];
  text: string;
  finishReason: 'stop' | 'length';
  /** vLLM's stop_reason: the stop string or stop token id that ended it; null for EOS or length. */
  stopReason: string | number | null;
}

function firstStop(text: string, stop: readonly string[]): { at: number; s: string } | undefined {
  let best: { at: number; s: string } | undefined;
  for (const s of stop) {
    if (s === '') continue;
    const at = text.indexOf(s);
    if (at >= 0 && (best === undefined || at < best.at)) best = { at, s };
  }
  return best;
}

/**
 * Text, stop strings and stop reasons for one engine sample, as vLLM reports them: text is
 * decoded without special tokens; a stop string ends the completion at the token that
 * completed it (kept in the token ids) and is cut from the text.
 */
export function finishSample(s: EngineSample, req: EngineRequest, stop: readonly string[], codec: TextCodec | undefined): LocalSample {
  let tokenIds = s.tokenIds;
  let logprobs = s.logprobs;
  let finishReason = s.finishReason;
  let stopReason: string | number | null = null;
  if (codec === undefined) {
    if (stop.length > 0) throw new RolloutError('stop strings need a tokenizer');
    const last = tokenIds[tokenIds.length - 1];
    if (finishReason === 'stop') stopReason = last;
    return { tokenIds, logprobs, text: '', finishReason, stopReason };
  }
  const decode = (ids: readonly number[]) => codec.decode(ids, { skipSpecialTokens: true });
  let text = decode(tokenIds);
  const hit = stop.length > 0 ? firstStop(text, stop) : undefined;
  if (hit !== undefined) {
    // smallest k whose decoded prefix contains a stop string (containment grows with k)
    let lo = 1, hi = tokenIds.length;
    // a prefix may end inside a multi-byte character: like vLLM's incremental detokenizer,
    // hold back the replacement characters that stand for it
    const prefix = (k: number) => (k === s.tokenIds.length ? text : decode(tokenIds.slice(0, k)).replace(/\uFFFD+$/, ''));
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (firstStop(prefix(mid), stop) !== undefined) hi = mid;
      else lo = mid + 1;
    }
    const cut = prefix(lo);
    const h = firstStop(cut, stop) ?? hit;
    tokenIds = tokenIds.slice(0, lo);
    logprobs = logprobs.slice(0, lo);
    text = cut.slice(0, h.at);
    finishReason = 'stop';
    stopReason = h.s;
  } else if (finishReason === 'stop') {
    const last = tokenIds[tokenIds.length - 1];
    const eos = codec.eosTokenIds ?? [];
    stopReason = eos.includes(last) ? null : last;
  }
  return { tokenIds, logprobs, text, finishReason, stopReason };
}
