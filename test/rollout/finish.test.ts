// finishSample's stop_reason, as vLLM's check_stop gives it (vllm/v1/core/sched/utils.py):
// the tokenizer's eos_token is checked first unless ignore_eos, and reports null; a token in
// stop_token_ids reports its id, and so do generation_config.json's further EOS ids (vLLM's
// SamplingParams.update_from_generation_config moves them into stop_token_ids); a stop
// string reports the string; a length cap reports null. The ids are drawn at random each
// run (the CI failure of stop 32 was a seeded greedy sample whose stop token happened to be
// EOS under ignore_eos).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { builtinTokenizerFiles } from '../../lib/model/index.js';
import { HfChatTokenizer } from '../../lib/prompt/index.js';
import { finishSample } from '../../lib/rollout/finish.js';
import type { EngineRequest } from '../../lib/rollout/index.js';
import { Rng, testSeed } from '../helpers/random.js';

const rng = new Rng(testSeed('rollout/finish'));
const files = builtinTokenizerFiles();
const tok = new HfChatTokenizer(JSON.parse(files['tokenizer.json']), JSON.parse(files['tokenizer_config.json']));
const eos = tok.eosTokenIds ?? [];
/** The same tokenizer with a generation_config.json that lists a second EOS id (as Qwen3's lists <|endoftext|>). */
const second = tok.tokenId('<|im_start|>') ?? -1;
const tok2 = new HfChatTokenizer(JSON.parse(files['tokenizer.json']), JSON.parse(files['tokenizer_config.json']), { eos_token_id: [eos[0], second] });

const request = (stopTokenIds: number[], ignoreEos?: boolean): EngineRequest =>
  ({ promptIds: [1], n: 1, maxTokens: 16, temperature: 0, topP: 1, topK: 0, seed: 0, stopTokenIds, ignoreEos });
/** Byte-level ids (printable ASCII) that are not EOS. */
const plain = (k: number) => Array.from({ length: k }, () => tok.encode(String.fromCharCode(97 + rng.int(26)))[0]);

describe('finishSample stop_reason', () => {
  it('the tokenizers have the EOS ids to test with', () => {
    assert.deepEqual({ ids: eos, primary: tok.eosTokenId }, { ids: [eos[0]], primary: eos[0] });
    assert.ok(second >= 0 && second !== eos[0]);
    assert.deepEqual({ ids: tok2.eosTokenIds, primary: tok2.eosTokenId }, { ids: [eos[0], second], primary: eos[0] });
  });

  it('an EOS stop reports null without ignore_eos, even when stop_token_ids lists it', () => {
    const e = eos[rng.int(eos.length)];
    const ids = [...plain(3), e];
    for (const stops of [[e], [...eos], [e, ids[0]]]) {
      const f = finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'stop' }, request(stops), [], tok);
      assert.equal(f.finishReason, 'stop');
      assert.equal(f.stopReason, null);
      for (const ignoreEos of [false, undefined]) {
        assert.equal(finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'stop' }, request(stops, ignoreEos), [], tok).stopReason, null);
      }
    }
  });

  it('with ignore_eos an EOS id listed in stop_token_ids is reported as the id', () => {
    const e = eos[rng.int(eos.length)];
    const ids = [...plain(2), e];
    const f = finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'stop' }, request([e], true), [], tok);
    assert.equal(f.finishReason, 'stop');
    assert.equal(f.stopReason, e);
    assert.deepEqual(f.tokenIds, ids);
  });

  it("generation_config.json's further EOS id reports itself, as vLLM's stop_token_ids do", () => {
    const ids = [...plain(1 + rng.int(4)), second];
    for (const ignoreEos of [false, true]) {
      const f = finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'stop' }, request([eos[0], second], ignoreEos), [], tok2);
      assert.equal(f.stopReason, second);
    }
    const p = [...ids.slice(0, -1), eos[0]];
    assert.equal(finishSample({ tokenIds: p, logprobs: p.map(() => -1), finishReason: 'stop' }, request([eos[0], second]), [], tok2).stopReason, null);
  });

  it('a stop token that is not EOS reports its id either way; a length cap reports null', () => {
    const ids = plain(4);
    for (const ignoreEos of [true, false]) {
      assert.equal(finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'stop' }, request([ids[3]], ignoreEos), [], tok).stopReason, ids[3]);
      assert.equal(finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'length' }, request([], ignoreEos), [], tok).stopReason, null);
    }
  });

  it('a stop string reports the string and cuts the text before it', () => {
    const ids = tok.encode('abcXYdef');
    const f = finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'length' }, request([], true), ['XY'], tok);
    assert.deepEqual({ reason: f.finishReason, stop: f.stopReason, text: f.text }, { reason: 'stop', stop: 'XY', text: 'abc' });
  });

  it('without a tokenizer no id is the primary EOS: every stop id reports itself (vLLM with skip_tokenizer_init)', () => {
    // vLLM's get_eos_token_id is None without a tokenizer; generation_config.json's EOS ids
    // then reach check_stop only as stop_token_ids, which report their id
    const e = eos[rng.int(eos.length)];
    const ids = [...plain(1 + rng.int(4)), e];
    for (const ignoreEos of [false, true, undefined]) {
      const f = finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'stop' }, request([e], ignoreEos), [], undefined);
      assert.deepEqual({ reason: f.finishReason, stop: f.stopReason, text: f.text, ids: f.tokenIds }, { reason: 'stop', stop: e, text: '', ids });
      assert.equal(finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'length' }, request([], ignoreEos), [], undefined).stopReason, null);
    }
    assert.throws(() => finishSample({ tokenIds: ids, logprobs: ids.map(() => -1), finishReason: 'stop' }, request([e]), ['x'], undefined), /stop strings need a tokenizer/);
  });
});
