// `murphy-native serve` through the official `openai` client (a client nobody here wrote):
// chat completions with the model's own template, streaming on both endpoints, n > 1, top
// log-probs, the API key, and a client that disconnects mid-stream. Tiny random model.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { PolicyModel } from '../../lib/model/index.js';
import { ChatPromptBuilder, loadChatTokenizer, type HfChatTokenizer } from '../../lib/prompt/index.js';
import { NativeEngine, startServer, VllmBackend, type RolloutServer } from '../../lib/rollout/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { SpyEngine } from './serve-helpers.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

const seed = testSeed('rollout/serve-openai');
const rng = new Rng(seed);
const work = mkdtempSync(join(tmpdir(), 'murphy-serve-openai-'));
const KEY = `key-${rng.int(1e9)}`;
let dir = '';
let tok: HfChatTokenizer;
let spy: SpyEngine;
let srv: RolloutServer;
let client: OpenAI;

before(async () => {
  dir = await writeTinyModel(join(work, 'model'), seed, 0.3);
  tok = loadChatTokenizer(dir);
  spy = new SpyEngine(await NativeEngine.load(dir));
  srv = await startServer({ engine: spy, tokenizer: tok, modelName: 'tiny', apiKey: KEY });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: KEY, maxRetries: 0 });
});
after(async () => {
  await srv?.close();
  rmSync(work, { recursive: true, force: true });
});

/** vLLM's extensions, which the openai client passes through in the body. */
type Extra = { return_token_ids?: boolean; ignore_eos?: boolean; continue_final_message?: boolean; add_generation_prompt?: boolean; top_k?: number };
const ext = <T>(body: T, extra: Extra): T => ({ ...body, ...extra });
type WithIds = { token_ids?: number[] | null };

