// Shared by the rollout tests: scriptable fake vLLM servers on 127.0.0.1 and the fixtures.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface Fixture {
  request: Record<string, unknown> | null;
  status: number;
  response: Record<string, unknown>;
}

export function fixture(name: string): Fixture {
  return JSON.parse(readFileSync(join(import.meta.dirname, '..', 'fixtures', 'vllm', `${name}.json`), 'utf8')) as Fixture;
}

export interface Call {
  method: string;
  /** Without the query string. */
  path: string;
  /** The query string, without '?' ('' when none). */
  query: string;
  body: Record<string, unknown> | null;
}

export interface Reply {
  status?: number;
  body?: unknown;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Never answer (the client must time out). */
  hang?: boolean;
  /** Drop the connection without a response. */
  destroy?: boolean;
}

export interface FakeServer {
  url: string;
  calls: Call[];
  close(): Promise<void>;
}

/** A local HTTP server answering each request with handler's Reply. */
export async function fakeServer(handler: (c: Call, i: number) => Reply | Promise<Reply>): Promise<FakeServer> {
  const calls: Call[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [path, query = ''] = (req.url ?? '').split('?');
      const call: Call = { method: req.method ?? '', path, query, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
      calls.push(call);
      void Promise.resolve(handler(call, calls.length - 1)).then(async (r) => {
        if (r.hang) return;
        if (r.delayMs) await new Promise((ok) => setTimeout(ok, r.delayMs));
        if (r.destroy) {
          req.socket.destroy();
          return;
        }
        const body = r.body === undefined ? '' : JSON.stringify(r.body);
        res.writeHead(r.status ?? 200, { 'content-type': 'application/json' });
        res.end(body);
      });
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () => new Promise<void>((ok) => {
      server.close(() => ok());
      server.closeAllConnections();
    }),
  };
}

/** vLLM 0.16+'s 400 for prompt + max_tokens > max_model_len. */
export function contextError(promptTokens: number, maxTokens: number, maxModelLen: number): Reply {
  return {
    status: 400,
    body: { error: {
      message: `You passed ${promptTokens} input tokens and requested ${maxTokens} output tokens. However, the model's context length is only ${maxModelLen} tokens, resulting in a maximum input length of ${maxModelLen - maxTokens} tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=${promptTokens})`,
      type: 'BadRequestError', param: 'input_tokens', code: 400,
    } },
  };
}

/**
 * A vLLM look-alike: /v1/models, /health, and completions built by `complete` (default: echo
 * of n fixture-like choices). Like vLLM, it answers a prompt + max_tokens over maxModelLen
 * (default 4096) with a 400.
 */
export function vllmLike(opts: {
  model?: string;
  maxModelLen?: number;
  complete?: (body: Record<string, unknown>, i: number) => Reply | Promise<Reply>;
  other?: (c: Call) => Reply | undefined;
} = {}): (c: Call, i: number) => Reply | Promise<Reply> {
  const model = opts.model ?? 'Qwen/Qwen3-0.6B';
  const maxLen = opts.maxModelLen ?? 4096;
  return (c, i) => {
    const o = opts.other?.(c);
    if (o !== undefined) return o;
    if (c.path === '/v1/models') return { body: { object: 'list', data: [{ id: model, object: 'model', max_model_len: maxLen }] } };
    if (c.path === '/health' || c.path === '/reset_prefix_cache') return { status: 200 };
    if (c.path === '/v1/completions' && c.body !== null) {
      if (opts.complete) return opts.complete(c.body, i);
      const plen = Array.isArray(c.body.prompt) ? c.body.prompt.length : 0;
      const mt = typeof c.body.max_tokens === 'number' ? c.body.max_tokens : 16;
      if (plen + mt > maxLen) return contextError(plen, mt, maxLen);
      return { body: echoCompletion(c.body, model) };
    }
    return { status: 404, body: { error: { message: 'not found', type: 'NotFoundError', param: null, code: 404 } } };
  };
}

/** n choices whose token ids are [prompt length, choice index, 7], echoing the prompt ids. */
export function echoCompletion(body: Record<string, unknown>, model = 'm'): Record<string, unknown> {
  const prompt = Array.isArray(body.prompt) ? (body.prompt as number[]) : [1, 2];
  const n = typeof body.n === 'number' ? body.n : 1;
  const m = typeof body.max_tokens === 'number' ? Math.min(3, body.max_tokens) : 3;
  return {
    id: 'cmpl-x', object: 'text_completion', created: 0, model,
    choices: Array.from({ length: n }, (_, j) => ({
      index: j, text: 'abc'.slice(0, m), logprobs: { text_offset: [0, 1, 2].slice(0, m), token_logprobs: [-0.5, -1, -0.25].slice(0, m), tokens: ['a', 'b', 'c'].slice(0, m), top_logprobs: [] },
      finish_reason: 'length', stop_reason: null, prompt_logprobs: null, prompt_token_ids: prompt, token_ids: [prompt.length, j, 7].slice(0, m),
    })),
    usage: { prompt_tokens: prompt.length, completion_tokens: 3 * n, total_tokens: prompt.length + 3 * n },
  };
}
