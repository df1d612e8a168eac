// The vLLM client against recorded-shape responses and scripted local servers: request
// bodies, response parsing, retries, timeouts, dead servers, scheduling, start-up checks and
// the disk weight sync.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { checkLoadResults, parseCompletionResponse, RolloutError, VllmBackend, type PolicyWeights, type VllmEvent } from '../../lib/rollout/index.js';
import { echoCompletion, fakeServer, fixture, vllmLike, type FakeServer } from './helpers.js';

const servers: FakeServer[] = [];
const work = mkdtempSync(join(tmpdir(), 'murphy-vllm-'));
after(async () => {
  await Promise.all(servers.map((s) => s.close()));
  rmSync(work, { recursive: true, force: true });
});

async function serve(h: Parameters<typeof fakeServer>[0]): Promise<FakeServer> {
  const s = await fakeServer(h);
  servers.push(s);
  return s;
}

/** A port nothing listens on. */
async function closedPort(): Promise<string> {
  const s = await fakeServer(() => ({}));
  await s.close();
  return s.url;
}

const quick = { backoffMs: 5, backoffMaxMs: 20 };

describe('vLLM responses (fixtures)', () => {
  it('the client sends every sampling field explicitly, as in the recorded request', async () => {
    const f = fixture('completion_n4');
    const b = new VllmBackend({ servers: ['http://127.0.0.1:1'], model: 'Qwen/Qwen3-0.6B' });
    const body = b.completionBody(f.request?.prompt as number[], 4, { seed: 1234, maxTokens: 8, temperature: 1, stopTokenIds: [151645, 151643] });
    assert.deepEqual(body, f.request);
  });

  it('n > 1: choices are sorted by index; stop and length finish reasons; log-probs per token', () => {
    const f = fixture('completion_n4');
    const c = parseCompletionResponse(f.response, 4);
    assert.deepEqual(c.map((x) => x.index), [0, 1, 2, 3]);
    assert.deepEqual(c[0].tokenIds, [73594, 12669, 198, 750, 2629, 2877, 11, 293]);
    assert.equal(c[0].finishReason, 'length');
    assert.equal(c[0].logprobs?.[7], -9999);
    assert.deepEqual(c[1].tokenIds, [2, 151645]);
    assert.deepEqual(c[1].logprobs, [-3.125, -0.5]);
    assert.equal(c[2].finishReason, 'stop');
    assert.equal(c[3].text, '');
    for (const x of c) assert.equal(x.logprobs?.length, x.tokenIds.length);
    assert.throws(() => parseCompletionResponse(f.response, 5), /expected choices 0..4/);
  });

  it('finish_reason length, missing log-probs, top-level prompt_token_ids', () => {
    assert.equal(parseCompletionResponse(fixture('completion_length').response, 1)[0].finishReason, 'length');
    const nl = parseCompletionResponse(fixture('completion_no_logprobs').response, 1)[0];
    assert.equal(nl.logprobs, undefined);
    assert.deepEqual(nl.tokenIds, [750, 151645]);
    const tp = parseCompletionResponse(fixture('completion_top_prompt_ids').response, 1)[0];
    assert.deepEqual(tp.promptTokenIds, fixture('completion_top_prompt_ids').request?.prompt);
  });

  it('a server without return_token_ids is a clear error', () => {
    assert.throws(() => parseCompletionResponse(fixture('completion_old_vllm').response, 1), /no token_ids.*vLLM >= 0.10.2/);
  });

  it('generate() over HTTP: completions, missing log-probs reported, re-tokenized prompts rejected', async () => {
    const names = ['completion_n4', 'completion_no_logprobs', 'completion_wrong_prompt', 'completion_top_prompt_ids'];
    let next = '';
    const s = await serve(vllmLike({ complete: () => ({ body: fixture(next).response }) }));
    const events: VllmEvent[] = [];
    const b = new VllmBackend({ servers: [s.url], model: 'Qwen/Qwen3-0.6B', onEvent: (e) => events.push(e), ...quick });
    const prompt = fixture('completion_n4').request?.prompt as number[];
    next = names[0];
    const c = await b.generate(prompt, 4, { seed: 1234 });
    assert.deepEqual(c.map((x) => x.finishReason), ['length', 'stop', 'stop', 'stop']);
    assert.deepEqual(c[2].tokenIds, [750, 912, 151645]);
    next = names[1];
    const [nl] = await b.generate(prompt, 1, {});
    assert.equal(nl.logprobs, undefined);
    assert.ok(events.some((e) => e.type === 'missing-logprobs'));
    next = names[2];
    await assert.rejects(b.generate(prompt, 1, {}), /prompt_token_ids differ from the prompt sent \(first difference at position 0\)/);
    next = names[3];
    assert.equal((await b.generate(prompt, 1, {})).length, 1);
  });

  it('4xx error bodies (both shapes) are errors with the server message, never retried', async () => {
    for (const name of ['error_400', 'error_400_legacy']) {
      const f = fixture(name);
      const s = await serve(vllmLike({ complete: () => ({ status: f.status, body: f.response }) }));
      const b = new VllmBackend({ servers: [s.url], model: 'm', ...quick });
      await assert.rejects(b.generate([1, 2], 1, { maxTokens: 100000 }), (e: unknown) => {
        assert.ok(e instanceof RolloutError);
        assert.equal(e.status, 400);
        assert.match(e.message, /maximum context length is 40960 tokens/);
        return true;
      });
      assert.equal(s.calls.length, 1);
    }
  });
});