describe('serve with the openai client', () => {
  const messages = [{ role: 'system' as const, content: 'You write Python.' }, { role: 'user' as const, content: `add ${rng.int(100)} and ${rng.int(100)}` }];

  it('chat: the prompt is the trainer\'s rendering; n samples with text, ids, top log-probs and usage', async () => {
    const s = rng.int(1e9);
    const r = await client.chat.completions.create(ext({ model: 'tiny', messages, n: 3, max_completion_tokens: 10, seed: s, temperature: 0.9, logprobs: true, top_logprobs: 5 }, { return_token_ids: true, ignore_eos: true }));
    const trainer = new ChatPromptBuilder(tok, { system: 'You write Python.', task: (p: string) => p }).initial(messages[1].content);
    assert.deepEqual((r as unknown as { prompt_token_ids: number[] }).prompt_token_ids, trainer);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices.length, 3);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    for (const c of r.choices) {
      const ids = (c as unknown as WithIds).token_ids ?? [];
      assert.equal(ids.length, 10);
      assert.equal(c.finish_reason, 'length');
      assert.equal(c.message.role, 'assistant');
      assert.equal(c.message.content, tok.decode(ids, { skipSpecialTokens: true }));
      const content = c.logprobs?.content ?? [];
      assert.equal(content.length, 10);
      content.forEach((e, i) => {
        assert.equal(e.token, tok.decode([ids[i]]));
        assert.equal(e.top_logprobs.length, 5);
        for (let k = 1; k < 5; k++) assert.ok(e.top_logprobs[k - 1].logprob >= e.top_logprobs[k].logprob, 'alternatives most likely first');
        assert.ok(e.logprob <= e.top_logprobs[0].logprob);
        // (bytes of partial characters all read as U+FFFD, so only whole characters identify a token)
        const same = e.token.includes('\uFFFD') ? undefined : e.top_logprobs.find((t) => t.token === e.token);
        if (same !== undefined) assert.equal(same.logprob, e.logprob);
        assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
      });
    }
    assert.equal(r.usage?.prompt_tokens, trainer.length);
    assert.equal(r.usage?.completion_tokens, 30);
    // the same seed through /v1/completions with the same prompt ids gives the same samples
    const c = await client.completions.create(ext({ model: 'tiny', prompt: trainer, n: 3, max_tokens: 10, seed: s, temperature: 0.9 }, { return_token_ids: true, ignore_eos: true }));
    assert.deepEqual(c.choices.map((x) => (x as unknown as WithIds).token_ids), r.choices.map((x) => (x as unknown as WithIds).token_ids));
  });

  it('streams chat and completions as SSE chunks that add up to the non-streamed answer, usage last', async () => {
    const s = rng.int(1e9);
    const body = { model: 'tiny', messages, n: 2, max_tokens: 16, seed: s, temperature: 1 };
    const whole = await client.chat.completions.create(body);
    const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const text = ['', ''];
    const finish: (string | null)[] = [null, null];
    let usage: OpenAI.CompletionUsage | null | undefined;
    let chunks = 0;
    for await (const ch of stream) {
      chunks++;
      assert.equal(ch.object, 'chat.completion.chunk');
      assert.equal(usage, undefined, 'usage comes in the last chunk only');
      if (ch.usage) usage = ch.usage;
      for (const c of ch.choices) {
        text[c.index] += c.delta.content ?? '';
        if (c.finish_reason !== null) finish[c.index] = c.finish_reason;
      }
    }
    assert.ok(chunks > 3, `${chunks} chunks`);
    assert.deepEqual(text, whole.choices.map((c) => c.message.content));
    assert.deepEqual(finish, whole.choices.map((c) => c.finish_reason));
    assert.deepEqual(usage, whole.usage);

    const cbody = { model: 'tiny', prompt: 'def add(a, b):', n: 2, max_tokens: 12, seed: s, temperature: 1, logprobs: 3 };
    const cwhole = await client.completions.create(cbody);
    const cstream = await client.completions.create({ ...cbody, stream: true });
    const ctext = ['', ''];
    const lps: number[][] = [[], []];
    const offs: number[][] = [[], []];
    for await (const ch of cstream) {
      for (const c of ch.choices) {
        ctext[c.index] += c.text;
        lps[c.index].push(...(c.logprobs?.token_logprobs ?? []));
        offs[c.index].push(...(c.logprobs?.text_offset ?? []));
        for (const d of c.logprobs?.top_logprobs ?? []) assert.ok(Object.keys(d).length >= 1 && Object.keys(d).length <= 4);
      }
    }
    assert.deepEqual(ctext, cwhole.choices.map((c) => c.text));
    assert.deepEqual(lps, cwhole.choices.map((c) => c.logprobs?.token_logprobs));
    assert.deepEqual(offs, cwhole.choices.map((c) => c.logprobs?.text_offset));
  });

  it('a streamed stop string ends the sample where the non-streamed one ends', async () => {
    const s = rng.int(1e9);
    const body = { model: 'tiny', prompt: 'hello', max_tokens: 24, seed: s, temperature: 1 };
    const full = (await client.completions.create(ext(body, { ignore_eos: true }))).choices[0].text;
    const stop = full.length > 4 ? full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 2) : 'x';
    const whole = await client.completions.create(ext({ ...body, stop }, { ignore_eos: true, return_token_ids: true }));
    let text = '';
    let reason: string | null = null;
    const ids: number[] = [];
    for await (const ch of await client.completions.create(ext({ ...body, stop, stream: true as const }, { ignore_eos: true, return_token_ids: true }))) {
      for (const c of ch.choices) {
        text += c.text;
        ids.push(...((c as unknown as WithIds).token_ids ?? []));
        if (c.finish_reason !== null) reason = c.finish_reason;
      }
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(reason, whole.choices[0].finish_reason);
    assert.deepEqual(ids, (whole.choices[0] as unknown as WithIds).token_ids);
    assert.ok(!text.includes(stop));
  });

  it('continue_final_message and add_generation_prompt shape the prompt as vLLM does', async () => {
    const open = [{ role: 'user' as const, content: 'hi' }, { role: 'assistant' as const, content: 'def f(' }];
    const r = await client.chat.completions.create(ext({ model: 'tiny', messages: open, max_tokens: 2 }, { continue_final_message: true, add_generation_prompt: false, return_token_ids: true }));
    const ids = (r as unknown as { prompt_token_ids: number[] }).prompt_token_ids;
    const text = tok.decode(ids);
    assert.ok(text.endsWith('<|im_start|>assistant\ndef f('), JSON.stringify(text));
    const noGen = await client.chat.completions.create(ext({ model: 'tiny', messages: [open[0]], max_tokens: 2 }, { add_generation_prompt: false, return_token_ids: true }));
    const t2 = tok.decode((noGen as unknown as { prompt_token_ids: number[] }).prompt_token_ids);
    assert.ok(!t2.includes('assistant'), JSON.stringify(t2));
  });

  it('a client that disconnects mid-stream stops the work', async () => {
    const calls = spy.calls.length;
    const stream = await client.chat.completions.create(ext({ model: 'tiny', messages, n: 4, max_tokens: 1900, stream: true as const }, { ignore_eos: true }));
    for await (const ch of stream) {
      if (ch.choices.length > 0) break; // leaving the loop aborts the request
    }
    const call = spy.calls[calls];
    const out = await call.result;
    for (const s of out[0]) {
      assert.equal(s.finishReason, 'abort');
      assert.ok(s.tokenIds.length < 1900, `${s.tokenIds.length} tokens`);
    }
  });

  it('the vLLM client with the key generates and syncs weights; without it, it is refused', async () => {
    const trainer = await PolicyModel.load(dir);
    const vllm = await VllmBackend.connect({ servers: [srv.url], apiKey: KEY, tokenizer: tok, syncDir: join(work, 'sync') });
    const out = await vllm.generate(tok.encode('hi'), 2, { seed: 3, maxTokens: 4 });
    assert.equal(out.length, 2);
    const rep = await vllm.syncWeights(trainer, 1);
    assert.deepEqual(rep.servers, [srv.url]);
    await assert.rejects(VllmBackend.connect({ servers: [srv.url], apiKey: 'wrong', tokenizer: tok }), /401/);
  });

  it('errors keep their OpenAI shape and classes; the key is required everywhere but /health', async () => {
    await assert.rejects(client.chat.completions.create({ model: 'tiny', messages, tools: [{ type: 'function', function: { name: 'f' } }] }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && /'tools' is not supported/.test(e.message) && (e.error as { param: string }).param === 'tools');
    await assert.rejects(client.chat.completions.create({ model: 'tiny', messages, top_logprobs: 3 }), (e: unknown) => e instanceof OpenAI.BadRequestError && /needs 'logprobs': true/.test(e.message));
    await assert.rejects(client.chat.completions.create({ model: 'tiny', messages, logprobs: true, top_logprobs: 21 }), OpenAI.BadRequestError);
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4', messages }), OpenAI.NotFoundError);
    await assert.rejects(client.chat.completions.create({ model: 'tiny', messages: [] }), (e: unknown) => e instanceof OpenAI.BadRequestError && /'messages'/.test(e.message));
    const anon = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(anon.models.list(), OpenAI.AuthenticationError);
    await assert.rejects(anon.chat.completions.create({ model: 'tiny', messages }), OpenAI.AuthenticationError);
    const models = await client.models.list();
    assert.equal(models.data[0].id, 'tiny');
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
    for (const path of ['/v1/models', '/version', '/ping']) assert.equal((await fetch(`${srv.url}${path}`)).status, 401, path);
    const rpc = await fetch(`${srv.url}/collective_rpc`, { method: 'POST', body: JSON.stringify({ method: 'murphy_load_weights', args: [work] }) });
    assert.equal(rpc.status, 401);
    const withKey = await fetch(`${srv.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(withKey.status, 200);
    const prefix = await fetch(`${srv.url}/v1/models`, { headers: { authorization: `Bearer ${KEY.slice(0, -1)}` } });
    assert.equal(prefix.status, 401);
  });
});
