// `murphy-native serve`: the embedded engine behind vLLM's OpenAI-compatible HTTP API, so
// that the vLLM client and its weight sync run end to end against a real server anywhere,
// and common OpenAI clients can use it.
//
//   GET  /health (always open), /version, /v1/models
//   POST /v1/completions       token-id or text prompts (one or a list); fields in openai-request.ts
//   POST /v1/chat/completions  messages rendered with the model's chat template
//                              (both: stream, n, logprobs with up to 20 alternatives, vLLM's
//                              return_token_ids, ...; the response has vLLM's extra fields)
//   POST /collective_rpc       {"method": "murphy_load_weights", "args": [dir]}: as vLLM with the
//                              worker extension in python/murphy_vllm; murphy_nccl_info/_init/_recv/_close
//                              over a loopback fake of NCCL (lib/rollout/weight-sync-serve.ts)
//   POST /reset_prefix_cache   drops the paged engine's prefix cache (--device); the CPU engine
//                              caches nothing across requests (accepted for compatibility)
//
// With an API key every route but /health needs `Authorization: Bearer KEY`. A request whose
// connection closes stops its generation; work admitted at once is bounded (503 with
// Retry-After beyond it). Bad requests get OpenAI-style error bodies
// {"error": {message, type, param, code}} with 4xx codes; nothing a client sends can stop
// the server.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import { AbortedError, EngineBatcher, QueueFullError, type BatcherOptions } from './batcher.js';
import { finishSample, type FinishedSample } from './finish.js';
import { bad, engineRequest, HttpError, planRequest, type GenPlan, type Json } from './openai-request.js';
import { chatLogprobs, completionLogprobs, SampleStream, tokenText, type StreamDelta } from './openai-response.js';
import type { EngineRequest, RolloutEngine, StreamedToken, TextCodec } from './types.js';
import { LoopbackWorker } from './weight-sync-serve.js';
import { RolloutError } from './types.js';
import { SERVE_DEFAULTS } from './serve-defaults.js';

/** The collective_rpc method that loads a checkpoint directory (same name as the vLLM worker extension's). */
export const LOAD_WEIGHTS_METHOD = 'murphy_load_weights';

export { SERVE_DEFAULTS };

export interface ServeOptions extends BatcherOptions {
  engine: RolloutEngine;
  /** Model name reported by /v1/models and required (when given) in requests. */
  modelName: string;
  /** Model directory, reported as `root` in /v1/models. */
  root?: string;
  /** For text prompts, completion text and stop strings; with renderChat, /v1/chat/completions. */
  tokenizer?: TextCodec;
  /** Ids that always end a completion unless ignore_eos (default: the tokenizer's EOS ids). */
  eosTokenIds?: readonly number[];
  host?: string;
  /** 0 = any free port. */
  port?: number;
  /** Required as `Authorization: Bearer KEY` on every route but /health. */
  apiKey?: string;
  /** Serve /collective_rpc (weight loading). Default true; refused on a non-loopback host without apiKey. */
  weightSync?: boolean;
  /** Largest request body accepted. Default 32 MiB. */
  maxBodyBytes?: number;
  /** Largest n. Default 1024. */
  maxN?: number;
  /** Largest work of one request, in tokens: prompt tokens + n x max_tokens, over its prompts (400 beyond it). Default 2^20. */
  maxRequestTokens?: number;
  /** Seconds in Retry-After when the queue (maxQueuedTokens, default 2^22 here) is full. Default 1. */
  retryAfterSeconds?: number;
  /** Called for each weight load with the directory, for logs. */
  onLoad?: (dir: string, seconds: number) => void;
}

export interface RolloutServer {
  /** http://host:port */
  readonly url: string;
  readonly server: Server;
  readonly batcher: EngineBatcher;
  /** Stops accepting, ends every generation at its next decode step, closes connections. */
  close(): Promise<void>;
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (c: Buffer) => {
      if (done) return;
      size += c.length;
      if (size > limit) {
        done = true;
        reject(new HttpError(413, `request body larger than ${limit} bytes`));
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => { if (!done) { done = true; resolve(Buffer.concat(chunks)); } });
    req.on('error', (e) => { if (!done) { done = true; reject(e); } });
  });
}

