// The vLLM rollout backend: OpenAI-compatible /v1/completions over HTTP on one or more
// servers, token ids in and out (the trainer templates and tokenizes; text is never
// re-tokenized), and weight sync through a checkpoint directory + the worker extension in
// python/murphy_vllm. See docs/rollout.md for the server command it expects.
import { rmSync, readdirSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Completion } from '../murphy/types.js';
import { contextBudget, noRoomCompletions, resolveSampling, type SamplingDefaults } from './params.js';
import type { PolicyWeights, RolloutBackend, RolloutCounters, RolloutParams, TextCodec, WeightSync, WeightSyncReport } from './types.js';
import { RolloutError } from './types.js';
import { LOAD_WEIGHTS_METHOD } from './server.js';

export type FetchLike = (url: string, init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal }) => Promise<{
  status: number;
  text(): Promise<string>;
}>;

/** What the client reports as it goes (for logs and metrics). */
export type VllmEvent =
  | { type: 'retry'; server: string; attempt: number; delayMs: number; error: string }
  | { type: 'server-dead'; server: string; error: string }
  | { type: 'server-alive'; server: string }
  | { type: 'missing-logprobs'; server: string }
  | { type: 'abort'; server: string; attempt: number }
  | { type: 'sync-waiting'; inFlight: number }
  | { type: 'weights-loaded'; server: string; path: string; seconds: number };

export interface VllmOptions extends SamplingDefaults {
  /** Base URLs, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted). */
  servers: string[];
  /** The served model name (`--served-model-name`); default: what the servers report, which must agree. */
  model?: string;
  /**
   * Sent as `Authorization: Bearer KEY` (vLLM's and `murphy-native serve`'s --api-key).
   * Default: the environment variable MURPHY_API_KEY when set.
   */
  apiKey?: string;
  /**
   * Prompt + completion tokens a server holds. Default: the smallest max_model_len the
   * servers report in GET /v1/models (start-up check). max_tokens is clamped to
   * maxModelLen - prompt length; a prompt that leaves no room gets 'length' completions
   * with no tokens (noRoom), without a request.
   */
  maxModelLen?: number;
  /** Retries of a request whose response has finish_reason "abort" (paused or aborted server-side). Default 3. */
  maxAbortRetries?: number;
  /** Time limit of one HTTP request, ms. Default 600 000. */
  timeoutMs?: number;
  /** Retries of a request after connection errors, timeouts, 429 and 5xx. Default 4. */
  maxRetries?: number;
  /** First retry delay, ms; doubles per retry up to backoffMaxMs (10 000), with jitter. Default 500. */
  backoffMs?: number;
  backoffMaxMs?: number;
  /** Consecutive failures after which a server is considered dead. Default 3. */
  deadAfter?: number;
  /** A dead server is probed (GET /health) at most this often, ms. Default 15 000. */
  reviveMs?: number;
  /** The trainer's tokenizer: start-up checks that the servers tokenize text the same way. */
  tokenizer?: TextCodec;
  /** Prompt ids of the start-up probe (default: the tokenizer's ids of a short text, else [1, 2, 3]). */
  probePromptIds?: number[];
  /** Where checkpoints for weight sync are written (must be readable by the servers at the same path). */
  syncDir?: string;
  /** Checkpoint directories kept after a sync. Default 1. */
  syncKeep?: number;
  /**
   * Replaces the default disk sync: a WeightSync, or a function of this client and its disk
   * sync that makes one (the NCCL sync, lib/rollout/weight-sync.ts, which falls back to the disk).
   */
  weightSync?: WeightSync | ((client: VllmBackend, disk: DiskWeightSync) => WeightSync);
  fetch?: FetchLike;
  onEvent?: (e: VllmEvent) => void;
}

interface ServerState {
  url: string;
  outstanding: number;
  failures: number;
  dead: boolean;
  deadReason: string;
  lastProbe: number;
  probing: Promise<boolean> | undefined;
  /** max_model_len from GET /v1/models, once checked. */
  maxModelLen: number | undefined;
}

