// `murphy-native serve` for real, over HTTP, with the native engine on a tiny random model:
// the same seeded generation through the embedded backend, through serve with the vLLM
// client, and through a plain HTTP client; batching; bad input; weight sync over HTTP.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { serveModel } from '../../lib/commands/serve.js';
import { PolicyModel } from '../../lib/model/index.js';
import { loadChatTokenizer, type HfChatTokenizer } from '../../lib/prompt/index.js';
import { EmbeddedBackend, NativeEngine, startServer, VllmBackend, type RolloutServer } from '../../lib/rollout/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

// The plain reference GEMM for this process (read at the first product, after these lines): a
// row's logits then have the same bits whatever else is in the engine call. On the SIMD paths the
// row count of a call picks the summation order (one row, up to 32, more: docs/rollout.md, "Seeds
// and the company a request keeps"), so a seeded request alone and the same request batched with
// others can differ in the last bit of a logit, and at a near-tie in a sampled token (seed
// 220285555 did, on the AVX2 path). The company test below is about the batcher and the seeds.
process.env.MURPHY_GEMM_PATH = 'reference';

const seed = testSeed('rollout/serve');
const rng = new Rng(seed);
const work = mkdtempSync(join(tmpdir(), 'murphy-serve-'));
let dir = '';
let tok: HfChatTokenizer;
let srv: RolloutServer;
let engine: NativeEngine;

before(async () => {
  // vocabulary = the built-in tokenizer's, so every sampled id decodes; float32 so weights round-trip exactly
  dir = await writeTinyModel(join(work, 'model'), seed, 0.3);
  tok = loadChatTokenizer(dir);
  engine = await NativeEngine.load(dir);
  srv = await startServer({ engine, tokenizer: tok, modelName: 'tiny' });
});
after(async () => {
  await srv?.close();
  rmSync(work, { recursive: true, force: true });
});

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

type Choice = { index: number; token_ids: number[] | null; prompt_token_ids: number[] | null; text: string; finish_reason: string; stop_reason: unknown; logprobs: { token_logprobs: number[] } | null };
const choicesOf = (j: Record<string, unknown>) => j.choices as Choice[];

const chat = (s: string) => tok.encode(`<|im_start|>user\n${s}<|im_end|>\n<|im_start|>assistant\n`);

/**
 * Posts the bodies to /v1/completions with all of them queued in the batcher before the engine
 * takes any: a barrier, not timing (an exclusive task holds the batcher until every request
 * is queued behind it; under load the HTTP requests could otherwise arrive one engine call apart).
 */
async function queuedTogether(bodies: object[]): Promise<Awaited<ReturnType<typeof post>>[]> {
  let release!: () => void;
  const held = new Promise<void>((r) => { release = r; });
  const gate = srv.batcher.exclusive(() => held);
  const posted = bodies.map((b) => post('/v1/completions', b));
  while (srv.batcher.pending < bodies.length) await new Promise((r) => setImmediate(r));
  release();
  await gate;
  return Promise.all(posted);
}