function parseJsonObject(buf: Buffer): Json {
  let v: unknown;
  try {
    v = JSON.parse(buf.toString('utf8'));
  } catch (e) {
    throw bad(`invalid JSON body: ${(e as Error).message}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('the request body must be a JSON object');
  return v as Json;
}

/** Whether host names only this machine (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return h.startsWith('::ffff:127.');
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** An SSE response: `data: {json}` events, then `data: [DONE]`. */
class EventStream {
  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.flushHeaders();
  }
  send(data: unknown): void {
    if (!this.res.writableEnded) this.res.write(`data: ${JSON.stringify(data)}\n\n`);
  }
  end(): void {
    if (!this.res.writableEnded) this.res.end('data: [DONE]\n\n');
  }
}

class Handler {
  readonly batcher: EngineBatcher;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly eos: number[];
  private readonly key: Buffer | undefined;
  private readonly ncclWorker: LoopbackWorker;

  constructor(private readonly o: ServeOptions) {
    this.batcher = new EngineBatcher(o.engine, { maxQueuedTokens: SERVE_DEFAULTS.maxQueuedTokens, ...o });
    this.ncclWorker = new LoopbackWorker(o.engine, (fn) => this.batcher.exclusive(fn));
    this.eos = [...(o.eosTokenIds ?? o.tokenizer?.eosTokenIds ?? [])];
    this.key = o.apiKey === undefined ? undefined : digest(o.apiKey);
  }

  /** Constant-time check of `Authorization: Bearer KEY` (both sides hashed to equal length first). */
  private authorized(req: IncomingMessage): boolean {
    if (this.key === undefined) return true;
    const m = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '');
    return timingSafeEqual(digest(m?.[1] ?? ''), this.key) && m !== null;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    const route = (m: string) => {
      if (method !== m) throw new HttpError(405, `method ${method} is not allowed on ${path}`);
    };
    if (path !== '/health' && !this.authorized(req)) {
      req.resume();
      throw new HttpError(401, 'missing or wrong API key: send the header `Authorization: Bearer KEY`');
    }
    switch (path) {
      case '/health':
      case '/ping':
        route('GET');
        res.writeHead(200).end();
        return;
      case '/version':
        route('GET');
        return this.json(res, 200, { version: 'murphy-native' });
      case '/v1/models':
        route('GET');
        return this.json(res, 200, {
          object: 'list',
          data: [{
            id: this.o.modelName, object: 'model', created: this.created, owned_by: 'murphy-native', root: this.o.root ?? this.o.modelName,
            parent: null, max_model_len: this.o.engine.info().maxModelLen, permission: [],
          }],
        });
      case '/v1/completions':
      case '/v1/chat/completions': {
        route('POST');
        const body = parseJsonObject(await readBody(req, this.o.maxBodyBytes ?? 32 << 20));
        return this.generate(path === '/v1/completions' ? 'completion' : 'chat', body, res);
      }
      case '/collective_rpc': {
        if (this.o.weightSync === false) break;
        route('POST');
        const body = parseJsonObject(await readBody(req, 1 << 20));
        return this.json(res, 200, await this.rpc(body));
      }
      case '/reset_prefix_cache':
        route('POST');
        await readBody(req, 1 << 20);
        this.o.engine.resetPrefixCache?.();
        res.writeHead(200).end();
        return;
    }
    throw new HttpError(404, `no route ${method} ${path}`);
  }

  private json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  private errorBody(err: unknown): { status: number; headers: Record<string, string>; body: Json } {
    let status = 500, message = 'internal error', param: string | null = null, type = 'InternalServerError';
    const headers: Record<string, string> = {};
    if (err instanceof HttpError) {
      status = err.status;
      message = err.message;
      param = err.param;
      type = status === 405 ? 'MethodNotAllowed' : status === 413 ? 'PayloadTooLarge' : err.type;
    } else if (err instanceof QueueFullError || err instanceof AbortedError) {
      status = 503;
      message = err.message;
      type = 'ServiceUnavailableError';
      headers['retry-after'] = String(this.o.retryAfterSeconds ?? SERVE_DEFAULTS.retryAfterSeconds);
    } else if (err instanceof RolloutError && err.status !== undefined && err.status < 500) {
      status = err.status;
      message = err.message;
      type = 'BadRequestError';
    } else if (err instanceof Error) {
      message = err.message;
    }
    return { status, headers, body: { error: { message, type, param, code: status } } };
  }

  error(res: ServerResponse, err: unknown): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const e = this.errorBody(err);
    this.json(res, e.status, e.body, e.headers);
  }

  /** Both generation endpoints: plan, admit (all prompts or none), run, answer. */
  private async generate(kind: 'completion' | 'chat', body: Json, res: ServerResponse): Promise<void> {
    const info = this.o.engine.info();
    const plan = planRequest(kind, body, {
      info, modelName: this.o.modelName, tokenizer: this.o.tokenizer, eos: this.eos, maxN: this.o.maxN ?? SERVE_DEFAULTS.maxN,
      maxRequestTokens: this.o.maxRequestTokens ?? SERVE_DEFAULTS.maxRequestTokens,
    });
    // a connection that closes before the answer is complete stops the work
    const gone = new AbortController();
    res.on('close', () => { if (!res.writableFinished) gone.abort(); });
    const reqs = plan.prompts.map((_, p) => engineRequest(plan, p, info.maxModelLen, gone.signal));
    const head = { id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(16).toString('hex')}`, created: Math.floor(Date.now() / 1000), model: this.o.modelName };
    if (plan.stream) return this.stream(plan, reqs, head, res);
    // with stop strings, a sample stops generating once its text holds one (the answer is the same)
    const watched = plan.stop.length === 0 ? reqs : reqs.map((r) => {
      const ss = Array.from({ length: plan.n }, () => new SampleStream(r, plan.stop, this.o.tokenizer));
      return { ...r, onToken: (j: number, t: StreamedToken) => (ss[j].push(t), ss[j].done) };
    });
    const results = await Promise.all(this.batcher.submitAll(watched));
    if (gone.signal.aborted) return;
    const samples = results.map((r, p) => r.map((s) => finishSample(s, reqs[p], plan.stop, this.o.tokenizer)));
    this.json(res, 200, kind === 'chat' ? this.chatBody(plan, samples, head) : this.completionBody(plan, samples, head));
  }

  private usage(plan: GenPlan, completionTokens: number): Json {
    const promptTokens = plan.prompts.reduce((a, p) => a + p.length, 0);
    return { prompt_tokens: promptTokens, total_tokens: promptTokens + completionTokens, completion_tokens: completionTokens, prompt_tokens_details: null };
  }

  private completionBody(plan: GenPlan, samples: FinishedSample[][], head: Json): Json {
    const choices: Json[] = [];
    let completionTokens = 0;
    samples.forEach((ss, pi) => ss.forEach((s, j) => {
      completionTokens += s.tokenIds.length;
      choices.push({
        index: pi * plan.n + j,
        text: s.text,
        logprobs: plan.logprobs === null ? null : completionLogprobs(s, plan.logprobs, this.o.tokenizer),
        finish_reason: s.finishReason,
        stop_reason: s.stopReason,
        prompt_logprobs: null,
        prompt_token_ids: plan.returnTokenIds ? plan.prompts[pi] : null,
        token_ids: plan.returnTokenIds ? s.tokenIds : null,
      });
    }));
    return { ...head, object: 'text_completion', choices, usage: this.usage(plan, completionTokens) };
  }

  private chatBody(plan: GenPlan, samples: FinishedSample[][], head: Json): Json {
    const choices = samples[0].map((s, j) => ({
      index: j,
      message: { role: 'assistant', content: s.text, refusal: null, tool_calls: [], reasoning_content: null },
      logprobs: plan.logprobs === null ? null : chatLogprobs(s, plan.logprobs, this.o.tokenizer),
      finish_reason: s.finishReason,
      stop_reason: s.stopReason,
      token_ids: plan.returnTokenIds ? s.tokenIds : null,
    }));
    const completionTokens = samples[0].reduce((a, s) => a + s.tokenIds.length, 0);
    return {
      ...head, object: 'chat.completion', choices, usage: this.usage(plan, completionTokens), prompt_logprobs: null,
      prompt_token_ids: plan.returnTokenIds ? plan.prompts[0] : null,
    };
  }

  /**
   * Server-sent events in OpenAI's chunk format: one chunk per new piece of a sample, its
   * finish_reason on its last, then (stream_options.include_usage) a chunk with the usage
   * and no choices, then `data: [DONE]`.
   */
  private async stream(plan: GenPlan, reqs: EngineRequest[], head: Json, res: ServerResponse): Promise<void> {
    const chat = plan.kind === 'chat';
    const object = chat ? 'chat.completion.chunk' : 'text_completion';
    const streams = reqs.map((r) => Array.from({ length: plan.n }, () => new SampleStream(r, plan.stop, this.o.tokenizer)));
    let completionTokens = 0;
    let sse: EventStream | undefined;
    const started = new Set<number>();
    const offsets = new Map<number, number>();
    const chunk = (index: number, d: StreamDelta, p: number): Json => {
      const finish = d.finish === undefined ? null : d.finish.reason;
      const stopReason = d.finish === undefined ? null : d.finish.stopReason;
      const ids = plan.returnTokenIds ? { token_ids: d.tokenIds } : {};
      let choice: Json;
      if (chat) {
        const delta: Json = started.has(index) ? { content: d.text } : { role: 'assistant', content: d.text };
        choice = { index, delta, logprobs: plan.logprobs === null ? null : chatLogprobs(d, plan.logprobs, this.o.tokenizer), finish_reason: finish, stop_reason: stopReason, ...ids };
      } else {
        choice = {
          index, text: d.text, logprobs: plan.logprobs === null ? null : this.streamedLogprobs(d, plan.logprobs, offsets, index), finish_reason: finish, stop_reason: stopReason,
          ...(plan.returnTokenIds && !started.has(index) ? { prompt_token_ids: plan.prompts[p] } : {}), ...ids,
        };
      }
      started.add(index);
      const c: Json = { ...head, object, choices: [choice] };
      if (chat && plan.returnTokenIds && index === 0 && !started.has(-1)) {
        started.add(-1);
        c.prompt_token_ids = plan.prompts[0];
      }
      if (plan.includeUsage) c.usage = null;
      return c;
    };
    const emit = (p: number, j: number, d: StreamDelta | undefined) => {
      if (d === undefined || sse === undefined) return;
      if (d.finish !== undefined) completionTokens += d.finish.sample.tokenIds.length;
      sse.send(chunk(p * plan.n + j, d, p));
    };
    const streamed = reqs.map((r, p) => ({
      ...r,
      onToken: (j: number, t: StreamedToken) => {
        const s = streams[p][j];
        emit(p, j, s.push(t));
        return s.done;
      },
    }));
    // a refusal (queue full) throws here and is answered as plain JSON, not as a stream
    const pending = this.batcher.submitAll(streamed);
    sse = new EventStream(res);
    try {
      const results = await Promise.all(pending);
      if (res.destroyed) return;
      results.forEach((r, p) => r.forEach((s, j) => emit(p, j, streams[p][j].finishWith(s))));
      if (plan.includeUsage) sse.send({ ...head, object, choices: [], usage: this.usage(plan, completionTokens) });
    } catch (err) {
      if (!(err instanceof AbortedError)) sse.send(this.errorBody(err).body);
    }
    sse.end();
  }

  /** A chunk's completions log-probs, text_offset continuing where the sample's last chunk ended. */
  private streamedLogprobs(d: StreamDelta, k: number, offsets: Map<number, number>, index: number): Json {
    const at = offsets.get(index) ?? 0;
    offsets.set(index, at + d.tokenIds.reduce((a, t) => a + tokenText(this.o.tokenizer, t).length, 0));
    return completionLogprobs(d, k, this.o.tokenizer, at);
  }

  private async rpc(b: Json): Promise<Json> {
    if (typeof b.method !== 'string') throw bad("Missing 'method' in request body", 'method');
    // the NCCL weight-sync methods, over the loopback fake (lib/rollout/weight-sync-serve.ts)
    if (LoopbackWorker.handles(b.method)) return this.ncclWorker.call(b.method, Array.isArray(b.args) ? b.args : [], typeof b.timeout === 'number' ? b.timeout : undefined);
    if (b.method !== LOAD_WEIGHTS_METHOD) throw bad(`unknown collective_rpc method '${b.method}' (this server has '${LOAD_WEIGHTS_METHOD}')`, 'method');
    const args = b.args;
    const kw = (b.kwargs ?? {}) as Json;
    const dir = Array.isArray(args) && typeof args[0] === 'string' ? args[0] : typeof kw.path === 'string' ? kw.path : undefined;
    if (dir === undefined) throw bad(`${LOAD_WEIGHTS_METHOD} needs the checkpoint directory as args[0]`, 'args');
    const t0 = performance.now();
    await this.batcher.exclusive(async () => {
      try {
        await this.o.engine.loadWeights(dir);
      } catch (e) {
        if (e instanceof RolloutError && e.status !== undefined) throw e;
        throw new RolloutError(`loading weights from ${dir}: ${(e as Error).message}`, { status: 400, cause: e });
      }
    });
    const seconds = (performance.now() - t0) / 1000;
    this.o.onLoad?.(dir, seconds);
    return { results: [{ path: dir, seconds, loaded: true }] };
  }
}