type Json = Record<string, unknown>;

const PROBE_TEXT = 'def add(a, b):\n    return a + b  # naïve ✓\n';

class HttpFailure extends Error {
  constructor(message: string, readonly retryable: boolean, readonly status?: number) {
    super(message);
  }
}

function errorText(status: number, body: string): string {
  try {
    const j = JSON.parse(body) as Json;
    const e = (j.error ?? j) as Json;
    if (typeof e.message === 'string') return e.message;
    if (typeof j.detail === 'string') return j.detail;
  } catch {
    // not JSON
  }
  return body.length > 300 ? `${body.slice(0, 300)}...` : body || `HTTP ${status}`;
}

function causeText(e: unknown): string {
  if (e instanceof Error) {
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'timed out';
    const c = (e as { cause?: unknown }).cause;
    if (c instanceof Error) return `${e.message}: ${(c as { code?: string }).code ?? c.message}`;
    return e.message;
  }
  return String(e);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Rolling hash of token-id prefixes: key of ids[0..i) for every i, in one pass. */
function prefixKeys(ids: readonly number[], each: (len: number, key: number) => boolean | void): void {
  const P1 = 2147483629, P2 = 2147483587;
  let h1 = 7, h2 = 11;
  for (let i = 0; i < ids.length; i++) {
    h1 = (h1 * 1000003 + ids[i] + 1) % P1;
    h2 = (h2 * 999983 + ids[i] + 1) % P2;
    if (each(i + 1, h1 * 4194304 + (h2 % 4194304)) === true) return;
  }
}

export interface CompletionChoice {
  index: number;
  tokenIds: number[];
  logprobs: number[] | undefined;
  text: string;
  finishReason: string;
  /** The stop token id or stop string that ended the choice; null for EOS, length or abort. */
  stopReason: number | string | null;
  promptTokenIds: number[] | undefined;
}

/**
 * Reads a vLLM /v1/completions response body: choices sorted by index, `token_ids`,
 * `logprobs.token_logprobs`, `finish_reason`, `stop_reason` and `prompt_token_ids` (per
 * choice; vLLM's completions endpoint never puts it at the top level, only chat responses
 * do, but a top-level list is read too). vLLM returns non-streaming choices in index order;
 * they are sorted anyway. Throws RolloutError when the body is not what vLLM returns.
 */
export function parseCompletionResponse(body: unknown, expectChoices: number): CompletionChoice[] {
  const b = body as Json;
  if (b === null || typeof b !== 'object' || !Array.isArray(b.choices)) throw new RolloutError('the completion response has no choices');
  const top = Array.isArray(b.prompt_token_ids) ? (b.prompt_token_ids as number[]) : undefined;
  const out: CompletionChoice[] = (b.choices as Json[]).map((c, k) => {
    const index = typeof c.index === 'number' ? c.index : k;
    if (!Array.isArray(c.token_ids)) {
      throw new RolloutError('the server returned no token_ids: start vLLM >= 0.10.2 (the request sets return_token_ids)');
    }
    const tokenIds = c.token_ids as number[];
    const lpObj = c.logprobs as Json | null | undefined;
    let logprobs: number[] | undefined;
    if (lpObj !== null && lpObj !== undefined && Array.isArray(lpObj.token_logprobs)) {
      const lp = lpObj.token_logprobs as (number | null)[];
      if (lp.length !== tokenIds.length) {
        throw new RolloutError(`choice ${index}: ${lp.length} log-probs for ${tokenIds.length} tokens`);
      }
      logprobs = lp.every((x) => typeof x === 'number') ? (lp as number[]) : undefined;
    }
    const pti = Array.isArray(c.prompt_token_ids) ? (c.prompt_token_ids as number[]) : top;
    const sr = c.stop_reason;
    return {
      index, tokenIds, logprobs, text: typeof c.text === 'string' ? c.text : '',
      finishReason: typeof c.finish_reason === 'string' ? c.finish_reason : 'unknown',
      stopReason: typeof sr === 'number' || typeof sr === 'string' ? sr : null, promptTokenIds: pti,
    };
  });
  out.sort((a, b2) => a.index - b2.index);
  if (out.length !== expectChoices || out.some((c, i) => c.index !== i)) {
    throw new RolloutError(`expected choices 0..${expectChoices - 1}, got indices [${out.map((c) => c.index).join(', ')}]`);
  }
  return out;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function firstDiff(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** What the start-up check found on one server. */
export interface ServerCheck {
  server: string;
  ok: boolean;
  model?: string;
  maxModelLen?: number;
  error?: string;
}

/** Rollouts from vLLM servers over HTTP. Create with VllmBackend.connect(options). */
export class VllmBackend implements RolloutBackend {
  readonly kind = 'vllm';
  private readonly o: VllmOptions;
  private readonly servers: ServerState[];
  private modelName: string | undefined;
  private readonly fetchFn: FetchLike;
  private readonly affinity = new Map<number, ServerState>();
  private readonly named = new Map<string, ServerState>();
  private readonly sync: WeightSync;
  private gate: Promise<void> | undefined;
  private inFlight = 0;
  private idle: (() => void) | undefined;
  private closed = false;
  private readonly apiKey: string | undefined;
  readonly counters: RolloutCounters = { noRoom: 0, aborted: 0 };

  constructor(o: VllmOptions) {
    if (o.servers.length === 0) throw new RolloutError('VllmBackend: no servers');
    this.o = o;
    this.servers = o.servers.map((u) => ({
      url: u.replace(/\/+$/, '').replace(/\/v1$/, ''), outstanding: 0, failures: 0, dead: false, deadReason: '', lastProbe: 0, probing: undefined, maxModelLen: undefined,
    }));
    if (o.maxModelLen !== undefined && (!Number.isSafeInteger(o.maxModelLen) || o.maxModelLen < 1)) {
      throw new RolloutError(`maxModelLen must be an integer >= 1, got ${o.maxModelLen}`);
    }
    this.apiKey = o.apiKey ?? (process.env.MURPHY_API_KEY || undefined);
    this.modelName = o.model;
    this.fetchFn = o.fetch ?? (globalThis.fetch as unknown as FetchLike);
    const disk = new DiskWeightSync(this, { dir: o.syncDir, keep: o.syncKeep });
    this.sync = typeof o.weightSync === 'function' ? o.weightSync(this, disk) : o.weightSync ?? disk;
  }

  /** Creates the backend and runs the start-up checks (see check()); throws when no server passes. */
  static async connect(o: VllmOptions): Promise<VllmBackend> {
    const b = new VllmBackend(o);
    const checks = await b.check();
    if (!checks.some((c) => c.ok)) {
      throw new RolloutError(`no usable vLLM server:\n${checks.map((c) => `  ${c.server}: ${c.error ?? 'ok'}`).join('\n')}`);
    }
    return b;
  }

  /** The served model name in use. */
  get model(): string | undefined { return this.modelName; }

  /** Base URLs of the servers currently considered alive. */
  liveServers(): string[] { return this.servers.filter((s) => !s.dead).map((s) => s.url); }

  /**
   * Prompt + completion tokens the servers hold: the option, else the smallest
   * max_model_len the servers reported (undefined before the start-up check).
   */
  get maxModelLen(): number | undefined {
    if (this.o.maxModelLen !== undefined) return this.o.maxModelLen;
    let m: number | undefined;
    for (const s of this.servers) if (s.maxModelLen !== undefined && (m === undefined || s.maxModelLen < m)) m = s.maxModelLen;
    return m;
  }

  /** Per-server load and health. */
  status(): { server: string; outstanding: number; dead: boolean; reason: string }[] {
    return this.servers.map((s) => ({ server: s.url, outstanding: s.outstanding, dead: s.dead, reason: s.deadReason }));
  }

  private emit(e: VllmEvent): void { this.o.onEvent?.(e); }

  /** One HTTP exchange; parses JSON. Throws HttpFailure. */
  async request(server: string, method: 'GET' | 'POST', path: string, body?: unknown, timeoutMs?: number): Promise<unknown> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.apiKey !== undefined) headers.authorization = `Bearer ${this.apiKey}`;
    let res: Awaited<ReturnType<FetchLike>>;
    let text: string;
    try {
      res = await this.fetchFn(`${server}${path}`, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs ?? this.o.timeoutMs ?? 600_000),
      });
      text = await res.text();
    } catch (e) {
      throw new HttpFailure(`${method} ${path}: ${causeText(e)}`, true);
    }
    if (res.status >= 200 && res.status < 300) {
      if (text === '') return null;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new HttpFailure(`${method} ${path}: the response is not JSON`, false, res.status);
      }
    }
    const retryable = res.status >= 500 || res.status === 429 || res.status === 408;
    throw new HttpFailure(`${method} ${path}: HTTP ${res.status}: ${errorText(res.status, text)}`, retryable, res.status);
  }

  /**
   * Start-up checks on every server: GET /v1/models serves the expected model (all servers the
   * same one); a one-token probe echoes the prompt ids unchanged with token ids and log-probs;
   * with a tokenizer, the server tokenizes a probe text exactly as the trainer does. A server
   * that fails is marked dead with the reason.
   */
  async check(): Promise<ServerCheck[]> {
    const results = await Promise.all(this.servers.map(async (s): Promise<ServerCheck> => {
      try {
        const models = await this.request(s.url, 'GET', '/v1/models', undefined, 30_000) as Json | null;
        const data = Array.isArray(models?.data) ? (models.data as Json[]) : [];
        const ids = data.map((d) => String(d.id));
        if (ids.length === 0) throw new Error('GET /v1/models lists no model');
        const want = this.o.model;
        if (want !== undefined && !ids.includes(want)) throw new Error(`serves ${ids.map((i) => `'${i}'`).join(', ')}, not '${want}' (vLLM's --served-model-name)`);
        const id = want ?? ids[0];
        const card = data.find((d) => d.id === id) as Json;
        return { server: s.url, ok: true, model: id, maxModelLen: typeof card.max_model_len === 'number' ? card.max_model_len : undefined };
      } catch (e) {
        return { server: s.url, ok: false, error: e instanceof Error ? e.message : String(e) };
      }
    }));
    const names = [...new Set(results.filter((r) => r.ok).map((r) => r.model))];
    if (this.modelName === undefined && names.length > 1) {
      throw new RolloutError(`the vLLM servers serve different models: ${results.filter((r) => r.ok).map((r) => `${r.server}: '${r.model}'`).join(', ')}; pass the model name`);
    }
    this.modelName ??= names[0];
    const tok = this.o.tokenizer;
    const probeIds = this.o.probePromptIds ?? (tok !== undefined ? tok.encode(PROBE_TEXT) : [1, 2, 3]);
    await Promise.all(results.map(async (r) => {
      if (!r.ok) return;
      try {
        const body = this.completionBody(probeIds, 1, { maxTokens: 1, temperature: 0, seed: 0 });
        const res = await this.request(r.server, 'POST', '/v1/completions', body, 60_000);
        const [c] = parseCompletionResponse(res, 1);
        if (c.promptTokenIds !== undefined && !sameIds(c.promptTokenIds, probeIds)) {
          throw new Error(`the server changed the probe's prompt ids (first difference at position ${firstDiff(c.promptTokenIds, probeIds)}): is it the trainer's tokenizer?`);
        }
        if (c.tokenIds.length !== 1) throw new Error(`the one-token probe returned ${c.tokenIds.length} tokens`);
        if (c.logprobs === undefined) throw new Error('the probe returned no log-probs');
        if (tok !== undefined) {
          const t = await this.request(r.server, 'POST', '/v1/completions', { ...body, prompt: PROBE_TEXT }, 60_000);
          const [ct] = parseCompletionResponse(t, 1);
          // a BOS the server adds to text prompts is harmless: the trainer sends token ids
          const srv = ct.promptTokenIds;
          if (srv !== undefined && !sameIds(srv, probeIds) && !sameIds(srv.slice(1), probeIds)) {
            throw new Error(`the server's tokenizer differs from the trainer's: ${JSON.stringify(PROBE_TEXT)} is [${srv.join(', ')}] there, [${probeIds.join(', ')}] here`);
          }
        }
      } catch (e) {
        r.ok = false;
        r.error = `start-up probe: ${e instanceof Error ? e.message : String(e)}`;
      }
    }));
    for (const r of results) {
      const s = this.servers.find((x) => x.url === r.server) as ServerState;
      if (r.maxModelLen !== undefined) s.maxModelLen = r.maxModelLen;
      if (!r.ok) this.markDead(s, r.error ?? 'failed the start-up check');
    }
    return results;
  }

  /**
   * The /v1/completions body for one prompt: every sampling field explicit, max_tokens
   * clamped to the room the context leaves (at least 1: generate() sends no request when
   * there is none), top_k 0 when off (vLLM also takes -1, but documents 0).
   */
  completionBody(promptIds: number[], n: number, params: RolloutParams): Json {
    const s = resolveSampling(params, this.o);
    return {
      model: this.modelName,
      prompt: promptIds,
      n,
      max_tokens: Math.max(1, contextBudget(s.maxTokens, promptIds.length, this.maxModelLen)),
      temperature: s.temperature,
      top_p: s.topP,
      top_k: s.topK > 0 ? s.topK : 0,
      min_p: s.minP,
      seed: s.seed ?? null,
      stop: s.stop,
      stop_token_ids: s.stopTokenIds,
      ignore_eos: false,
      min_tokens: 0,
      repetition_penalty: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      skip_special_tokens: true,
      include_stop_str_in_output: false,
      logprobs: 0,
      return_token_ids: true,
      stream: false,
    };
  }

  private markDead(s: ServerState, reason: string): void {
    if (!s.dead) this.emit({ type: 'server-dead', server: s.url, error: reason });
    s.dead = true;
    s.deadReason = reason;
    s.lastProbe = Date.now();
    for (const [k, v] of this.affinity) if (v === s) this.affinity.delete(k);
    for (const [k, v] of this.named) if (v === s) this.named.delete(k);
  }

  /** GET /health on a dead server; concurrent callers share one probe. */
  private probe(s: ServerState): Promise<boolean> {
    if (s.probing !== undefined) return s.probing;
    s.lastProbe = Date.now();
    s.probing = (async () => {
      try {
        await this.request(s.url, 'GET', '/health', undefined, 5_000);
        s.dead = false;
        s.failures = 0;
        s.deadReason = '';
        this.emit({ type: 'server-alive', server: s.url });
        return true;
      } catch {
        return false;
      } finally {
        s.probing = undefined;
        s.lastProbe = Date.now();
      }
    })();
    return s.probing;
  }

  /** Chooses a server (synchronously, so concurrent callers see each other's load); undefined when all are dead. */
  private pick(promptIds: readonly number[], key: string | undefined, avoid: ServerState | undefined): ServerState | undefined {
    const revive = this.o.reviveMs ?? 15_000;
    const now = Date.now();
    for (const s of this.servers) if (s.dead && s.probing === undefined && now - s.lastProbe >= revive) void this.probe(s);
    const live = this.servers.filter((s) => !s.dead);
    if (live.length === 0) return undefined;
    const choices = live.length > 1 && avoid !== undefined ? live.filter((s) => s !== avoid) : live;
    // affinity: the same key, or the longest earlier prompt that prefixes this one
    let aff: ServerState | undefined = key !== undefined ? this.named.get(key) : undefined;
    if (aff === undefined && key === undefined) {
      prefixKeys(promptIds, (_len, k) => {
        const s = this.affinity.get(k);
        if (s !== undefined) aff = s;
      });
    }
    if (aff !== undefined && choices.includes(aff)) return aff;
    let best = choices[0];
    for (const s of choices) if (s.outstanding < best.outstanding) best = s;
    // claim the key now, so that concurrent requests of the same tree follow
    if (key !== undefined) this.named.set(key, best);
    return best;
  }

  private async pickOrRevive(promptIds: readonly number[], key: string | undefined, avoid: ServerState | undefined): Promise<ServerState> {
    const s = this.pick(promptIds, key, avoid);
    if (s !== undefined) return s;
    // last resort: probe everything now
    await Promise.all(this.servers.map((x) => this.probe(x)));
    const t = this.pick(promptIds, key, avoid);
    if (t === undefined) {
      throw new RolloutError(`every vLLM server is down:\n${this.servers.map((x) => `  ${x.url}: ${x.deadReason}`).join('\n')}`);
    }
    return t;
  }

  private remember(promptIds: readonly number[], key: string | undefined, s: ServerState): void {
    if (key !== undefined) {
      this.named.set(key, s);
      if (this.named.size > 100_000) this.named.delete(this.named.keys().next().value as string);
      return;
    }
    let full = 0;
    prefixKeys(promptIds, (_l, k) => { full = k; });
    this.affinity.delete(full);
    this.affinity.set(full, s);
    if (this.affinity.size > 100_000) this.affinity.delete(this.affinity.keys().next().value as number);
  }

  async generate(promptIds: number[], n: number, params: RolloutParams): Promise<Completion[]> {
    if (this.closed) throw new RolloutError('the vLLM backend is closed');
    if (!Number.isSafeInteger(n) || n < 1) throw new RolloutError(`n must be an integer >= 1, got ${n}`);
    if (promptIds.length === 0) throw new RolloutError('empty prompt');
    if (contextBudget(resolveSampling(params, this.o).maxTokens, promptIds.length, this.maxModelLen) <= 0) {
      // the context is full: vLLM would answer 400; the branch ends here, as a 'length' completion
      this.counters.noRoom += n;
      return noRoomCompletions(n);
    }
    const body = this.completionBody(promptIds, n, params);
    while (this.gate !== undefined) await this.gate;
    this.inFlight++;
    try {
      return await this.send(promptIds, n, body, params.affinity);
    } finally {
      this.inFlight--;
      if (this.inFlight === 0) this.idle?.();
    }
  }

  private async send(promptIds: number[], n: number, body: Json, key: string | undefined): Promise<Completion[]> {
    const maxRetries = this.o.maxRetries ?? 4;
    const deadAfter = this.o.deadAfter ?? 3;
    const maxAborts = this.o.maxAbortRetries ?? 3;
    let aborts = 0;
    let avoid: ServerState | undefined;
    for (let attempt = 0; ; attempt++) {
      const s = this.pick(promptIds, key, avoid) ?? await this.pickOrRevive(promptIds, key, avoid);
      s.outstanding++;
      let res: unknown;
      try {
        res = await this.request(s.url, 'POST', '/v1/completions', body);
      } catch (e) {
        const f = e instanceof HttpFailure ? e : new HttpFailure(String(e), false);
        if (!f.retryable) throw new RolloutError(`${s.url}: ${f.message}`, { status: f.status, server: s.url });
        if (f.status !== 429) {
          s.failures++;
          if (s.failures >= deadAfter) this.markDead(s, f.message);
        }
        if (attempt >= maxRetries) {
          throw new RolloutError(`${s.url}: ${f.message} (gave up after ${attempt + 1} attempts)`, { status: f.status, server: s.url, cause: e });
        }
        const base = this.o.backoffMs ?? 500;
        const delayMs = Math.min(this.o.backoffMaxMs ?? 10_000, base * 2 ** attempt) * (0.5 + 0.5 * Math.random());
        this.emit({ type: 'retry', server: s.url, attempt: attempt + 1, delayMs, error: f.message });
        avoid = s;
        await sleep(delayMs);
        continue;
      } finally {
        s.outstanding--;
      }
      s.failures = 0;
      let choices: CompletionChoice[];
      try {
        choices = parseCompletionResponse(res, n);
      } catch (e) {
        throw new RolloutError(`${s.url}: ${(e as Error).message}`, { server: s.url, cause: e });
      }
      for (const c of choices) {
        if (c.promptTokenIds !== undefined && !sameIds(c.promptTokenIds, promptIds)) {
          throw new RolloutError(`${s.url}: the server's prompt_token_ids differ from the prompt sent (first difference at position ${firstDiff(c.promptTokenIds, promptIds)})`, { server: s.url });
        }
      }
      if (choices.some((c) => c.finishReason === 'abort')) {
        // a partial sequence (the server paused with abort, /abort_requests, a disconnect):
        // never a training sample; ask again, a bounded number of times
        if (aborts >= maxAborts) {
          throw new RolloutError(`${s.url}: the request was aborted by the server (finish_reason "abort") ${aborts + 1} times in a row; is something pausing or aborting requests?`, { server: s.url });
        }
        aborts++;
        this.counters.aborted++;
        this.emit({ type: 'abort', server: s.url, attempt: aborts });
        attempt--;
        continue;
      }
      if (choices.some((c) => c.logprobs === undefined)) this.emit({ type: 'missing-logprobs', server: s.url });
      this.remember(promptIds, key, s);
      return choices.map((c) => {
        const out: Completion = { tokenIds: c.tokenIds, text: c.text, finishReason: c.finishReason, stopReason: c.stopReason };
        if (c.logprobs !== undefined) out.logprobs = c.logprobs;
        return out;
      });
    }
  }

  /**
   * Waits for in-flight requests, holds new ones, and makes every live server serve
   * `policy`'s weights (by default: checkpoint to syncDir, collective_rpc, reset_prefix_cache).
   */
  async syncWeights(policy: PolicyWeights, step: number): Promise<WeightSyncReport> {
    while (this.gate !== undefined) await this.gate;
    let open!: () => void;
    this.gate = new Promise<void>((r) => { open = r; });
    try {
      if (this.inFlight > 0) {
        this.emit({ type: 'sync-waiting', inFlight: this.inFlight });
        await new Promise<void>((r) => { this.idle = r; });
      }
      this.idle = undefined;
      return await this.sync.sync(policy, step);
    } finally {
      this.gate = undefined;
      open();
    }
  }

  /** Marks a server dead after a failed weight load (it would serve stale weights). */
  retire(server: string, reason: string): void {
    const s = this.servers.find((x) => x.url === server);
    if (s !== undefined) this.markDead(s, reason);
  }

  /** Reports a successful load. */
  loaded(server: string, path: string, seconds: number): void {
    this.emit({ type: 'weights-loaded', server, path, seconds });
  }

  async close(): Promise<void> {
    this.closed = true;
    await (this.sync as WeightSync & { close?: () => Promise<void> }).close?.();
  }
}