describe('failures', () => {
  it('5xx and dropped connections are retried with backoff', async () => {
    const s = await serve(vllmLike({ complete: (body, i) => (i === 0 ? { status: 503, body: { error: { message: 'busy' } } } : i === 1 ? { destroy: true } : { body: echoCompletion(body) }) }));
    const events: VllmEvent[] = [];
    const b = new VllmBackend({ servers: [s.url], model: 'm', onEvent: (e) => events.push(e), ...quick });
    const c = await b.generate([5, 6, 7], 2, {});
    assert.deepEqual(c.map((x) => x.tokenIds), [[3, 0, 7], [3, 1, 7]]);
    const retries = events.filter((e) => e.type === 'retry');
    assert.equal(retries.length, 2);
    assert.match(retries[0].type === 'retry' ? retries[0].error : '', /HTTP 503: busy/);
  });

  it('a refused server is reported dead and requests continue on the others', async () => {
    const dead = await closedPort();
    const good = await serve(vllmLike());
    const events: VllmEvent[] = [];
    const b = new VllmBackend({ servers: [dead, good.url], model: 'm', deadAfter: 2, reviveMs: 60_000, onEvent: (e) => events.push(e), ...quick });
    const out = await Promise.all(Array.from({ length: 12 }, (_, i) => b.generate([i + 1, 2, 3], 1, {})));
    assert.equal(out.length, 12);
    const st = b.status().find((x) => x.server === dead);
    assert.equal(st?.dead, true);
    assert.match(st?.reason ?? '', /ECONNREFUSED/);
    assert.ok(events.some((e) => e.type === 'server-dead' && e.server === dead));
    assert.deepEqual(b.liveServers(), [good.url]);
  });

  it('stuck requests time out; with no server left the error names each one', async () => {
    const stuck = await serve(vllmLike({ complete: () => ({ hang: true }) }));
    const good = await serve(vllmLike());
    const b = new VllmBackend({ servers: [stuck.url, good.url], model: 'm', timeoutMs: 150, deadAfter: 1, ...quick });
    const c = await Promise.all([b.generate([1], 1, {}), b.generate([2], 1, {})]);
    assert.equal(c.length, 2);
    const only = new VllmBackend({ servers: [stuck.url], model: 'm', timeoutMs: 100, maxRetries: 1, deadAfter: 5, ...quick });
    await assert.rejects(only.generate([1], 1, {}), /timed out \(gave up after 2 attempts\)/);
    const gone = new VllmBackend({ servers: [await closedPort(), await closedPort()], model: 'm', deadAfter: 1, maxRetries: 3, ...quick });
    await assert.rejects(gone.generate([1], 1, {}), /every vLLM server is down:\n {2}http:\/\/127.0.0.1:\d+: .*ECONNREFUSED\n {2}http/);
  });

  it('a dead server that comes back is used again', async () => {
    let down = true;
    const flaky = await serve(vllmLike({ other: (c) => (down ? { destroy: true } : c.path === '/health' ? { status: 200 } : undefined) }));
    const b = new VllmBackend({ servers: [flaky.url], model: 'm', deadAfter: 1, maxRetries: 0, reviveMs: 0, ...quick });
    await assert.rejects(b.generate([1], 1, {}));
    assert.equal(b.status()[0].dead, true);
    down = false;
    assert.equal((await b.generate([1], 1, {})).length, 1);
    assert.equal(b.status()[0].dead, false);
  });
});

