// Sampling parameters with every default made explicit, shared by all backends so that the
// same RolloutParams mean the same thing everywhere.
import type { Completion } from '../murphy/types.js';
import type { RolloutParams } from './types.js';
import { RolloutError } from './types.js';

/** Backend-level defaults for fields a request may leave out. */
export interface SamplingDefaults {
  /** Completion token budget when params.maxTokens is unset. Default 1024. */
  maxTokens?: number;
  /** Stop token ids when params.stopTokenIds is unset (typically the tokenizer's EOS ids). */
  stopTokenIds?: readonly number[];
}

export interface ResolvedSampling {
  maxTokens: number;
  temperature: number;
  topP: number;
  /** 0 = off. */
  topK: number;
  /** 0 = off. */
  minP: number;
  seed: number | undefined;
  stop: string[];
  stopTokenIds: number[];
}

export const DEFAULT_MAX_TOKENS = 1024;

function isInt(x: unknown): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x);
}

/** Fills defaults (temperature 1, top_p 1, top_k and min_p off) and checks ranges. */
export function resolveSampling(p: RolloutParams, d: SamplingDefaults = {}): ResolvedSampling {
  const r: ResolvedSampling = {
    maxTokens: p.maxTokens ?? d.maxTokens ?? DEFAULT_MAX_TOKENS,
    temperature: p.temperature ?? 1,
    topP: p.topP ?? 1,
    topK: p.topK === undefined || p.topK < 0 ? 0 : p.topK,
    minP: p.minP ?? 0,
    seed: p.seed,
    stop: p.stop ?? [],
    stopTokenIds: [...(p.stopTokenIds ?? d.stopTokenIds ?? [])],
  };
  if (!isInt(r.maxTokens) || r.maxTokens < 1) throw new RolloutError(`maxTokens must be an integer >= 1, got ${r.maxTokens}`);
  if (!(r.temperature >= 0) || !Number.isFinite(r.temperature)) throw new RolloutError(`temperature must be >= 0, got ${r.temperature}`);
  if (!(r.topP > 0 && r.topP <= 1)) throw new RolloutError(`topP must be in (0, 1], got ${r.topP}`);
  if (!isInt(r.topK)) throw new RolloutError(`topK must be an integer, got ${r.topK}`);
  if (!(r.minP >= 0 && r.minP <= 1)) throw new RolloutError(`minP must be in [0, 1], got ${r.minP}`);
  if (r.seed !== undefined && (!isInt(r.seed) || r.seed < 0)) throw new RolloutError(`seed must be a non-negative integer, got ${r.seed}`);
  for (const t of r.stopTokenIds) if (!isInt(t) || t < 0) throw new RolloutError(`stopTokenIds: ${t} is not a token id`);
  return r;
}

/**
 * Completion tokens a prompt may ask for: min(maxTokens, maxModelLen - promptLen), as vLLM
 * rejects prompt + max_tokens > max_model_len with a 400. <= 0: no room left. Without a
 * known maxModelLen, maxTokens unchanged.
 */
export function contextBudget(maxTokens: number, promptLen: number, maxModelLen: number | undefined): number {
  return maxModelLen === undefined ? maxTokens : Math.min(maxTokens, maxModelLen - promptLen);
}

/** n completions of a prompt that left no room in the context: 'length', no tokens, no request made. */
export function noRoomCompletions(n: number): Completion[] {
  return Array.from({ length: n }, () => ({ tokenIds: [], logprobs: [], text: '', finishReason: 'length', stopReason: null, noRoom: true }));
}
