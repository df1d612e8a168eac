// `murphy-native serve`: the embedded engine behind vLLM's OpenAI-compatible HTTP API, so
// that the vLLM client and its weight sync run end to end against a real server anywhere.
//
//   GET  /health, /version, /v1/models
//   POST /v1/completions     token-id or text prompts (one or a list), n, max_tokens, temperature,
//                            top_p, top_k, seed, stop, stop_token_ids, ignore_eos, logprobs (0),
//                            return_token_ids; the response has vLLM's fields (token_ids,
//                            prompt_token_ids, logprobs.token_logprobs, finish_reason, stop_reason)
//   POST /collective_rpc     {"method": "murphy_load_weights", "args": [dir]}: as vLLM with the
//                            worker extension in python/murphy_vllm
//   POST /reset_prefix_cache (nothing cached across requests; accepted for compatibility)
//
// Bad requests get OpenAI-style error bodies {"error": {message, type, param, code}} with 4xx
// codes; nothing a client sends can stop the server.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EngineBatcher, type BatcherOptions } from './batcher.js';
import { finishSample, type LocalSample } from './finish.js';
import type { EngineRequest, RolloutEngine, TextCodec } from './types.js';
import { RolloutError } from './types.js';

/** The collective_rpc method that loads a checkpoint directory (same name as the vLLM worker extension's). */
export const LOAD_WEIGHTS_METHOD = 'murphy_load_weights';

export interface ServeOptions extends BatcherOptions {
  engine: RolloutEngine;
  /** Model name reported by /v1/models and required (when given) in requests. */
  modelName: string;
  /** Model directory, reported as `root` in /v1/models. */
  root?: string;
  /** For text prompts, completion text and stop strings; token-id prompts work without one. */
  tokenizer?: TextCodec;
  /** Ids that always end a completion unless ignore_eos (default: the tokenizer's EOS ids). */
  eosTokenIds?: readonly number[];
  host?: string;
  /** 0 = any free port. */
  port?: number;
  /** Largest request body accepted. Default 32 MiB. */
  maxBodyBytes?: number;
  /** Largest n. Default 1024. */
  maxN?: number;
  /** Called for each weight load with the directory, for logs. */
  onLoad?: (dir: string, seconds: number) => void;
}

export interface RolloutServer {
  /** http://host:port */
  readonly url: string;
  readonly server: Server;
  readonly batcher: EngineBatcher;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly param: string | null = null, readonly type = status === 404 ? 'NotFoundError' : 'BadRequestError') {
    super(message);
  }
}

const bad = (message: string, param: string | null = null) => new HttpError(400, message, param);

type Json = Record<string, unknown>;

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

const isInt = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x);

function optInt(b: Json, k: string, def: number | undefined, lo: number, hi: number): number | undefined {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (!isInt(v) || v < lo || v > hi) throw bad(`'${k}' must be an integer in [${lo}, ${hi}], got ${JSON.stringify(v)}`, k);
  return v;
}

function optNum(b: Json, k: string, def: number, ok: (x: number) => boolean, what: string): number {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw bad(`'${k}' must be ${what}, got ${JSON.stringify(v)}`, k);
  return v;
}

function optBool(b: Json, k: string, def: boolean): boolean {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'boolean') throw bad(`'${k}' must be a boolean`, k);
  return v;
}

/** Fields vLLM accepts that this server does not implement: rejected unless at their neutral value. */
const UNSUPPORTED: [string, unknown][] = [
  ['presence_penalty', 0], ['frequency_penalty', 0], ['repetition_penalty', 1], ['min_p', 0], ['best_of', 1],
  ['echo', false], ['stream', false], ['suffix', null], ['logit_bias', null], ['min_tokens', 0],
  ['prompt_logprobs', null], ['guided_json', null], ['guided_regex', null], ['guided_choice', null], ['guided_grammar', null],
  ['include_stop_str_in_output', false], ['skip_special_tokens', true], ['use_beam_search', false],
];

interface Parsed {
  prompts: number[][];
  n: number;
  req: Omit<EngineRequest, 'promptIds'>;
  stop: string[];
  logprobs: boolean;
  returnTokenIds: boolean;
  maxTokensGiven: number | undefined;
}

class Handler {
  readonly batcher: EngineBatcher;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly eos: number[];