/** Starts the server; resolves once it listens. */
export function startServer(o: ServeOptions): Promise<RolloutServer> {
  const host = o.host ?? '127.0.0.1';
  if (o.weightSync !== false && o.apiKey === undefined && !isLoopback(host)) {
    return Promise.reject(new Error(`refusing to serve the weight-loading endpoint (/collective_rpc) on ${host} without an API key: pass --api-key KEY (or MURPHY_API_KEY), --no-weight-sync, or --host 127.0.0.1`));
  }
  if (o.apiKey !== undefined && o.apiKey === '') return Promise.reject(new Error('the API key is empty: pass a non-empty --api-key (or MURPHY_API_KEY)'));
  const h = new Handler(o);
  const server = createServer((req, res) => {
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    h.handle(req, res).catch((err: unknown) => {
      try {
        h.error(res, err);
      } catch {
        res.destroy();
      }
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, host, () => {
      server.off('error', reject);
      const a = server.address() as AddressInfo;
      const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
      resolve({
        url: `http://${host}:${a.port}`,
        server,
        batcher: h.batcher,
        close: async () => {
          const closed = new Promise<void>((res) => server.close(() => res()));
          await h.batcher.abortAll();
          server.closeAllConnections();
          await closed;
        },
      });
    });
  });
}
