// The MURPHY-shaped workload (G = 8 first attempts, G' = 4 repairs of each, 512-token prompts,
// feedback turns of 200-400 tokens) through the scheduler: prefix sharing removes >= 70% of
// the prefill tokens (the goal), and changes no sample.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { KvPool, ReferenceModel, Scheduler, TreeWorkload, runTreeWorkload } from '../../../lib/rollout/paged/index.js';
import { testSeed } from '../../helpers/random.js';

async function run(w: TreeWorkload, blocks: number, prefixSharing: boolean) {
  const s = new Scheduler(new KvPool({ blocks, blockSize: 16 }), { maxModelLen: 4096, prefixSharing });
  return runTreeWorkload(w, s, new ReferenceModel(16, { vocab: w.o.vocab }));
}

it('repair prompts are the first turn\'s prompt + the attempt + a feedback turn', async () => {
  const w = new TreeWorkload({ problems: 2, groupSize: 3, repairs: 2, promptTokens: 20, completionTokens: 5, feedbackTokens: [4, 9], vocab: 50 });
  const r = await run(w, 64, true);
  assert.equal(r.first.requests.length, 2);
  assert.equal(r.repair.requests.length, 6);
  for (let p = 0; p < 2; p++) {
    for (let j = 0; j < 3; j++) {
      const q = r.repair.requests[p * 3 + j].promptIds;
      const head = [...r.first.requests[p].promptIds, ...r.first.samples[p][j].tokenIds];
      assert.deepEqual(q.slice(0, head.length), head);
      assert.ok(q.length - head.length >= 4 && q.length - head.length <= 9);
    }
  }
  assert.equal(r.repair.samples.flat().length, 12);
  const half = new TreeWorkload({ problems: 4, failRate: 0.5, promptTokens: 16, completionTokens: 4, vocab: 50 });
  const n = half.repairTurn(await run(half, 256, true).then((x) => x.first)).length;
  assert.ok(n > 0 && n < 32, `failRate 0.5 repairs some attempts: ${n} of 32`);
});

it('the issue\'s tree workload: prefix sharing saves >= 70% of prefill tokens with the same samples', async () => {
  const seed = testSeed('tree workload');
  const w = new TreeWorkload({ problems: 1, seed });
  const shared = await run(w, 8000, true);
  const plain = await run(w, 8000, false);
  assert.deepEqual(shared.repair.samples, plain.repair.samples);
  assert.equal(shared.metrics.preemptions + plain.metrics.preemptions, 0, 'the pool holds the whole workload');
  assert.equal(shared.metrics.prefillTokens + shared.metrics.prefillSaved, plain.metrics.prefillTokens);
  // without sharing: G x 512 + G x G' x (512 + 256 + feedback); with: 512 + per attempt its feedback and block tails
  const saved = 1 - shared.metrics.prefillTokens / plain.metrics.prefillTokens;
  console.log(`# prefill tokens ${shared.metrics.prefillTokens} shared, ${plain.metrics.prefillTokens} not: ${(100 * saved).toFixed(1)}% saved`);
  assert.ok(saved >= 0.7, `saved ${saved}`);
  assert.equal(shared.metrics.decodeTokens, plain.metrics.decodeTokens);
});
