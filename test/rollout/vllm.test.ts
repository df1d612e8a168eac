// The vLLM client against recorded-shape responses and scripted local servers: request
// bodies, response parsing, retries, timeouts, dead servers, scheduling, start-up checks and
// the disk weight sync.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseCompletionResponse, RolloutError, VllmBackend, type PolicyWeights, type VllmEvent } from '../../lib/rollout/index.js';
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

  it('writes step-N, calls the worker extension then resets the prefix cache, on every server; holds generation meanwhile', async () => {
    let release!: () => void;
    let held = true;
    const gate = new Promise<void>((ok) => { release = ok; });
    const rpc = (c: { path: string }) => (c.path === '/collective_rpc'
      ? { body: { results: [{ loaded: true, path: 'x', tensors: 3 }] }, delayMs: 20 }
      : c.path === '/reset_prefix_cache' ? { status: 200 } : undefined);
    const complete = async (body: Record<string, unknown>) => {
      if (held) await gate;
      return { body: echoCompletion(body) };
    };
    const a = await serve(vllmLike({ other: rpc, complete }));
    const c = await serve(vllmLike({ other: rpc, complete }));
    const dir = join(work, 'sync');
    const b = new VllmBackend({ servers: [a.url, c.url], model: 'm', syncDir: dir });
    const writes: string[] = [];
    // an in-flight request: the sync must wait for it
    const inflight = b.generate([1, 2], 1, {});
    for (let i = 0; i < 1000 && a.calls.length + c.calls.length === 0; i++) await new Promise((ok) => setTimeout(ok, 2));
    const sync = b.syncWeights(policy(writes), 3);
    await new Promise((ok) => setTimeout(ok, 30));
    assert.equal(writes.length, 0, 'sync started while a request was in flight');
    held = false;
    release();
    await inflight;
    const rep = await sync;
    assert.equal(rep.path, join(dir, 'step-3'));
    assert.deepEqual(rep.servers, [a.url, c.url].sort());
    for (const s of [a, c]) {
      const paths = s.calls.map((x) => x.path).filter((p) => p !== '/v1/completions');
      assert.deepEqual(paths, ['/collective_rpc', '/reset_prefix_cache']);
      const body = s.calls.find((x) => x.path === '/collective_rpc')?.body;
      assert.deepEqual(body, { method: 'murphy_load_weights', args: [join(dir, 'step-3')], kwargs: {}, timeout: null });
    }
    // a request issued during the next sync waits for it
    const sync2 = b.syncWeights(policy(writes), 4);
    const during = b.generate([7], 1, {});
    await sync2;
    await during;
    const all = [...a.calls, ...c.calls];
    const lastRpc = Math.max(...[a, c].map((s) => s.calls.findLastIndex((x) => x.path === '/reset_prefix_cache')));
    assert.ok(lastRpc >= 0 && all.length > 0);
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
