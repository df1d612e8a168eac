// Response bodies of `murphy-native serve`, shaped as OpenAI and vLLM shape them: choices,
// log-probs (the completions API's parallel lists, the chat API's per-token objects), and the
// incremental text of a streamed sample (vLLM's incremental detokenizer, holding back text
// that may still turn into a stop string).
import { finishSample, firstStop, type FinishedSample } from './finish.js';
import type { EngineRequest, EngineSample, StreamedToken, TextCodec, TokenAlternatives } from './types.js';

type Json = Record<string, unknown>;

/** vLLM reports -inf log-probs (tokens outside top-k/top-p) as this. */
const FLOOR = -9999;
const lp = (x: number) => (x > FLOOR ? x : FLOOR);

/** Text of one token in log-probs: decoded alone (special tokens included), or token_id:N without a tokenizer. */
export function tokenText(codec: TextCodec | undefined, id: number): string {
  return codec === undefined ? `token_id:${id}` : codec.decode([id]);
}

/** Log-probs of some tokens. */
export interface TokenRun {
  tokenIds: readonly number[];
  logprobs: readonly number[];
  top?: readonly TokenAlternatives[];
}

/**
 * The completions API's logprobs: tokens, token_logprobs, top_logprobs (per position, the
 * k alternatives and the sampled token, keyed by token text) and text_offset (from `offset`).
 */
export function completionLogprobs(run: TokenRun, k: number, codec: TextCodec | undefined, offset = 0): Json {
  const tokens = run.tokenIds.map((t) => tokenText(codec, t));
  const offsets: number[] = [];
  let at = offset;
  for (const t of tokens) {
    offsets.push(at);
    at += t.length;
  }
  return {
    text_offset: offsets,
    token_logprobs: run.logprobs.map(lp),
    tokens,
    top_logprobs: tokens.map((t, i) => {
      const d: Record<string, number> = {};
      const alt = run.top?.[i];
      if (alt !== undefined) for (let r = 0; r < Math.min(k, alt.ids.length); r++) d[tokenText(codec, alt.ids[r])] = lp(alt.logprobs[r]);
      d[t] = lp(run.logprobs[i]);
      return d;
    }),
  };
}

function tokenEntry(codec: TextCodec | undefined, id: number, logprob: number): Json {
  const token = tokenText(codec, id);
  return { token, logprob: lp(logprob), bytes: [...Buffer.from(token, 'utf8')] };
}

/** The chat API's logprobs: {content: [{token, logprob, bytes, top_logprobs: [k alternatives]}]}. */
export function chatLogprobs(run: TokenRun, k: number, codec: TextCodec | undefined): Json {
  return {
    content: run.tokenIds.map((t, i) => {
      const alt = run.top?.[i];
      const top = alt === undefined ? [] : alt.ids.slice(0, k).map((id, r) => tokenEntry(codec, id, alt.logprobs[r]));
      return { ...tokenEntry(codec, t, run.logprobs[i]), top_logprobs: top };
    }),
  };
}

/** A piece of a streamed sample: new text and the tokens behind it, or the end. */
export interface StreamDelta extends TokenRun {
  text: string;
  /** Set on the sample's last delta. */
  finish?: { reason: 'stop' | 'length' | 'abort'; stopReason: string | number | null; sample: FinishedSample };
}

/**
 * One sample streamed token by token. Tokens (with their log-probs) go out as they come;
 * text goes out as vLLM's incremental detokenizer produces it, minus the tail that could
 * still begin a stop string. A stop string or stop token ends the sample at once; the
 * final text and ids equal finishSample's on the whole sample.
 */
export class SampleStream {
  private readonly ids: number[] = [];
  private readonly lps: number[] = [];
  private readonly top: TokenAlternatives[] = [];
  private full = '';
  private prefixOffset = 0;
  private readOffset = 0;
  private sentTokens = 0;
  private sentText = '';
  private readonly holdBack: number;
  done = false;

  constructor(
    private readonly req: EngineRequest,
    private readonly stop: readonly string[],
    private readonly codec: TextCodec | undefined,
  ) {
    this.holdBack = stop.reduce((m, s) => Math.max(m, s.length - 1), 0);
  }

  private decode(ids: readonly number[]): string {
    return this.codec === undefined || ids.length === 0 ? '' : this.codec.decode(ids, { skipSpecialTokens: true });
  }

  /** Adds a sampled token; returns what to send (if anything). After a finishing delta, done is set. */
  push(t: StreamedToken): StreamDelta | undefined {
    if (this.done) return undefined;
    this.ids.push(t.id);
    this.lps.push(t.logprob);
    if (t.top !== undefined) this.top.push(t.top);
    if (this.codec !== undefined) {
      // vLLM's detokenize_incrementally: decode from a few tokens back so that joins are right
      const prefix = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
      const next = this.decode(this.ids.slice(this.prefixOffset));
      if (next.length > prefix.length && !next.endsWith('\uFFFD')) {
        this.full += next.slice(prefix.length);
        this.prefixOffset = this.readOffset;
        this.readOffset = this.ids.length;
      }
    }
    if (this.stop.length > 0 && firstStop(this.full, this.stop) !== undefined) return this.end('stop');
    if (this.req.stopTokenIds.includes(t.id)) return this.end('stop');
    if (this.ids.length >= this.req.maxTokens) return this.end('length');
    const text = this.full.slice(this.sentText.length, Math.max(this.sentText.length, this.full.length - this.holdBack));
    return this.take(text, this.ids.length);
  }

  /** Ends the sample with the engine's own result (it may hold tokens push() never saw). */
  finishWith(s: EngineSample): StreamDelta | undefined {
    if (this.done) return undefined;
    for (let i = this.ids.length; i < s.tokenIds.length; i++) {
      this.ids.push(s.tokenIds[i]);
      this.lps.push(s.logprobs[i]);
      const alt = s.top?.[i];
      if (alt !== undefined) this.top.push(alt);
    }
    return this.end(s.finishReason);
  }

  private end(reason: 'stop' | 'length' | 'abort'): StreamDelta {
    const f = finishSample({ tokenIds: this.ids, logprobs: this.lps, top: this.top.length > 0 ? this.top : undefined, finishReason: reason }, this.req, this.stop, this.codec);
    this.done = true;
    const text = f.text.startsWith(this.sentText) ? f.text.slice(this.sentText.length) : '';
    const d = this.take(text, f.tokenIds.length) ?? { text: '', tokenIds: [], logprobs: [] };
    return { ...d, finish: { reason: f.finishReason, stopReason: f.stopReason, sample: f } };
  }

  private take(text: string, upTo: number): StreamDelta | undefined {
    if (text === '' && upTo <= this.sentTokens) return undefined;
    const from = this.sentTokens;
    this.sentTokens = Math.max(from, upTo);
    this.sentText += text;
    return {
      text,
      tokenIds: this.ids.slice(from, upTo),
      logprobs: this.lps.slice(from, upTo),
      top: this.top.length > 0 ? this.top.slice(from, upTo) : undefined,
    };
  }
}
