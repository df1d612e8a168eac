// The embedded rollout backend: the native engine in this process, no HTTP. Concurrent
// generate() calls (the tree builder issues many) are merged into batched engine calls.
import type { Completion } from '../murphy/types.js';
import { EngineBatcher, type BatcherOptions, type BatcherStats } from './batcher.js';
import { finishSample } from './finish.js';
import { NativeEngine, sameWeights } from './engine.js';
import { contextBudget, noRoomCompletions, resolveSampling, type SamplingDefaults } from './params.js';
import type { PolicyWeights, RolloutBackend, RolloutCounters, RolloutEngine, RolloutParams, TextCodec, WeightSyncReport } from './types.js';
import { RolloutError } from './types.js';

export interface EmbeddedOptions extends SamplingDefaults, BatcherOptions {
  engine: RolloutEngine;
  /** Decodes completion text and handles stop strings; without one, text is ''. */
  tokenizer?: TextCodec;
}

export class EmbeddedBackend implements RolloutBackend {
  readonly kind = 'embedded';
  readonly engine: RolloutEngine;
  private readonly batcher: EngineBatcher;
  private readonly tokenizer: TextCodec | undefined;
  private readonly defaults: SamplingDefaults;
  private closed = false;
  private noRoom = 0;

  constructor(o: EmbeddedOptions) {
    this.engine = o.engine;
    this.tokenizer = o.tokenizer;
    this.batcher = new EngineBatcher(o.engine, o);
    this.defaults = { maxTokens: o.maxTokens, stopTokenIds: o.stopTokenIds ?? o.tokenizer?.eosTokenIds };
  }

  /** An embedded backend over a model directory (its tokenizer files are used when present). */
  static async fromDir(dir: string, o: Omit<EmbeddedOptions, 'engine'> & { bf16Generate?: boolean } = {}): Promise<EmbeddedBackend> {
    return new EmbeddedBackend({ ...o, engine: await NativeEngine.load(dir, { bf16Generate: o.bf16Generate }) });
  }

  get stats(): BatcherStats { return this.batcher.stats; }

  /** Prompts that left no room, and (paged engine) prefill computed and saved, preemptions. */
  get counters(): RolloutCounters {
    const m = (this.engine as { metrics?: { prefillTokens: number; prefillSaved: number; preemptions: number } }).metrics;
    return { noRoom: this.noRoom, aborted: 0, ...(m === undefined ? {} : { prefillTokens: m.prefillTokens, prefillSaved: m.prefillSaved, preemptions: m.preemptions }) };
  }

  async generate(promptIds: number[], n: number, params: RolloutParams): Promise<Completion[]> {
    if (this.closed) throw new RolloutError('the embedded backend is closed');
    if (!Number.isSafeInteger(n) || n < 1) throw new RolloutError(`n must be an integer >= 1, got ${n}`);
    if (promptIds.length === 0) throw new RolloutError('empty prompt');
    const s = resolveSampling(params, this.defaults);
    if (s.stop.length > 0 && this.tokenizer === undefined) throw new RolloutError('stop strings need a tokenizer');
    // as with vLLM: a prompt that fills the context ends its branch (the engine caps the rest)
    if (contextBudget(s.maxTokens, promptIds.length, this.engine.info().maxModelLen) <= 0) {
      this.noRoom += n;
      return noRoomCompletions(n);
    }
    const logprobs = params.logprobs !== false;
    const req = { promptIds, n, maxTokens: s.maxTokens, temperature: s.temperature, topP: s.topP, topK: s.topK, minP: s.minP, seed: s.seed, stopTokenIds: s.stopTokenIds, logprobs };
    const out = await this.batcher.submit(req);
    return out.map((x) => {
      if (x.finishReason === 'abort') throw new RolloutError('the embedded backend was closed during generation');
      const f = finishSample(x, req, s.stop, this.tokenizer);
      return { tokenIds: f.tokenIds, logprobs: logprobs ? f.logprobs : undefined, text: f.text, finishReason: f.finishReason, stopReason: f.stopReason };
    });
  }

  /**
   * Serves `policy`'s weights. When the engine generates with the policy object itself there
   * is nothing to move; otherwise parameters are copied in memory, with no generation in flight.
   */
  async syncWeights(policy: PolicyWeights, step: number): Promise<WeightSyncReport> {
    const t0 = performance.now();
    const e = this.engine;
    const weights = e instanceof NativeEngine ? e.model : (e as { weights?: unknown }).weights;
    const shared = weights !== undefined && sameWeights(policy, weights);
    // shared: nothing moves, but a paged engine drops its prefix cache (computed with the old weights)
    if (!shared || e.continuous === true) {
      if (e.setWeights === undefined) throw new RolloutError('this engine cannot take weights from memory');
      await this.batcher.exclusive(() => e.setWeights?.(policy));
    }
    return { step, method: shared ? 'shared' : 'memory', servers: [], failed: [], seconds: (performance.now() - t0) / 1000 };
  }

  /** Training follows: the paged engine gives its KV pool back (after the calls in flight). */
  async releaseRolloutMemory(): Promise<void> {
    const e = this.engine;
    if (e.releaseMemory !== undefined) await this.batcher.exclusive(() => e.releaseMemory?.());
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.batcher.exclusive(() => undefined);
    await this.engine.close?.();
  }
}