describe('scheduling', () => {
  it('spreads requests by fewest outstanding', async () => {
    const a = await serve(vllmLike({ complete: (body) => ({ body: echoCompletion(body), delayMs: 30 }) }));
    const c = await serve(vllmLike({ complete: (body) => ({ body: echoCompletion(body), delayMs: 30 }) }));
    const b = new VllmBackend({ servers: [a.url, c.url], model: 'm' });
    await Promise.all(Array.from({ length: 8 }, (_, i) => b.generate([100 + i], 1, {})));
    assert.equal(a.calls.length, 4);
    assert.equal(c.calls.length, 4);
  });

  it('keeps every turn of a tree on one server (prompt-prefix affinity, or an explicit key)', async () => {
    const a = await serve(vllmLike({ complete: (body) => ({ body: echoCompletion(body), delayMs: 5 }) }));
    const c = await serve(vllmLike({ complete: (body) => ({ body: echoCompletion(body), delayMs: 5 }) }));
    const b = new VllmBackend({ servers: [a.url, c.url], model: 'm' });
    const trees = Array.from({ length: 6 }, (_, t) => [9, 9, 9, t, 1, 2, 3]);
    await Promise.all(trees.map((p) => b.generate(p, 2, {})));
    const where = (p: number[]) => (a.calls.some((x) => JSON.stringify(x.body?.prompt) === JSON.stringify(p)) ? 'a' : 'c');
    const first = trees.map(where);
    assert.ok(first.includes('a') && first.includes('c'));
    // turn 2 and 3: the conversation so far plus feedback; load the other server meanwhile
    for (const turn of [1, 2]) {
      await Promise.all(trees.map((p, t) => b.generate([...p, ...Array.from({ length: turn * 3 }, (_, k) => 50 + k + t)], 2, {})));
    }
    for (const call of [...a.calls, ...c.calls]) {
      const p = call.body?.prompt as number[];
      const tree = p[3];
      assert.equal(a.calls.includes(call) ? 'a' : 'c', first[tree], `turn of tree ${tree} moved`);
    }
    await b.generate([1], 1, { affinity: 'tree-x' });
    const home = a.calls.some((x) => JSON.stringify(x.body?.prompt) === '[1]') ? a : c;
    const before = home.calls.length;
    await Promise.all([2, 3, 4, 5].map((t) => b.generate([t], 1, { affinity: 'tree-x' })));
    assert.equal(home.calls.length, before + 4);
  });
});