export interface DiskWeightSyncOptions {
  /** Directory that receives step-N checkpoints; the servers must see it at the same path. */
  dir?: string;
  /** Checkpoints kept after a sync (older step-N directories are removed). Default 1. */
  keep?: number;
  /** collective_rpc method; default the worker extension's murphy_load_weights. */
  method?: string;
  /** Time limit of one server's load, ms. Default 600 000. */
  timeoutMs?: number;
}

/**
 * Checks the workers' answers to murphy_load_weights: at least one, each {loaded: true}, and
 * as many as the tensor x pipeline parallel size the workers report (every worker answered).
 * With vLLM's internal data parallelism only engine 0's workers' results come back, so the
 * other engines' loads cannot be checked from here (docs/rollout.md).
 */
export function checkLoadResults(r: unknown): { workers: number; worldSize: number | undefined } {
  const results = r !== null && typeof r === 'object' && Array.isArray((r as Json).results) ? ((r as Json).results as unknown[]) : [];
  if (results.length === 0) throw new Error('no worker answered the load (collective_rpc returned no results)');
  let worldSize: number | undefined;
  const ranks = new Set<unknown>();
  for (const x of results) {
    if (x === null || typeof x !== 'object' || (x as Json).loaded !== true) {
      throw new Error(`a worker did not confirm the load: ${JSON.stringify(x)}`);
    }
    const w = (x as Json).world_size;
    if (typeof w === 'number') {
      if (worldSize !== undefined && w !== worldSize) throw new Error(`the workers disagree on the tensor x pipeline parallel size (${worldSize} vs ${w})`);
      worldSize = w;
    }
    ranks.add((x as Json).rank);
  }
  if (worldSize !== undefined && (results.length !== worldSize || ranks.size !== worldSize)) {
    throw new Error(`${results.length} worker answer(s) (${ranks.size} distinct rank(s)) for tensor x pipeline parallel size ${worldSize}: not every worker loaded the weights`);
  }
  return { workers: results.length, worldSize };
}

