// `murphy-native serve` under load and at shutdown: closed connections stop their work
// (waiting or running, streamed or not), admitted work is bounded (503 + Retry-After), the
// native generate stops at its next decode step when asked, a non-loopback host needs an
// API key for weight sync, and SIGTERM ends the process in the middle of a generation.
// No sleeps: every wait is on an event (a gate, a first chunk, a spy's call).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BUILTIN_VOCAB, initModel, PolicyModel } from '../../lib/model/index.js';
import { loadChatTokenizer, type HfChatTokenizer } from '../../lib/prompt/index.js';
import { AbortedError, EngineBatcher, QueueFullError } from '../../lib/rollout/batcher.js';
import { isLoopback } from '../../lib/rollout/server.js';
import { NativeEngine, startServer, type EngineRequest, type EngineSample, type RolloutEngine } from '../../lib/rollout/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { deferred, SpyEngine } from './serve-helpers.js';
import { cli, REPO, TS_LOADER } from '../helpers/cli.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

const seed = testSeed('rollout/serve-limits');
const rng = new Rng(seed);
const work = mkdtempSync(join(tmpdir(), 'murphy-serve-limits-'));
let dir = '';
let tok: HfChatTokenizer;
let native: NativeEngine;

before(async () => {
  dir = await writeTinyModel(join(work, 'model'), seed, 0.3);
  tok = loadChatTokenizer(dir);
  native = await NativeEngine.load(dir);
});
after(() => rmSync(work, { recursive: true, force: true }));

const req = (o: Partial<EngineRequest> = {}): EngineRequest => ({
  promptIds: [1, 2, 3], n: 1, maxTokens: 4, temperature: 1, topP: 1, topK: 0, seed: rng.int(1e9), stopTokenIds: [], ...o,
});

/** An engine whose calls wait for release() and answer with empty samples. */
class GatedEngine implements RolloutEngine {
  readonly seen: EngineRequest[][] = [];
  private gates: (() => void)[] = [];
  private waiters: (() => void)[] = [];
  /** Resolves at the next generate call. */
  nextCall(): Promise<void> { return new Promise((ok) => this.waiters.push(ok)); }
  info() { return { vocabSize: 10, maxModelLen: 100 }; }
  canBatch(a: EngineRequest, b: EngineRequest) { return a.n === b.n; }
  async loadWeights() {}
  async generate(batch: EngineRequest[]): Promise<EngineSample[][]> {
    this.seen.push(batch);
    for (const w of this.waiters.splice(0)) w();
    await new Promise<void>((ok) => this.gates.push(ok));
    return batch.map((r) => Array.from({ length: r.n }, () => ({ tokenIds: [1], logprobs: [0], finishReason: r.signal?.aborted ? 'abort' as const : 'length' as const })));
  }
  release() { for (const g of this.gates.splice(0)) g(); }
}