describe('start-up checks', () => {
  const tok = { encode: (t: string) => Array.from(t, (ch) => ch.codePointAt(0) ?? 0), decode: () => '' };

  it('finds the model name, and refuses a different model or tokenizer', async () => {
    const ok = await serve(vllmLike({
      complete: (body) => (typeof body.prompt === 'string' ? { body: echoCompletion({ ...body, prompt: tok.encode(body.prompt) }) } : { body: echoCompletion(body) }),
    }));
    const b = await VllmBackend.connect({ servers: [ok.url], tokenizer: tok });
    assert.equal(b.model, 'Qwen/Qwen3-0.6B');
    const probe = ok.calls.find((c) => c.path === '/v1/completions');
    assert.equal(probe?.body?.max_tokens, 1);
    assert.equal(probe?.body?.return_token_ids, true);
    await assert.rejects(VllmBackend.connect({ servers: [ok.url], model: 'other' }), /serves 'Qwen\/Qwen3-0.6B', not 'other'/);
    const otherTok = await serve(vllmLike({
      complete: (body) => ({ body: echoCompletion({ ...body, prompt: typeof body.prompt === 'string' ? [1, 2, 3] : body.prompt }) }),
    }));
    await assert.rejects(VllmBackend.connect({ servers: [otherTok.url], tokenizer: tok }), /tokenizer differs from the trainer's/);
    const noIds = await serve(vllmLike({ complete: () => ({ body: fixture('completion_old_vllm').response }) }));
    await assert.rejects(VllmBackend.connect({ servers: [noIds.url] }), /start-up probe: the server returned no token_ids/);
    const other = await serve(vllmLike({ model: 'other/model' }));
    await assert.rejects(VllmBackend.connect({ servers: [ok.url, other.url] }), /serve different models/);
    // one bad server of two: connect succeeds, the bad one is dead with its reason
    const mixed = await VllmBackend.connect({ servers: [ok.url, await closedPort()] });
    assert.equal(mixed.liveServers().length, 1);
    assert.match(mixed.status()[1].reason, /ECONNREFUSED/);
  });
});

describe('weight sync from disk', () => {
  const policy = (writes: string[]): PolicyWeights => ({
    params: () => [],
    getParam: () => new Float32Array(0),
    save: async (dir: string) => {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'config.json'), '{}');
      writes.push(dir);
    },
  });

  it('writes step-N, then per server: pause (where it exists), load, reset the prefix cache, resume; holds generation meanwhile', async () => {
    // barriers, no sleeps: the in-flight request is answered only once the sync says it is waiting for it
    let release!: () => void;
    const gate = new Promise<void>((ok) => { release = ok; });
    let arrived!: () => void;
    const reached = new Promise<void>((ok) => { arrived = ok; });
    let held = true;
    const rpc = (pausable: boolean) => (c: { path: string }) => (c.path === '/collective_rpc'
      ? { body: { results: [{ loaded: true, path: 'x', tensors: 3, rank: 0, world_size: 1 }] } }
      : pausable && (c.path === '/pause' || c.path === '/resume') ? { status: 200, body: {} } : undefined);
    const complete = async (body: Record<string, unknown>) => {
      if (held) {
        arrived();
        await gate;
      }
      return { body: echoCompletion(body) };
    };
    const a = await serve(vllmLike({ other: rpc(true), complete }));
    const c = await serve(vllmLike({ other: rpc(false), complete }));
    const dir = join(work, 'sync');
    const writes: string[] = [];
    const pol = policy(writes);
    const save = pol.save;
    pol.save = async (d) => {
      assert.ok(!held && b.status().every((x) => x.outstanding === 0), 'the sync wrote weights while a request was in flight');
      await save(d);
    };
    const b = new VllmBackend({
      servers: [a.url, c.url], model: 'm', syncDir: dir,
      onEvent: (e) => {
        if (e.type === 'sync-waiting') {
          assert.equal(e.inFlight, 1);
          held = false;
          release();
        }
      },
    });
    const inflight = b.generate([1, 2], 1, {});
    await reached;
    const rep = await b.syncWeights(pol, 3);
    await inflight;
    assert.equal(rep.path, join(dir, 'step-3'));
    assert.deepEqual(rep.servers, [a.url, c.url].sort());
    const sequence = (s: FakeServer) => s.calls.filter((x) => x.path !== '/v1/completions').map((x) => (x.query ? `${x.path}?${x.query}` : x.path));
    assert.deepEqual(sequence(a), ['/pause?mode=wait', '/collective_rpc', '/reset_prefix_cache?reset_running_requests=true', '/resume']);
    // no /pause on this server (404): loaded without, and not resumed
    assert.deepEqual(sequence(c), ['/pause?mode=wait', '/collective_rpc', '/reset_prefix_cache?reset_running_requests=true']);
    for (const s of [a, c]) {
      const body = s.calls.find((x) => x.path === '/collective_rpc')?.body;
      assert.deepEqual(body, { method: 'murphy_load_weights', args: [join(dir, 'step-3')], kwargs: {}, timeout: null });
    }
    // a request issued during the next sync waits for it: it reaches its server after the reset
    const sync2 = b.syncWeights(policy(writes), 4);
    const during = b.generate([7], 1, {});
    await sync2;
    await during;
    const home = [a, c].find((s) => s.calls.some((x) => JSON.stringify(x.body?.prompt) === '[7]'))!;
    const at = home.calls.findIndex((x) => JSON.stringify(x.body?.prompt) === '[7]');
    assert.ok(at > home.calls.findLastIndex((x) => x.path === '/reset_prefix_cache'), 'generation ran during the load');
    assert.deepEqual(readdirSync(dir), ['step-4'], 'older checkpoints are removed');
  });

  it('a server that fails to load is retired (stale weights), the others continue; all failing is an error', async () => {
    const good = await serve(vllmLike({ other: (c) => (c.path === '/collective_rpc' ? { body: { results: [{ loaded: true }] } } : undefined) }));
    const bad = await serve(vllmLike({ other: (c) => (c.path === '/collective_rpc' ? { status: 500, body: { error: { message: 'No such file' } } } : undefined) }));
    const b = new VllmBackend({ servers: [good.url, bad.url], model: 'm', syncDir: join(work, 'sync2'), ...quick });
    const rep = await b.syncWeights(policy([]), 1);
    assert.deepEqual(rep.servers, [good.url]);
    assert.match(rep.failed[0].error, /HTTP 500: No such file/);
    assert.deepEqual(b.liveServers(), [good.url]);
    assert.equal(bad.calls.some((c) => c.path === '/reset_prefix_cache'), false);
    const only = new VllmBackend({ servers: [bad.url], model: 'm', syncDir: join(work, 'sync3') });
    await assert.rejects(only.syncWeights(policy([]), 2), /failed on every server/);
    assert.ok(existsSync(join(work, 'sync3', 'step-2')));
    const noDir = new VllmBackend({ servers: [good.url], model: 'm' });
    await assert.rejects(noDir.syncWeights(policy([]), 1), /needs a checkpoint directory/);
  });
});

