// The CPU engine draws a decode step's rows in parallel (one part of the rows per thread, each
// with its own scratch): every sample, log-prob, alternative and finish reason must be the same
// bits at 1, 2 and 3 threads, for greedy, plain temperature and filtered (top-k, top-p, min-p)
// sampling with alternatives, stop ids, and row counts that do not divide by the threads.
// Runs alone: it sets the thread count.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyModel, type GenerateOptions, type Generation } from '../../lib/model/index.js';
import { cpuInfo, setNumThreads } from '../../lib/native.js';
import { Rng, testSeed } from '../helpers/random.js';

const seed = testSeed('model/generate-threads');
const rng = new Rng(seed);

const sizes = {
  modelType: 'qwen3', vocabSize: 3000, hiddenSize: 32, intermediateSize: 48, numLayers: 2, numHeads: 4, numKvHeads: 2,
  headDim: 8, maxPositionEmbeddings: 128, tieWordEmbeddings: false, dtype: 'float32',
} as const;

const plain = (gs: Generation[]) => gs.map((g) => ({
  tokens: Array.from(g.tokens), logprobs: Array.from(g.logprobs), topIds: g.topIds && Array.from(g.topIds),
  topLogprobs: g.topLogprobs && Array.from(g.topLogprobs), finishReason: g.finishReason,
}));

describe('generation across thread counts', () => {
  it('the same samples, log-probs and alternatives at 1, 2 and 3 threads', async () => {
    const m = await PolicyModel.random(sizes, { seed, initStd: 0.5 });
    const cases: GenerateOptions[] = [
      { maxNewTokens: 12, temperature: 0, n: 1 },
      { maxNewTokens: 12, temperature: 0.9, n: 3, seed: rng.int(1e6) },
      { maxNewTokens: 12, temperature: 1.1, n: 2, topK: 40, topP: 0.9, minP: 0.02, topLogprobs: 4, seed: rng.int(1e6) },
      { maxNewTokens: 16, temperature: 1, n: 3, topLogprobs: 2, stopIds: [rng.int(3000), rng.int(3000), rng.int(3000)], seed: rng.int(1e6) },
    ];
    const before = cpuInfo().threads;
    try {
      for (const [k, o] of cases.entries()) {
        // 1, 5 or 7 prompts: rows that do not divide by 2 or 3 threads
        const prompts = Array.from({ length: [1, 5, 7, 5][k] }, () => Array.from({ length: 1 + rng.int(10) }, () => rng.int(sizes.vocabSize)));
        const runs: ReturnType<typeof plain>[] = [];
        for (const threads of [1, 2, 3]) {
          setNumThreads(threads);
          runs.push(plain(await m.generate(prompts, o)));
        }
        assert.deepEqual(runs[1], runs[0], `case ${k}: 2 threads`);
        assert.deepEqual(runs[2], runs[0], `case ${k}: 3 threads`);
      }
    } finally {
      setNumThreads(before);
    }
  });
});
