// A streamed sample's text adds up to the whole sample's text, and both are what vLLM's
// detokenizer would give: the decode never applies clean_up_tokenization_spaces (" ." -> "."),
// even when a tokenizer_config.json asks transformers for it. Random token ids over the
// built-in byte tokenizer (every byte a token: broken UTF-8 included) and over Qwen3's.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { builtinTokenizerFiles } from '../../lib/model/index.js';
import { HfChatTokenizer, qwen3TokenizerDir } from '../../lib/prompt/index.js';
import { SampleStream } from '../../lib/rollout/openai-response.js';
import type { EngineRequest } from '../../lib/rollout/index.js';
import { Rng, testSeed } from '../helpers/random.js';

const rng = new Rng(testSeed('rollout/sample-stream'));

/** A tokenizer from its two files, with clean_up_tokenization_spaces set to true in its config. */
function cleanupAsking(tokenizerJson: string, configJson: string): HfChatTokenizer {
  return new HfChatTokenizer(JSON.parse(tokenizerJson), { ...JSON.parse(configJson), clean_up_tokenization_spaces: true });
}
const builtin = builtinTokenizerFiles();
const byteTok = cleanupAsking(builtin['tokenizer.json'], builtin['tokenizer_config.json']);
const qdir = qwen3TokenizerDir();
const qwenTok = cleanupAsking(readFileSync(join(qdir, 'tokenizer.json'), 'utf8'), readFileSync(join(qdir, 'tokenizer_config.json'), 'utf8'));

// the pieces that transformers' clean-up rewrites, code that it breaks, and multi-byte text
const PIECES = [' .', ' ,', ' !', ' ?', " 's", " n't", " 'm", " 've", " 're", " ' ", 'from . import x', 'f(a , b)', 'é', '日本', '🙂', ' ', '\n', 'x'];
const randomText = (parts: number) => Array.from({ length: parts }, () => PIECES[rng.int(PIECES.length)]).join('');

const request = (maxTokens: number): EngineRequest => ({ promptIds: [1], n: 1, maxTokens, temperature: 1, topP: 1, topK: 0, seed: 0, stopTokenIds: [] });

/** Streams ids through a SampleStream; returns the deltas' text joined and the finished sample's text. */
function stream(tok: HfChatTokenizer, ids: number[], stop: string[] = []): { joined: string; whole: string; tokens: number[] } {
  const s = new SampleStream(request(ids.length), stop, tok);
  let joined = '';
  const tokens: number[] = [];
  for (const id of ids) {
    const d = s.push({ id, logprob: -1 });
    if (d === undefined) continue;
    joined += d.text;
    tokens.push(...d.tokenIds);
    if (d.finish !== undefined) return { joined, whole: d.finish.sample.text, tokens };
  }
  assert.fail('the stream never finished');
}

describe('SampleStream', () => {
  it('decodes code as written, with no space clean-up, even where the tokenizer config asks for it', () => {
    for (const tok of [byteTok, qwenTok]) {
      for (const text of ['from . import x', 'print(a , b) ; x = " ."', "it 's ok , isn't it ?"]) {
        const ids = tok.encode(text);
        assert.equal(tok.decode(ids), text);
        assert.deepEqual(stream(tok, ids), { joined: text, whole: text, tokens: ids });
      }
    }
  });

  it('the streamed deltas add up to the whole sample for random ids (broken UTF-8 included)', () => {
    for (let trial = 0; trial < 40; trial++) {
      const tok = trial % 2 === 0 ? byteTok : qwenTok;
      // half the trials: ids of random text; the rest: random byte tokens, so any byte sequence
      const ids = trial % 4 < 2 ? tok.encode(randomText(1 + rng.int(12))) : Array.from({ length: 1 + rng.int(30) }, () => rng.int(256));
      const r = stream(tok, ids);
      const want = tok.decode(ids, { skipSpecialTokens: true });
      assert.equal(r.whole, want, `trial ${trial}: ids ${JSON.stringify(ids)}`);
      assert.equal(r.joined, want, `trial ${trial}: ids ${JSON.stringify(ids)}`);
      assert.deepEqual(r.tokens, ids);
    }
  });

  it('with a stop string, the streamed text is the whole text cut before the stop', () => {
    for (let trial = 0; trial < 20; trial++) {
      const tok = trial % 2 === 0 ? byteTok : qwenTok;
      const text = randomText(4 + rng.int(8));
      const ids = tok.encode(text);
      const stop = PIECES[rng.int(6)];
      const r = stream(tok, ids, [stop]);
      const at = text.indexOf(stop);
      assert.equal(r.whole, at < 0 ? text : text.slice(0, at), `trial ${trial}: ${JSON.stringify(text)} stop ${JSON.stringify(stop)}`);
      assert.equal(r.joined, r.whole);
    }
  });
});
