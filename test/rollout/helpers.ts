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
  path: string;
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
      const call: Call = { method: req.method ?? '', path: (req.url ?? '').split('?')[0], body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
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

/** A vLLM look-alike: /v1/models, /health, and completions built by `complete` (default: echo of n fixture-like choices). */
export function vllmLike(opts: {
  model?: string;
  complete?: (body: Record<string, unknown>, i: number) => Reply | Promise<Reply>;
  other?: (c: Call) => Reply | undefined;
} = {}): (c: Call, i: number) => Reply | Promise<Reply> {
  const model = opts.model ?? 'Qwen/Qwen3-0.6B';
  return (c, i) => {
    const o = opts.other?.(c);
    if (o !== undefined) return o;
    if (c.path === '/v1/models') return { body: { object: 'list', data: [{ id: model, object: 'model', max_model_len: 4096 }] } };
    if (c.path === '/health' || c.path === '/reset_prefix_cache') return { status: 200 };
    if (c.path === '/v1/completions' && c.body !== null) {
      return opts.complete ? opts.complete(c.body, i) : { body: echoCompletion(c.body, model) };
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