  constructor(private readonly o: ServeOptions) {
    this.batcher = new EngineBatcher(o.engine, o);
    this.eos = [...(o.eosTokenIds ?? o.tokenizer?.eosTokenIds ?? [])];
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    const route = (m: string) => {
      if (method !== m) throw new HttpError(405, `method ${method} is not allowed on ${path}`);
    };
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
      case '/v1/completions': {
        route('POST');
        const body = parseJsonObject(await readBody(req, this.o.maxBodyBytes ?? 32 << 20));
        return this.json(res, 200, await this.completions(body));
      }
      case '/collective_rpc': {
        route('POST');
        const body = parseJsonObject(await readBody(req, 1 << 20));
        return this.json(res, 200, await this.rpc(body));
      }
      case '/reset_prefix_cache':
        route('POST');
        await readBody(req, 1 << 20);
        res.writeHead(200).end();
        return;
      default:
        throw new HttpError(404, `no route ${method} ${path}`);
    }
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  error(res: ServerResponse, err: unknown): void {
    let status = 500, message = 'internal error', param: string | null = null, type = 'InternalServerError';
    if (err instanceof HttpError) {
      status = err.status;
      message = err.message;
      param = err.param;
      type = status === 405 ? 'MethodNotAllowed' : status === 413 ? 'PayloadTooLarge' : err.type;
    } else if (err instanceof RolloutError && err.status !== undefined && err.status < 500) {
      status = err.status;
      message = err.message;
      type = 'BadRequestError';
    } else if (err instanceof Error) {
      message = err.message;
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    this.json(res, status, { error: { message, type, param, code: status } });
  }

  private parse(b: Json): Parsed {
    if (b.model !== undefined && b.model !== null && b.model !== this.o.modelName) {
      throw new HttpError(404, `The model \`${String(b.model)}\` does not exist.`, 'model');
    }
    for (const [k, neutral] of UNSUPPORTED) {
      const v = b[k];
      if (v !== undefined && v !== null && v !== neutral) throw bad(`'${k}' is not supported by murphy-native serve`, k);
    }
    const info = this.o.engine.info();
    // prompts: string | string[] | number[] | number[][]
    const p = b.prompt;
    let prompts: number[][];
    const tokens = (x: unknown[], where: string): number[] => {
      if (x.length === 0) throw bad(`${where} is empty`, 'prompt');
      for (const t of x) {
        if (!isInt(t) || t < 0 || t >= info.vocabSize) throw bad(`${where}: token id ${JSON.stringify(t)} is outside the vocabulary [0, ${info.vocabSize})`, 'prompt');
      }
      return x as number[];
    };
    const text = (s: string): number[] => {
      if (this.o.tokenizer === undefined) throw bad('this server has no tokenizer: send prompts as token ids', 'prompt');
      const ids = this.o.tokenizer.encode(s);
      if (ids.length === 0) throw bad('the prompt is empty', 'prompt');
      return ids;
    };
    if (typeof p === 'string') prompts = [text(p)];
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'number')) prompts = [tokens(p, 'prompt')];
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'string')) prompts = (p as string[]).map(text);
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => Array.isArray(x))) prompts = (p as unknown[][]).map((x, i) => tokens(x, `prompt[${i}]`));
    else throw bad("'prompt' must be a string, a list of strings, a list of token ids or a list of lists of token ids", 'prompt');
    if (prompts.length > 1024) throw bad('at most 1024 prompts per request', 'prompt');

    const n = optInt(b, 'n', 1, 1, this.o.maxN ?? 1024) as number;
    const maxTokensGiven = optInt(b, 'max_tokens', undefined, 1, 1 << 24);
    const temperature = optNum(b, 'temperature', 1, (x) => x >= 0, 'a number >= 0');
    const topP = optNum(b, 'top_p', 1, (x) => x > 0 && x <= 1, 'in (0, 1]');
    const topKRaw = optInt(b, 'top_k', 0, -1, 1 << 30) as number;
    const seed = optInt(b, 'seed', undefined, 0, Number.MAX_SAFE_INTEGER);
    let stop: string[] = [];
    if (typeof b.stop === 'string') stop = [b.stop];
    else if (Array.isArray(b.stop) && b.stop.every((s) => typeof s === 'string')) stop = b.stop as string[];
    else if (b.stop !== undefined && b.stop !== null) throw bad("'stop' must be a string or a list of strings", 'stop');
    stop = stop.filter((s) => s !== '');
    if (stop.length > 0 && this.o.tokenizer === undefined) throw bad('this server has no tokenizer: stop strings are not available', 'stop');
    let stopIds: number[] = [];
    if (Array.isArray(b.stop_token_ids)) {
      for (const t of b.stop_token_ids) if (!isInt(t) || t < 0 || t >= info.vocabSize) throw bad(`'stop_token_ids': ${JSON.stringify(t)} is not a token id`, 'stop_token_ids');
      stopIds = b.stop_token_ids as number[];
    } else if (b.stop_token_ids !== undefined && b.stop_token_ids !== null) throw bad("'stop_token_ids' must be a list of token ids", 'stop_token_ids');
    const ignoreEos = optBool(b, 'ignore_eos', false);
    const lp = b.logprobs;
    if (lp !== undefined && lp !== null && (!isInt(lp) || lp < 0)) throw bad("'logprobs' must be a non-negative integer", 'logprobs');
    if (isInt(lp) && lp > 0) throw bad("'logprobs' > 0 (top alternatives) is not supported by murphy-native serve; use 0", 'logprobs');
    const returnTokenIds = optBool(b, 'return_token_ids', false);
    const maxLen = info.maxModelLen;
    for (const pr of prompts) {
      const want = pr.length + (maxTokensGiven ?? 1);
      if (want > maxLen) {
        throw bad(`This model's maximum context length is ${maxLen} tokens. However, you requested ${want} tokens (${pr.length} in the messages, ${maxTokensGiven ?? 1} in the completion). Please reduce the length of the messages or completion.`, maxTokensGiven === undefined ? 'prompt' : 'max_tokens');
      }
    }
    const allStop = [...new Set([...stopIds, ...(ignoreEos ? [] : this.eos)])].sort((x, y) => x - y);
    return {
      prompts, n, stop, logprobs: isInt(lp), returnTokenIds, maxTokensGiven,
      req: { n, maxTokens: maxTokensGiven ?? 0, temperature, topP, topK: topKRaw <= 0 ? 0 : topKRaw, seed, stopTokenIds: allStop },
    };
  }

  private async completions(b: Json): Promise<Json> {
    const q = this.parse(b);
    const maxLen = this.o.engine.info().maxModelLen;
    const results = await Promise.all(q.prompts.map(async (promptIds) => {
      // vLLM's default budget: whatever the context leaves
      const req: EngineRequest = { ...q.req, promptIds, maxTokens: q.maxTokensGiven ?? maxLen - promptIds.length };
      const out = await this.batcher.submit(req);
      return out.map((s) => finishSample(s, req, q.stop, this.o.tokenizer));
    }));
    const choices: Json[] = [];
    let completionTokens = 0, promptTokens = 0;
    results.forEach((samples: LocalSample[], pi) => {
      promptTokens += q.prompts[pi].length;
      samples.forEach((s, j) => {
        completionTokens += s.tokenIds.length;
        choices.push({
          index: pi * q.n + j,
          text: s.text,
          logprobs: q.logprobs ? this.logprobsField(s) : null,
          finish_reason: s.finishReason,
          stop_reason: s.stopReason,
          prompt_logprobs: null,
          prompt_token_ids: q.returnTokenIds ? q.prompts[pi] : null,
          token_ids: q.returnTokenIds ? s.tokenIds : null,
        });
      });
    });
    return {
      id: `cmpl-${randomBytes(16).toString('hex')}`,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: this.o.modelName,
      choices,
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens + completionTokens, completion_tokens: completionTokens, prompt_tokens_details: null },
    };
  }

  private logprobsField(s: LocalSample): Json {
    const tok = this.o.tokenizer;
    const tokens = s.tokenIds.map((t) => (tok === undefined ? `token_id:${t}` : tok.decode([t])));
    const offsets: number[] = [];
    let at = 0;
    for (const t of tokens) {
      offsets.push(at);
      at += t.length;
    }
    return {
      text_offset: offsets,
      token_logprobs: s.logprobs,
      tokens,
      top_logprobs: tokens.map((t, i) => ({ [t]: s.logprobs[i] })),
    };
  }

  private async rpc(b: Json): Promise<Json> {
    if (typeof b.method !== 'string') throw bad("Missing 'method' in request body", 'method');
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
    server.listen(o.port ?? 0, o.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      const a = server.address() as AddressInfo;
      const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
      resolve({
        url: `http://${host}:${a.port}`,
        server,
        batcher: h.batcher,
        close: () => new Promise<void>((res) => {
          server.close(() => res());
          server.closeAllConnections();
        }),
      });
    });
  });
}
