// Rollout backends: what the tree builder samples from, and how trained weights reach it.
//
// A RolloutBackend is a murphy Sampler (prompt token ids in, completions with token ids,
// per-token log-probs and finish reasons out) that can also be told to serve new weights.
// Two implementations: VllmBackend (vLLM servers over HTTP) and EmbeddedBackend (the native
// engine in this process). `murphy-native serve` exposes the embedded engine over the same
// HTTP API as vLLM.
import type { Completion, Sampler, SampleParams } from '../murphy/types.js';

/** Sampling parameters a rollout backend understands: murphy's plus explicit stop token ids. */
export interface RolloutParams extends SampleParams {
  /**
   * Token ids that end a completion (the id is kept in tokenIds). Default: the backend's
   * configured stop ids (typically the tokenizer's EOS ids).
   */
  stopTokenIds?: number[];
  /**
   * Requests with the same affinity key go to the same server (vLLM prefix cache). Without
   * one, a prompt goes where the longest earlier prompt that is a prefix of it went, so the
   * turns of one tree stay together with no help from the caller.
   */
  affinity?: string;
}

/** The policy's weights as the trainer holds them (lib/model's PolicyModel satisfies this). */
export interface PolicyWeights {
  params(): { name: string; shape: number[]; numel: number }[];
  getParam(name: string): Float32Array;
  /** Writes a Hugging Face directory (config.json, safetensors, tokenizer files) atomically. */
  save(dir: string): Promise<void>;
}

export interface WeightSyncReport {
  /** Training step the weights belong to. */
  step: number;
  /** How the weights moved: 'disk' (checkpoint + RPC), 'memory' (copied in process), 'shared' (same object). */
  method: 'disk' | 'memory' | 'shared' | (string & {});
  /** Checkpoint directory written, for disk syncs. */
  path?: string;
  /** Servers (base URLs) that loaded the weights; empty for in-process backends. */
  servers: string[];
  /** Servers that could not be updated (dead, or the RPC failed) with the reason. */
  failed: { server: string; error: string }[];
  seconds: number;
  /** Set when the configured method (NCCL) failed and this step fell back to the disk: why. */
  fallback?: string;
}

/** Moves the trainer's weights to wherever rollouts are generated. */
export interface WeightSync {
  sync(policy: PolicyWeights, step: number): Promise<WeightSyncReport>;
}

/** What a backend counts as it goes (cumulative; a training step records the difference). */
export interface RolloutCounters {
  /** Completions returned with no tokens because the prompt left no room in the context (no request made). */
  noRoom: number;
  /** Responses with finish_reason "abort" (paused or aborted on the server) that were retried. */
  aborted: number;
  /** Paged engines: prompt tokens computed (prefill, recomputes included) and not computed thanks to prefix sharing. */
  prefillTokens?: number;
  prefillSaved?: number;
  /** Paged engines: sequences preempted for KV blocks (recomputed later). */
  preemptions?: number;
}

/** A source of rollouts for the tree builder. */
export interface RolloutBackend extends Sampler {
  readonly kind: 'vllm' | 'embedded' | (string & {});
  readonly counters?: Readonly<RolloutCounters>;
  generate(promptIds: number[], n: number, params: RolloutParams): Promise<Completion[]>;
  /**
   * Makes the backend serve `policy`'s current weights: waits for in-flight requests,
   * holds new ones, moves the weights, then resumes.
   */
  syncWeights(policy: PolicyWeights, step: number): Promise<WeightSyncReport>;
  /**
   * The rollout phase is over (training follows): give back device memory held between
   * generate() calls (the paged engine's KV pool). The next generate() takes it again.
   */
  releaseRolloutMemory?(): Promise<void>;
  close(): Promise<void>;
}