describe('serve', () => {
  it('the same seed gives the same token ids and log-probs: embedded, serve + vLLM client, plain HTTP', async () => {
    const prompt = chat(`write ${rng.int(1000)}`);
    const params = { seed: rng.int(1e9), temperature: 0.9, topP: 0.95, topK: 50, maxTokens: 12 };
    const emb = await EmbeddedBackend.fromDir(dir, { tokenizer: tok });
    const a = await emb.generate(prompt, 3, params);
    const client = await VllmBackend.connect({ servers: [srv.url], tokenizer: tok });
    assert.equal(client.model, 'tiny');
    const b = await client.generate(prompt, 3, params);
    const { status, json } = await post('/v1/completions', {
      model: 'tiny', prompt, n: 3, seed: params.seed, temperature: 0.9, top_p: 0.95, top_k: 50, max_tokens: 12,
      stop_token_ids: tok.eosTokenIds, logprobs: 0, return_token_ids: true,
    });
    assert.equal(status, 200);
    const c = choicesOf(json);
    assert.deepEqual(b.map((x) => x.tokenIds), a.map((x) => x.tokenIds));
    assert.deepEqual(c.map((x) => x.token_ids), a.map((x) => x.tokenIds));
    assert.deepEqual(b.map((x) => x.logprobs), a.map((x) => x.logprobs));
    assert.deepEqual(c.map((x) => x.logprobs?.token_logprobs), a.map((x) => x.logprobs));
    assert.deepEqual(b.map((x) => x.text), a.map((x) => x.text));
    assert.deepEqual(b.map((x) => x.finishReason), a.map((x) => x.finishReason));
    assert.deepEqual(c[0].prompt_token_ids, prompt);
    // the n samples differ from each other: asked again without the stop ids, so that none ends
    // at a first sampled end-of-text (this tiny random model, initStd 0.3, can favour it after a
    // chat prompt: seed 320701156 gave [EOS] twice)
    const free = await emb.generate(prompt, 3, { ...params, stopTokenIds: [] });
    assert.ok(free.every((x) => x.tokenIds.length === params.maxTokens), 'no stop ids: every sample runs to maxTokens');
    assert.notDeepEqual(free[0].tokenIds, free[1].tokenIds);
    // an evaluation's request (logprobs: false) queued beside one that wants them (behind a
    // running call, so that the batcher could merge the two): the same samples, no log-probs on
    // the first, the second's intact
    const greedy = { ...params, temperature: 0 };
    const [again, without, withLp] = await Promise.all([emb.generate(prompt, 3, params), emb.generate(prompt, 1, { ...greedy, logprobs: false }), emb.generate(prompt, 1, greedy)]);
    assert.deepEqual(without.map((x) => [x.tokenIds, x.text]), withLp.map((x) => [x.tokenIds, x.text]));
    assert.equal(without[0].logprobs, undefined);
    assert.ok(withLp[0].logprobs?.every(Number.isFinite));
    assert.deepEqual(again.map((x) => x.logprobs), a.map((x) => x.logprobs));
  });

  it('min_p reaches the sampler on every path (embedded, serve + vLLM client, plain HTTP): min_p 1 keeps only the most likely token', async () => {
    const prompt = chat(`min-p ${rng.int(1000)}`);
    const params = { seed: rng.int(1e9), temperature: 1.2, minP: 1, maxTokens: 6 };
    const emb = await EmbeddedBackend.fromDir(dir, { tokenizer: tok });
    const greedy = await emb.generate(prompt, 1, { ...params, temperature: 0, minP: 0 });
    const a = await emb.generate(prompt, 2, params);
    const client = await VllmBackend.connect({ servers: [srv.url], tokenizer: tok });
    const b = await client.generate(prompt, 2, params);
    const { status, json } = await post('/v1/completions', {
      model: 'tiny', prompt, n: 2, seed: params.seed, temperature: 1.2, min_p: 1, max_tokens: 6, logprobs: 0, return_token_ids: true,
    });
    assert.equal(status, 200);
    const c = choicesOf(json);
    for (const x of [...a, ...b]) {
      assert.deepEqual(x.tokenIds, greedy[0].tokenIds);
      assert.ok(x.logprobs!.every((l) => l === 0), `log-probs ${x.logprobs}`);
    }
    for (const x of c) {
      assert.deepEqual(x.token_ids, greedy[0].tokenIds);
      assert.ok(x.logprobs!.token_logprobs.every((l) => l === 0));
    }
  });

  it('merges concurrent requests into one engine call; seeded results never depend on the company they keep', async () => {
    const body = { prompt: chat('hi'), n: 2, max_tokens: 24, temperature: 1, return_token_ids: true };
    const before = srv.batcher.stats.batches;
    const rs = await queuedTogether(Array.from({ length: 12 }, () => body));
    for (const r of rs) assert.equal(choicesOf(r.json).length, 2);
    assert.ok(srv.batcher.stats.batches - before < 12, `12 queued requests ran as ${srv.batcher.stats.batches - before} engine calls`);
    assert.ok(srv.batcher.stats.maxMerged > 1, `max merged ${srv.batcher.stats.maxMerged}`);
    const seeds = [11, 22, 33, 44];
    const mk = (s: number) => ({ prompt: chat(`p${s}`), n: 2, max_tokens: 10, seed: s, return_token_ids: true, logprobs: 0 });
    const st0 = { ...srv.batcher.stats };
    const together = await queuedTogether([...seeds.map(mk), ...Array.from({ length: 4 }, () => body)]);
    // seeded requests share engine calls too (each prompt carries its own seed)
    const st1 = srv.batcher.stats;
    assert.ok(st1.batches - st0.batches < st1.requests - st0.requests, `seeded requests were merged: ${st1.batches - st0.batches} calls for ${st1.requests - st0.requests} requests`);
    for (let i = 0; i < seeds.length; i++) {
      const alone = await post('/v1/completions', mk(seeds[i]));
      assert.deepEqual(choicesOf(together[i].json).map((c) => c.token_ids), choicesOf(alone.json).map((c) => c.token_ids));
    }
  });

  it('text prompts, lists of prompts, stop strings, stop_token_ids and optional fields', async () => {
    const { json } = await post('/v1/completions', { prompt: ['hello', 'world'], n: 2, max_tokens: 16, temperature: 0, return_token_ids: true, ignore_eos: true });
    const c = choicesOf(json);
    assert.deepEqual(c.map((x) => x.index), [0, 1, 2, 3]);
    assert.deepEqual(c[0].prompt_token_ids, tok.encode('hello'));
    assert.deepEqual(c[2].prompt_token_ids, tok.encode('world'));
    assert.deepEqual(c[0].token_ids, c[1].token_ids, 'greedy samples agree');
    assert.equal(c[0].logprobs, null);
    assert.equal(c[0].text, tok.decode(c[0].token_ids ?? [], { skipSpecialTokens: true }));
    // stop string: a character from the middle of the greedy text
    const full = c[0].text;
    const ids = c[0].token_ids ?? [];
    const stop = full.length > 2 ? full[Math.floor(full.length / 2)] : undefined;
    if (stop !== undefined) {
      const s = choicesOf((await post('/v1/completions', { prompt: 'hello', max_tokens: 16, temperature: 0, return_token_ids: true, stop, ignore_eos: true })).json)[0];
      assert.equal(s.finish_reason, 'stop');
      assert.equal(s.stop_reason, stop);
      assert.equal(s.text, full.slice(0, full.indexOf(stop)));
      const kept = s.token_ids ?? [];
      assert.deepEqual(kept, ids.slice(0, kept.length));
      assert.ok(tok.decode(kept, { skipSpecialTokens: true }).includes(stop));
      // (decoding no tokens is an error in the tokenizer library: a one-token prefix is '' before it)
      const before = kept.length > 1 ? tok.decode(kept.slice(0, -1), { skipSpecialTokens: true }) : '';
      assert.ok(!before.replace(/\uFFFD+$/, '').includes(stop));
    }
    // stop token id: the third greedy token
    const st = choicesOf((await post('/v1/completions', { prompt: 'hello', max_tokens: 16, temperature: 0, return_token_ids: true, stop_token_ids: [ids[2]], ignore_eos: true })).json)[0];
    assert.equal(st.finish_reason, 'stop');
    assert.deepEqual(st.token_ids, ids.slice(0, ids.indexOf(ids[2]) + 1));
    assert.equal(st.stop_reason, ids[2]);
    const plain = choicesOf((await post('/v1/completions', { prompt: 'hello', max_tokens: 3, ignore_eos: true })).json)[0];
    assert.equal(plain.token_ids, null);
    assert.equal(plain.finish_reason, 'length');
    const models = await (await fetch(`${srv.url}/v1/models`)).json() as { data: { id: string; max_model_len: number }[] };
    assert.equal(models.data[0].id, 'tiny');
    assert.equal(models.data[0].max_model_len, 2048);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });

  it('bad requests get OpenAI-style 4xx errors and the server keeps serving', async () => {
    const cases: [unknown, number, RegExp, string | null][] = [
      ['{"prompt": [1, 2', 400, /invalid JSON/, null],
      ['[1, 2]', 400, /JSON object/, null],
      [{ prompt: [1, 99999] }, 400, /token id 99999 is outside the vocabulary/, 'prompt'],
      [{ prompt: [] }, 400, /'prompt' must be/, 'prompt'],
      [{ prompt: [[1], []] }, 400, /prompt\[1\] is empty/, 'prompt'],
      [{ prompt: [1.5] }, 400, /outside the vocabulary/, 'prompt'],
      [{ prompt: [1], n: 0 }, 400, /'n' must be an integer/, 'n'],
      [{ prompt: [1], temperature: -1 }, 400, /'temperature'/, 'temperature'],
      [{ prompt: [1], top_p: 0 }, 400, /'top_p'/, 'top_p'],
      [{ prompt: [1], top_k: 1.5 }, 400, /'top_k'/, 'top_k'],
      [{ prompt: [1], min_p: 2 }, 400, /'min_p' must be in \[0, 1\]/, 'min_p'],
      [{ prompt: [1], seed: -3 }, 400, /'seed'/, 'seed'],
      [{ prompt: [1], max_tokens: 5000 }, 400, /maximum context length is 2048 tokens/, 'max_tokens'],
      [{ prompt: [1], logprobs: 21 }, 400, /'logprobs' must be an integer in \[0, 20\]/, 'logprobs'],
      [{ prompt: [1], stream: 'yes' }, 400, /'stream' must be a boolean/, 'stream'],
      [{ prompt: [1], stream_options: { include_usage: true } }, 400, /only allowed with 'stream': true/, 'stream_options'],
      [{ prompt: [1], stream: true, stream_options: { continuous_usage_stats: true } }, 400, /'stream_options.continuous_usage_stats' is not supported/, 'stream_options'],
      [{ prompt: [1], messages: [] }, 400, /'messages' belongs to \/v1\/chat\/completions/, 'messages'],
      [{ prompt: [1], n: 600, max_tokens: 2000 }, 400, /at most 1048576 per request/, 'n'],
      [{ prompt: [1], presence_penalty: 0.5 }, 400, /'presence_penalty' is not supported/, 'presence_penalty'],
      [{ prompt: [1], stop: 5 }, 400, /'stop' must be/, 'stop'],
      [{ prompt: [1], stop_token_ids: [-1] }, 400, /'stop_token_ids'/, 'stop_token_ids'],
      [{ prompt: [1], return_token_ids: 'yes' }, 400, /boolean/, 'return_token_ids'],
      [{ prompt: [1], model: 'gpt-4' }, 404, /does not exist/, 'model'],
    ];
    for (const [body, status, msg, param] of cases) {
      const r = await post('/v1/completions', body);
      assert.equal(r.status, status, JSON.stringify(body));
      const e = r.json.error as { message: string; type: string; param: string | null; code: number };
      assert.match(e.message, msg);
      assert.equal(e.param, param, JSON.stringify(body));
      assert.equal(e.code, status);
      assert.equal(typeof e.type, 'string');
    }
    assert.equal((await fetch(`${srv.url}/v1/completions`)).status, 405);
    assert.equal((await fetch(`${srv.url}/nope`)).status, 404);
    assert.equal((await post('/collective_rpc', { args: ['x'] })).status, 400);
    assert.equal((await post('/collective_rpc', { method: 'rm_rf' })).status, 400);
    const missing = await post('/collective_rpc', { method: 'murphy_load_weights', args: [join(work, 'nowhere')] });
    assert.equal(missing.status, 400);
    assert.match((missing.json.error as { message: string }).message, /config.json: cannot open/);
    const big = await post('/v1/completions', JSON.stringify({ prompt: 'x'.repeat(33 << 20) }));
    assert.equal(big.status, 413);
    // raw garbage on the socket
    await new Promise<void>((ok) => {
      const port = Number(new URL(srv.url).port);
      const s = connect(port, '127.0.0.1', () => s.end('\x00\x01GARBAGE\r\n\r\n'));
      s.on('data', () => undefined);
      s.on('close', () => ok());
      s.on('error', () => ok());
    });
    const r = await post('/v1/completions', { prompt: [1, 2, 3], max_tokens: 2, return_token_ids: true, ignore_eos: true }); // a sampled end-of-text would end it after 1
    assert.equal(r.status, 200);
    assert.equal(choicesOf(r.json)[0].token_ids?.length, 2);
  });

  it('weight sync over HTTP: the served log-probs become exactly the trainer\'s', async () => {
    const trainer = await PolicyModel.load(dir);
    for (const p of trainer.params()) {
      const w = trainer.getParam(p.name);
      for (let i = 0; i < w.length; i++) w[i] += 0.2 * rng.normal();
      trainer.setParam(p.name, w);
    }
    const client = await VllmBackend.connect({ servers: [srv.url], syncDir: join(work, 'sync'), tokenizer: tok });
    const prompt = chat('sync');
    const params = { seed: 5, temperature: 0.8, maxTokens: 16 };
    const opts = { maxNewTokens: 16, temperature: 0.8, seed: 5, n: 2, stopIds: [...tok.eosTokenIds] };
    const theirs = await trainer.generate([prompt], opts);
    const stale = await client.generate(prompt, 2, params);
    assert.notDeepEqual(stale.map((c) => c.logprobs), theirs.map((g) => Array.from(g.logprobs)));
    const rep = await client.syncWeights(trainer, 1);
    assert.deepEqual(rep.servers, [srv.url]);
    assert.equal(rep.method, 'disk');
    const fresh = await client.generate(prompt, 2, params);
    assert.deepEqual(fresh.map((c) => c.tokenIds), theirs.map((g) => Array.from(g.tokens)));
    assert.deepEqual(fresh.map((c) => c.logprobs), theirs.map((g) => Array.from(g.logprobs)));
    // and the embedded backend takes the same weights in memory
    const emb = await EmbeddedBackend.fromDir(dir, { tokenizer: tok });
    const r = await emb.syncWeights(trainer, 1);
    assert.equal(r.method, 'memory');
    const e = await emb.generate(prompt, 2, params);
    assert.deepEqual(e.map((c) => c.logprobs), theirs.map((g) => Array.from(g.logprobs)));
    const shared = new EmbeddedBackend({ engine: new NativeEngine(trainer), tokenizer: tok });
    assert.equal((await shared.syncWeights(trainer, 2)).method, 'shared');
  });

  it('the serve command starts on a free port', async () => {
    const s = await serveModel({ model: dir, port: 0, host: '127.0.0.1', maxBatch: 8, servedModelName: 'cmd' });
    try {
      const m = await (await fetch(`${s.url}/v1/models`)).json() as { data: { id: string }[] };
      assert.equal(m.data[0].id, 'cmd');
    } finally {
      await s.close();
    }
  });
});