describe('protocol corrections (vLLM 0.10.2-0.19)', () => {
  it('reads the exact 0.16/0.19 response shape, stop_reason included, and its 400 message', async () => {
    const f = fixture('completion_v016');
    const c = parseCompletionResponse(f.response, 3);
    assert.deepEqual(c.map((x) => [x.finishReason, x.stopReason]), [['stop', null], ['stop', '\n\n\n'], ['length', null]]);
    assert.deepEqual(c[1].tokenIds, [750, 282]);
    assert.deepEqual(c[0].promptTokenIds, f.request?.prompt);
    const n4 = parseCompletionResponse(fixture('completion_n4').response, 4);
    assert.deepEqual(n4.map((x) => x.stopReason), [null, null, null, 151643]);
    // through generate(): stop_reason kept on the Completion
    const s = await serve(vllmLike({ complete: () => ({ body: f.response }) }));
    const b = new VllmBackend({ servers: [s.url], model: 'Qwen/Qwen3-0.6B' });
    const out = await b.generate(f.request?.prompt as number[], 3, {});
    assert.deepEqual(out.map((x) => x.stopReason), [null, '\n\n\n', null]);
    const e = fixture('error_400_v016');
    const bad = await serve(vllmLike({ complete: () => ({ status: e.status, body: e.response }) }));
    const b2 = new VllmBackend({ servers: [bad.url], model: 'm', ...quick });
    await assert.rejects(b2.generate([1, 2], 1, {}), /HTTP 400: You passed 12 input tokens and requested 40960 output tokens\. However, the model's context length is only 40960 tokens/);
  });

  it('top_k is 0 when off', () => {
    const b = new VllmBackend({ servers: ['http://127.0.0.1:1'], model: 'm' });
    assert.equal(b.completionBody([1], 1, {}).top_k, 0);
    assert.equal(b.completionBody([1], 1, { topK: -1 }).top_k, 0);
    assert.equal(b.completionBody([1], 1, { topK: 20 }).top_k, 20);
  });

  it('min_p is 0 when off and the given minP otherwise; out of range is refused', () => {
    const b = new VllmBackend({ servers: ['http://127.0.0.1:1'], model: 'm' });
    assert.equal(b.completionBody([1], 1, {}).min_p, 0);
    assert.equal(b.completionBody([1], 1, { minP: 0.05 }).min_p, 0.05);
    assert.throws(() => b.completionBody([1], 1, { minP: 1.5 }), /minP must be in \[0, 1\], got 1.5/);
  });

  it('clamps max_tokens to max_model_len - prompt length; no room: length completions with no tokens, no request', async () => {
    const s = await serve(vllmLike({ maxModelLen: 16 }));
    const b = await VllmBackend.connect({ servers: [s.url] });
    assert.equal(b.maxModelLen, 16);
    const sent = () => s.calls.filter((x) => x.path === '/v1/completions').slice(1); // after the start-up probe
    const c = await b.generate(Array.from({ length: 13 }, (_, i) => i + 1), 2, { maxTokens: 8 });
    assert.equal(sent().at(-1)?.body?.max_tokens, 3);
    assert.equal(c.length, 2);
    await b.generate([1, 2], 1, { maxTokens: 8 });
    assert.equal(sent().at(-1)?.body?.max_tokens, 8, 'room enough: unchanged');
    const before = sent().length;
    for (const len of [16, 40]) {
      const full = await b.generate(Array.from({ length: len }, () => 5), 3, { maxTokens: 8 });
      assert.deepEqual(full, Array.from({ length: 3 }, () => ({ tokenIds: [], logprobs: [], text: '', finishReason: 'length', stopReason: null, noRoom: true })));
    }
    assert.equal(sent().length, before, 'no request for a prompt that fills the context');
    assert.equal(b.counters.noRoom, 6);
    // an explicit maxModelLen wins over the servers'
    const small = new VllmBackend({ servers: [s.url], model: 'Qwen/Qwen3-0.6B', maxModelLen: 4 });
    assert.equal(small.completionBody([1, 2, 3], 1, { maxTokens: 8 }).max_tokens, 1);
    assert.throws(() => new VllmBackend({ servers: [s.url], maxModelLen: 0 }), /maxModelLen must be an integer >= 1, got 0/);
  });

  it('finish_reason "abort" is retried (bounded) and counted, never returned', async () => {
    const abort = fixture('completion_abort').response;
    const s = await serve(vllmLike({ complete: (body, i) => ({ body: i < 2 ? abort : echoCompletion(body) }) }));
    const events: VllmEvent[] = [];
    const b = new VllmBackend({ servers: [s.url], model: 'm', onEvent: (e) => events.push(e) });
    const prompt = fixture('completion_abort').request?.prompt as number[];
    const c = await b.generate(prompt, 1, {});
    assert.deepEqual(c[0].tokenIds, [prompt.length, 0, 7]);
    assert.equal(c[0].finishReason, 'length');
    assert.equal(b.counters.aborted, 2);
    assert.deepEqual(events.filter((e) => e.type === 'abort').map((e) => (e.type === 'abort' ? e.attempt : 0)), [1, 2]);
    const always = await serve(vllmLike({ complete: () => ({ body: abort }) }));
    const b2 = new VllmBackend({ servers: [always.url], model: 'm', maxAbortRetries: 2 });
    await assert.rejects(b2.generate(prompt, 1, {}), /aborted by the server \(finish_reason "abort"\) 3 times in a row/);
    assert.equal(always.calls.length, 3);
    assert.equal(b2.counters.aborted, 2);
  });

  it('sends Authorization: Bearer KEY (option, else MURPHY_API_KEY), and none without a key', async () => {
    const seen: (string | undefined)[] = [];
    const fetch = async (_url: string, init: { headers: Record<string, string> }) => {
      seen.push(init.headers.authorization);
      return { status: 200, text: async () => JSON.stringify(echoCompletion({ prompt: [1], n: 1 })) };
    };
    const saved = process.env.MURPHY_API_KEY;
    try {
      delete process.env.MURPHY_API_KEY;
      await new VllmBackend({ servers: ['http://127.0.0.1:1'], model: 'm', fetch, apiKey: 'sk-opt' }).generate([1], 1, {});
      await new VllmBackend({ servers: ['http://127.0.0.1:1'], model: 'm', fetch }).generate([1], 1, {});
      process.env.MURPHY_API_KEY = 'sk-env';
      await new VllmBackend({ servers: ['http://127.0.0.1:1'], model: 'm', fetch }).generate([1], 1, {});
      await new VllmBackend({ servers: ['http://127.0.0.1:1'], model: 'm', fetch, apiKey: 'sk-opt' }).generate([1], 1, {});
    } finally {
      if (saved === undefined) delete process.env.MURPHY_API_KEY;
      else process.env.MURPHY_API_KEY = saved;
    }
    assert.deepEqual(seen, ['Bearer sk-opt', undefined, 'Bearer sk-env', 'Bearer sk-opt']);
  });

  it('every worker must answer the load: tensor x pipeline parallel size checked', () => {
    const w = (rank: number, ws?: number) => ({ loaded: true, rank, dp_rank: 0, world_size: ws });
    assert.deepEqual(checkLoadResults({ results: [w(0, 2), w(1, 2)] }), { workers: 2, worldSize: 2 });
    assert.deepEqual(checkLoadResults({ results: [{ loaded: true }] }), { workers: 1, worldSize: undefined });
    assert.throws(() => checkLoadResults({ results: [w(0, 2)] }), /1 worker answer\(s\) \(1 distinct rank\(s\)\) for tensor x pipeline parallel size 2/);
    assert.throws(() => checkLoadResults({ results: [w(0, 2), w(0, 2)] }), /2 worker answer\(s\) \(1 distinct rank\(s\)\)/);
    assert.throws(() => checkLoadResults({ results: [] }), /no worker answered/);
    assert.throws(() => checkLoadResults(null), /no worker answered/);
    assert.throws(() => checkLoadResults({ results: [{ loaded: false }] }), /did not confirm the load/);
  });

  it('a failed load still resumes a paused server, and retires it', async () => {
    const s = await serve(vllmLike({
      other: (c) => (c.path === '/collective_rpc' ? { body: { results: [{ loaded: true, rank: 0, world_size: 2 }] } }
        : c.path === '/pause' || c.path === '/resume' ? { status: 200 } : undefined),
    }));
    const good = await serve(vllmLike({ other: (c) => (c.path === '/collective_rpc' ? { body: { results: [{ loaded: true }] } } : undefined) }));
    const b = new VllmBackend({ servers: [s.url, good.url], model: 'm', syncDir: join(work, 'sync4') });
    const rep = await b.syncWeights({ params: () => [], getParam: () => new Float32Array(0), save: async (d) => { mkdirSync(d, { recursive: true }); } }, 1);
    assert.match(rep.failed[0].error, /not every worker loaded the weights/);
    assert.deepEqual(s.calls.map((x) => x.path), ['/pause', '/collective_rpc', '/resume']);
    assert.deepEqual(b.liveServers(), [good.url]);
  });
});