/** Error from a rollout backend or server; `status` is the HTTP status when there was one. */
export class RolloutError extends Error {
  override name = 'RolloutError';
  readonly status: number | undefined;
  readonly server: string | undefined;
  constructor(message: string, opts: { status?: number; server?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.status = opts.status;
    this.server = opts.server;
  }
}

// ---------------------------------------------------------------------------------------
// The engine behind the embedded backend and `serve`.

/** One prompt's request to an engine, with every sampling field resolved. */
export interface EngineRequest {
  promptIds: number[];
  n: number;
  maxTokens: number;
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  /** 0 = off. */
  topK: number;
  /** 0 = off. Optional for callers that predate it. */
  minP?: number;
  /** undefined = unseeded (the engine picks one). */
  seed: number | undefined;
  stopTokenIds: number[];
  /**
   * vLLM's ignore_eos: EOS ids are not stops by themselves. A stop on an EOS id that the
   * caller listed in stop_token_ids then reports that id as its stop_reason, as vLLM does;
   * without it an EOS stop reports null. undefined = false.
   */
  ignoreEos?: boolean;
  /** Alternatives to report per token (EngineSample.top). 0 or undefined = none. */
  topLogprobs?: number;
  /** false: no log-probs wanted (EngineSample.logprobs may be NaN); undefined = true. */
  logprobs?: boolean;
  /** Aborting it ends the request's samples before their next decode step ('abort'). */
  signal?: AbortSignal;
  /**
   * Called as tokens are sampled (sample j of this request); returning true ends that sample
   * before its next decode step. Engines that cannot stream call it once per token at the end.
   */
  onToken?: (j: number, token: StreamedToken) => boolean | void;
}

/** The most likely tokens at one position and their log-probs (most likely first). */
export interface TokenAlternatives {
  ids: number[];
  logprobs: number[];
}

/** One token as it is sampled. */
export interface StreamedToken {
  id: number;
  logprob: number;
  top?: TokenAlternatives;
}

/** One sample as an engine produced it. */
export interface EngineSample {
  tokenIds: number[];
  logprobs: number[];
  /** With topLogprobs > 0: the alternatives at every position. */
  top?: TokenAlternatives[];
  /** 'abort': ended by the request's signal or by onToken. */
  finishReason: 'stop' | 'length' | 'abort';
}

export interface EngineInfo {
  vocabSize: number;
  /** Prompt + completion tokens the engine can hold. */
  maxModelLen: number;
}

/**
 * A generation engine: runs a batch of requests in one call. Results must depend only on
 * each request (its prompt, n, options and seed), never on what else is in the batch.
 */
export interface RolloutEngine {
  info(): EngineInfo;
  /** Whether a and b may run in one generate() call. */
  canBatch(a: EngineRequest, b: EngineRequest): boolean;
  /** One EngineSample[] (length n) per request, in request order. */
  generate(batch: EngineRequest[]): Promise<EngineSample[][]>;
  /** Replaces the weights with a Hugging Face checkpoint directory's. */
  loadWeights(dir: string): Promise<void>;
  /** Copies the weights from an in-process policy (same parameter names and shapes). */
  setWeights?(policy: PolicyWeights): Promise<void> | void;
  /**
   * Concurrent generate() calls join one running batch (PagedEngine): the batcher passes
   * requests through as they come instead of running one call at a time.
   */
  readonly continuous?: boolean;
  /** A continuous engine's batches so far (its steps): what the batcher's stats report for it. */
  stepCounts?(): EngineStepCounts;
  /** Gives back device memory held between calls (the paged KV pool); the next generate() takes it again. */
  releaseMemory?(): Promise<void>;
  /** Drops cached prefixes (the paged engine's prefix cache); running requests go on. */
  resetPrefixCache?(): void;
  /** Ends running requests and frees what the engine holds. */
  close?(): Promise<void>;
}

/** The steps of a continuous engine since it was made: each step is one batch that requests join and leave. */
export interface EngineStepCounts {
  steps: number;
  /** Sum over the steps of the requests each one advanced (mean per step: requestSteps / steps). */
  requestSteps: number;
  /** Most requests one step advanced. */
  maxRequests: number;
}

/** Text side of a tokenizer (lib/prompt's ChatTokenizer satisfies it). */
export interface TextCodec {
  encode(text: string): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  readonly eosTokenIds?: readonly number[];
  /** The tokenizer's own eos_token id (vLLM's primary EOS: an EOS stop on it reports stop_reason null). */
  readonly eosTokenId?: number;
}