/**
 * Weight sync through the file system: the policy writes a Hugging Face checkpoint
 * (atomically: temporary directory + rename) to <dir>/step-<step>; then on each live server:
 * POST /pause?mode=wait (skipped where the server has no such endpoint: 404), POST
 * /collective_rpc {method: murphy_load_weights, args: [path]}, POST
 * /reset_prefix_cache?reset_running_requests=true (without the flag vLLM answers 200 but
 * keeps blocks held by running requests; older servers ignore it), POST /resume. A server
 * that fails is retired (it would serve stale weights); the sync fails only when no server
 * took the weights.
 */
export class DiskWeightSync implements WeightSync {
  constructor(private readonly client: VllmBackend, private readonly o: DiskWeightSyncOptions = {}) {}

  async sync(policy: PolicyWeights, step: number): Promise<WeightSyncReport> {
    if (this.o.dir === undefined) throw new RolloutError('weight sync to vLLM needs a checkpoint directory (syncDir) that the servers can read');
    if (!Number.isSafeInteger(step) || step < 0) throw new RolloutError(`step must be a non-negative integer, got ${step}`);
    const t0 = performance.now();
    const root = resolve(this.o.dir);
    mkdirSync(root, { recursive: true });
    const path = join(root, `step-${step}`);
    await policy.save(path);
    const method = this.o.method ?? LOAD_WEIGHTS_METHOD;
    const servers = this.client.liveServers();
    const failed: { server: string; error: string }[] = [];
    const done: string[] = [];
    await Promise.all(servers.map(async (server) => {
      const t1 = performance.now();
      let paused = false;
      try {
        // no other client of this server samples half-loaded weights (dev-mode endpoint of newer vLLM)
        paused = await this.client.request(server, 'POST', '/pause?mode=wait', undefined, this.o.timeoutMs ?? 600_000).then(() => true, (e: unknown) => {
          if (e instanceof HttpFailure && e.status === 404) return false;
          throw e;
        });
        const r = await this.client.request(server, 'POST', '/collective_rpc', { method, args: [path], kwargs: {}, timeout: null }, this.o.timeoutMs ?? 600_000);
        checkLoadResults(r);
        await this.client.request(server, 'POST', '/reset_prefix_cache?reset_running_requests=true', undefined, 60_000);
        if (paused) {
          paused = false;
          await this.client.request(server, 'POST', '/resume', undefined, 60_000);
        }
        done.push(server);
        this.client.loaded(server, path, (performance.now() - t1) / 1000);
      } catch (e) {
        // best effort: a server left paused would hold every other client's requests
        if (paused) await this.client.request(server, 'POST', '/resume', undefined, 60_000).catch(() => undefined);
        const error = e instanceof Error ? e.message : String(e);
        failed.push({ server, error });
        this.client.retire(server, `weight sync to step ${step} failed: ${error}`);
      }
    }));
    if (done.length === 0) {
      throw new RolloutError(`weight sync to step ${step} failed on every server:\n${failed.map((f) => `  ${f.server}: ${f.error}`).join('\n')}`);
    }
    const keep = Math.max(1, this.o.keep ?? 1);
    const old = readdirSync(root).filter((f) => /^step-\d+$/.test(f) && f !== `step-${step}`)
      .sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
    for (const f of old.slice(0, Math.max(0, old.length - (keep - 1)))) rmSync(join(root, f), { recursive: true, force: true });
    return { step, method: 'disk', path, servers: done.sort(), failed, seconds: (performance.now() - t0) / 1000 };
  }
}