describe('serve limits', () => {
  it('the native generate stops a sample at its next decode step once its cancel flag is set', async () => {
    const cancel = new Int32Array(new SharedArrayBuffer(4 * 3));
    const seen: number[] = [];
    const g = await native.model.generate([[1, 2, 3]], {
      maxNewTokens: 1500, n: 3, temperature: 1, seed: rng.int(1e9), cancel,
      onStep: (st) => {
        seen.push(st.samples.length);
        if (seen.length === 2) Atomics.store(cancel, 1, 1);
      },
    });
    assert.equal(g[1].finishReason, 'abort');
    assert.ok(g[1].tokens.length < 1500, `${g[1].tokens.length} tokens`);
    assert.deepEqual([g[0].finishReason, g[2].finishReason], ['length', 'length']);
    assert.equal(g[0].tokens.length, 1500);
    // every token was reported by a step, in order
    assert.equal(seen.reduce((a, b) => a + b, 0), g.reduce((a, x) => a + x.tokens.length, 0));
    await assert.rejects(native.model.generate([[1]], { maxNewTokens: 2, cancel: new Int32Array(1) }), /SharedArrayBuffer/);
    await assert.rejects(native.model.generate([[1]], { maxNewTokens: 2, cancel: new Int32Array(new SharedArrayBuffer(8)) }), /'cancel' has 2 flags but there are 1 samples/);
  });

  it('releaseHeap gives the memory of a large batch back to the system; the serving engine asks for it, training does not', async () => {
    // 512 samples x 60 tokens: without the trim glibc kept ~35 MB of the freed caches in the
    // arena of the worker thread that ran the call (measured, RSS 80 -> 114 MB, up to 4 such
    // arenas); with it RSS moved by 0-2 MB. Off by default: a training loop generates every
    // step, and pages given back are faulted in again (the demo spent 23 of its 71 CPU-s in
    // page faults when every call trimmed, on a VM at ~11 us a fault)
    const { dir: d2 } = await initModel({ out: join(work, 'model-2l'), preset: 'tiny', sizes: { vocabSize: BUILTIN_VOCAB, numLayers: 2 }, dtype: 'float32', seed, initStd: 0.3 });
    const m = await PolicyModel.load(d2);
    await m.generate([[1, 2, 3]], { maxNewTokens: 4, n: 2, temperature: 1, seed: 1, releaseHeap: true });
    const before = process.memoryUsage.rss();
    const g = await m.generate([[1, 2, 3]], { maxNewTokens: 60, n: 512, temperature: 1, seed: rng.int(1e9), releaseHeap: true });
    assert.equal(g.length, 512);
    const grown = (process.memoryUsage.rss() - before) / 2 ** 20;
    assert.ok(grown < 15, `RSS grew by ${grown.toFixed(1)} MB after the batch`);
    // NativeEngine passes its setting on: serve's engine (releaseHeap: true), the default (false)
    for (const releaseHeap of [true, undefined]) {
      const e = new NativeEngine(m, { releaseHeap });
      const seen: (boolean | undefined)[] = [];
      const generate = m.generate.bind(m);
      m.generate = (p, o) => { seen.push(o.releaseHeap); return generate(p, o); };
      await e.generate([req()]);
      m.generate = generate;
      assert.deepEqual(seen, [releaseHeap ?? false]);
    }
  });

  it('top-k alternatives are the processed distribution\'s most likely tokens, -inf outside the kept set', async () => {
    const k = 6;
    const g = await native.model.generate([[4, 5, 6]], { maxNewTokens: 8, n: 2, temperature: 0.7, topK: 3, seed: rng.int(1e9), topLogprobs: k });
    for (const s of g) {
      assert.equal(s.topIds?.length, s.tokens.length * k);
      for (let i = 0; i < s.tokens.length; i++) {
        const ids: number[] = Array.from(s.topIds!.subarray(i * k, (i + 1) * k)), lps = Array.from(s.topLogprobs!.subarray(i * k, (i + 1) * k));
        assert.ok(ids.slice(0, 3).includes(s.tokens[i]), 'the sampled token is among the top-k kept');
        assert.equal(lps[ids.indexOf(s.tokens[i])], s.logprobs[i]);
        const kept = lps.slice(0, 3).reduce((a, x) => a + Math.exp(x), 0);
        assert.ok(Math.abs(kept - 1) < 1e-5, `kept mass ${kept}`);
        assert.deepEqual(lps.slice(3), [-Infinity, -Infinity, -Infinity]);
      }
    }
    // greedy: log-softmax of the logits, most likely first, the first is the sampled token
    const gr = await native.model.generate([[7, 8]], { maxNewTokens: 4, temperature: 0, topLogprobs: 3 });
    for (let i = 0; i < gr[0].tokens.length; i++) {
      assert.equal(gr[0].topIds![i * 3], gr[0].tokens[i]);
      assert.equal(gr[0].topLogprobs![i * 3], gr[0].logprobs[i]);
      assert.ok(gr[0].topLogprobs![i * 3 + 1] <= gr[0].topLogprobs![i * 3] && gr[0].topLogprobs![i * 3 + 2] > -Infinity);
    }
  });

  it('the batcher drops a waiting request whose signal fires, and refuses work beyond its bound', async () => {
    const eng = new GatedEngine();
    const b = new EngineBatcher(eng, { maxQueuedTokens: 100 });
    let called = eng.nextCall();
    const first = b.submit(req({ n: 2, maxTokens: 40 })); // 3 + 80 tokens, running
    await called;
    const ctl = new AbortController();
    const waiting = b.submit(req({ n: 1, maxTokens: 10, signal: ctl.signal })); // + 13 = 96
    assert.equal(b.pending, 1);
    assert.throws(() => b.submitAll([req({ n: 1, maxTokens: 11 })]), (e: unknown) => e instanceof QueueFullError && e.status === 503);
    await assert.rejects(b.submit(req({ n: 1, maxTokens: 11 })), QueueFullError);
    ctl.abort();
    await assert.rejects(waiting, AbortedError);
    assert.equal(b.pending, 0);
    assert.equal(b.queuedTokens, 83);
    const third = b.submit(req({ n: 2, maxTokens: 5 })); // fits again: 83 + 13
    called = eng.nextCall();
    eng.release();
    await first;
    await called;
    eng.release();
    await third;
    assert.equal(eng.seen.length, 2, 'the aborted request never reached the engine');
    assert.deepEqual(eng.seen.map((x) => x.map((r) => r.maxTokens)), [[40], [5]]);
    assert.equal(b.queuedTokens, 0);
    assert.equal(b.stats.aborted, 1);
    assert.equal(b.stats.refused, 2);
    // abortAll: the waiting (and a queued weight load) fail, the running see their signal, later submits are refused
    called = eng.nextCall();
    const run = b.submit(req({ n: 2 }));
    const wait = b.submit(req({ n: 3 }));
    await called;
    let loaded = false;
    const load = b.exclusive(() => { loaded = true; }); // a weight load queued behind the batch
    const stopped = b.abortAll();
    await assert.rejects(wait, AbortedError);
    await assert.rejects(load, AbortedError);
    assert.equal(loaded, false, 'nothing runs beside the running batch');
    assert.equal(eng.seen[2][0].signal?.aborted, true);
    eng.release();
    assert.equal((await run)[0].finishReason, 'abort');
    await stopped;
    assert.throws(() => b.submitAll([req()]), AbortedError);
  });

  it('a non-streamed request with a stop string stops generating at the token that completes it', async () => {
    // an engine that plays a script token by token through onToken, as the native one streams
    const script = tok.encode('one two STOP three four five six');
    const produced: number[] = [];
    const scripted: RolloutEngine = {
      info: () => native.info(),
      canBatch: () => false,
      loadWeights: async () => undefined,
      generate: async (batch) => batch.map((r) => Array.from({ length: r.n }, (_, j) => {
        const ids: number[] = [];
        let stopped = false;
        for (const id of script.slice(0, r.maxTokens)) {
          ids.push(id);
          if (r.onToken?.(j, { id, logprob: -1 }) === true) { stopped = true; break; }
        }
        produced.push(ids.length);
        return { tokenIds: ids, logprobs: ids.map(() => -1), finishReason: stopped ? 'abort' as const : 'length' as const };
      })),
    };
    const srv = await startServer({ engine: scripted, tokenizer: tok, modelName: 'tiny' });
    try {
      const r = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2], max_tokens: script.length, stop: 'STOP', return_token_ids: true, ignore_eos: true }) });
      const c = ((await r.json()) as { choices: { text: string; finish_reason: string; stop_reason: string; token_ids: number[] }[] }).choices[0];
      assert.equal(c.text, 'one two ');
      assert.equal(c.finish_reason, 'stop');
      assert.equal(c.stop_reason, 'STOP');
      assert.deepEqual(produced, [c.token_ids.length]);
      assert.ok(c.token_ids.length < script.length);
    } finally {
      await srv.close();
    }
  });

  it('a full server answers 503 with Retry-After; a closed connection frees its place', async () => {
    const spy = new SpyEngine(native);
    const gate = deferred();
    spy.gate = gate.promise;
    const srv = await startServer({ engine: spy, tokenizer: tok, modelName: 'tiny', maxQueuedTokens: 1000, retryAfterSeconds: 7 });
    try {
      const body = (n: number, max: number) => JSON.stringify({ prompt: [1, 2, 3], n, max_tokens: max, ignore_eos: true });
      const called = spy.nextCall();
      const ctl = new AbortController();
      const held = fetch(`${srv.url}/v1/completions`, { method: 'POST', body: body(4, 200), signal: ctl.signal }); // 3 + 800 tokens
      const call = await called;
      const r = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: body(2, 150) }); // + 303 > 1000
      assert.equal(r.status, 503);
      assert.equal(r.headers.get('retry-after'), '7');
      const e = (await r.json()) as { error: { message: string; code: number } };
      assert.match(e.error.message, /busy/);
      assert.equal(e.error.code, 503);
      // a streamed request is refused the same way, as JSON before any event
      const rs = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2, 3], n: 2, max_tokens: 150, stream: true }) });
      assert.equal(rs.status, 503);
      assert.match(rs.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(rs.headers.get('retry-after'), '7');
      await rs.text();
      // the client of the running request goes away: its generation ends at the next step
      ctl.abort();
      await assert.rejects(held);
      // the server sees the closed connection: the running request's signal fires
      const signal = call.batch[0].signal!;
      if (!signal.aborted) await new Promise((ok) => signal.addEventListener('abort', ok, { once: true }));
      gate.resolve();
      const out = await call.result;
      assert.equal(out[0][0].finishReason, 'abort');
      assert.ok(out[0][0].tokenIds.length < 200);
      spy.gate = undefined;
      await srv.batcher.idle();
      assert.equal(srv.batcher.queuedTokens, 0);
      const ok = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: body(2, 150) });
      assert.equal(ok.status, 200);
    } finally {
      gate.resolve();
      await srv.close();
    }
  });

  it('weight sync on a non-loopback host needs an API key', async () => {
    assert.equal(isLoopback('127.0.0.1'), true);
    assert.equal(isLoopback('::1'), true);
    assert.equal(isLoopback('localhost'), true);
    assert.equal(isLoopback('0.0.0.0'), false);
    assert.equal(isLoopback('::'), false);
    assert.equal(isLoopback('192.168.1.5'), false);
    await assert.rejects(startServer({ engine: native, modelName: 'tiny', host: '0.0.0.0', port: 0 }), /refusing to serve the weight-loading endpoint \(\/collective_rpc\) on 0\.0\.0\.0 without an API key: pass --api-key/);
    await assert.rejects(startServer({ engine: native, modelName: 'tiny', apiKey: '' }), /API key is empty/);
    // without weight sync there is no /collective_rpc at all
    const srv = await startServer({ engine: native, modelName: 'tiny', weightSync: false });
    try {
      const r = await fetch(`${srv.url}/collective_rpc`, { method: 'POST', body: JSON.stringify({ method: 'murphy_load_weights', args: [dir] }) });
      assert.equal(r.status, 404);
      // and without a tokenizer there is no chat
      const c = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
      assert.equal(c.status, 400);
      assert.match(((await c.json()) as { error: { message: string } }).error.message, /no tokenizer with a chat template/);
    } finally {
      await srv.close();
    }
  });

  // the timeout only turns a hang (the old behaviour: minutes) into a failure; it is far above the seconds this takes
  it('SIGTERM stops the serve command in the middle of a generation that would take minutes', { timeout: 120_000 }, async () => {
    // 256 samples x 1900 tokens: minutes of work on the tiny model at 2 cores (measured: ~4 min for 256 x 2000)
    const child = spawn(process.execPath, cli('serve', '--model', dir, '--port', '0', '--served-model-name', 'tiny'), { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<{ code: number | null; signal: string | null }>((ok) => child.on('exit', (code, signal) => ok({ code, signal })));
    let err = '';
    const url = await new Promise<string>((ok, fail) => {
      child.stderr.on('data', (c: Buffer) => {
        err += c.toString();
        const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
        if (m) ok(m[1]);
      });
      void exited.then(() => fail(new Error(`serve exited before listening: ${err}`)));
    });
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2, 3], n: 256, max_tokens: 1900, ignore_eos: true, stream: true }) });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('"text"')) {
      const { value, done } = await reader.read();
      assert.ok(!done, 'the stream ended before its first chunk');
      text += Buffer.from(value).toString();
    }
    child.kill('SIGTERM');
    // the stream ends (cut, not finished) and the process exits on its own
    for (;;) {
      const r = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (r.done) break;
      text += Buffer.from(r.value).toString();
    }
    const { code, signal } = await exited;
    assert.equal(signal, null);
    assert.equal(code, 0, err);
    assert.match(err, /SIGTERM: stopping generation/);
    assert.ok(!text.includes('"finish_reason":"length"'), 'no sample ran to its full length');
  });
  it('process.exit() in the middle of a streamed native generation ends the process (no hang at exit)', { timeout: 120_000 }, async () => {
    // process.exit waits for the addon's worker thread: the generation (minutes of work here)
    // must stop, and its delivery fence must not wait for the JS thread that no longer runs.
    // Before the fix this hung until the generation ended (`serve` on SIGTERM under load).
    const script = join(work, 'exit-mid-generation.ts');
    writeFileSync(script, [
      `import { PolicyModel } from ${JSON.stringify(join(REPO, 'lib', 'model', 'index.ts'))};`,
      `const m = await PolicyModel.load(${JSON.stringify(dir)});`,
      `let steps = 0;`,
      `void m.generate([[1, 2, 3]], { n: 256, maxNewTokens: 1900, temperature: 1, stopIds: [], onStep: () => { if (++steps === 3) process.exit(7); } });`,
    ].join('\n'));
    const child = spawn(process.execPath, [...TS_LOADER, script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => { err += c.toString(); });
    const { code, signal } = await new Promise<{ code: number | null; signal: string | null }>((ok) => child.on('exit', (c, sg) => ok({ code: c, signal: sg })));
    assert.equal(signal, null, err);
    assert.equal(code, 7, err);
  });
});
