// Engine samples to completions, as vLLM reports them: decoded text, stop strings, stop
// reasons. Shared by the embedded backend and `murphy-native serve`.
import type { EngineRequest, EngineSample, TextCodec, TokenAlternatives } from './types.js';
import { RolloutError } from './types.js';

/** A finished sample after stop-string handling, with its text. */
export interface FinishedSample {
  tokenIds: number[];
  logprobs: number[];
  /** The alternatives at every position, when the request asked for them. */
  top?: TokenAlternatives[];
  text: string;
  finishReason: 'stop' | 'length' | 'abort';
  /** vLLM's stop_reason: the stop string or stop token id that ended it; null for the tokenizer's EOS (without ignore_eos) or length. */
  stopReason: string | number | null;
}

export function firstStop(text: string, stop: readonly string[]): { at: number; s: string } | undefined {
  let best: { at: number; s: string } | undefined;
  for (const s of stop) {
    if (s === '') continue;
    const at = text.indexOf(s);
    if (at >= 0 && (best === undefined || at < best.at)) best = { at, s };
  }
  return best;
}

/** vLLM's primary EOS: the tokenizer's eos_token; a codec that does not say, its first EOS id. */
function primaryEos(codec: TextCodec): number | undefined {
  return 'eosTokenId' in codec ? codec.eosTokenId : codec.eosTokenIds?.[0];
}

/**
 * Text, stop strings and stop reasons for one engine sample, as vLLM reports them: text is
 * decoded without special tokens; a stop string ends the completion at the token that
 * completed it (kept in the token ids) and is cut from the text.
 */
export function finishSample(s: EngineSample, req: EngineRequest, stop: readonly string[], codec: TextCodec | undefined): FinishedSample {
  let tokenIds = s.tokenIds;
  let logprobs = s.logprobs;
  let top = s.top;
  let finishReason = s.finishReason;
  let stopReason: string | number | null = null;
  if (codec === undefined) {
    // no tokenizer, no eos_token (vLLM's get_eos_token_id is None with skip_tokenizer_init):
    // the EOS ids are stop ids like any other and report themselves
    if (stop.length > 0) throw new RolloutError('stop strings need a tokenizer');
    const last = tokenIds[tokenIds.length - 1];
    if (finishReason === 'stop') stopReason = last;
    return { tokenIds, logprobs, top, text: '', finishReason, stopReason };
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
    top = top?.slice(0, lo);
    text = cut.slice(0, h.at);
    finishReason = 'stop';
    stopReason = h.s;
  } else if (finishReason === 'stop') {
    const last = tokenIds[tokenIds.length - 1];
    // vLLM (check_stop) tests the tokenizer's eos_token first, unless ignore_eos, and reports
    // null; every other stop id, generation_config.json's further EOS ids among them, was a
    // stop_token_id there and is reported as itself
    stopReason = req.ignoreEos !== true && last === primaryEos(codec) ? null : last;
  }
  return { tokenIds, logprobs, top, text, finishReason, stopReason };
}
