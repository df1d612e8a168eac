// The sampling rows DeviceExecutor sends with a step: each row's step is the index of the token
// being drawn in its completion (0 for the first), as the CPU engine's generate() counts it, so
// a request seed draws the same random numbers on the device as on the CPU (docs/kernels.md,
// "Random numbers"). Checked over forks, chunked prefill and a preempted sequence's recompute.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { planArrays } from '../../../lib/rollout/paged/index.js';
import { samplingArrays } from '../../../lib/rollout/paged/device-executor.js';
import { range, setup } from './helpers.js';

it('sampling rows: step = tokens the sample has drawn so far (forks, prefill chunks, preemption and recompute)', () => {
  // 7 blocks of 4: two 10-token prompts with 6 tokens each do not fit together (2 x 4 blocks): one is preempted
  const { s, model } = setup(7, 4, { maxModelLen: 64, tokenBudget: 6 });
  const a = s.submit({ promptIds: range(1, 11), n: 2, maxTokens: 6, seed: 3 });
  const b = s.submit({ promptIds: range(20, 30), maxTokens: 6, seed: 4 });
  const drawn = new Map<string, number>(); // request:sample -> tokens drawn
  let preempted = 0;
  while (s.hasWork) {
    const plan = s.schedule();
    preempted += plan.preempted.length;
    const arrays = planArrays(plan);
    const sampling = samplingArrays(plan, arrays);
    let r = 0;
    for (const q of plan.seqs) {
      for (const j of q.sampleIndices) {
        const key = `${q.requestId}:${j}`;
        const got = sampling.step[r++];
        // a recomputed sequence draws again the token after what it kept
        assert.equal(got, q.start + q.tokenIds.length - q.request.promptIds.length, `request ${q.requestId} sample ${j}`);
        assert.ok(got >= 0 && got <= (drawn.get(key) ?? 0), `request ${q.requestId} sample ${j}: step ${got} after ${drawn.get(key) ?? 0} drawn`);
        drawn.set(key, got + 1);
      }
    }
    s.complete(plan, model.execute(plan));
  }
  assert.ok(preempted > 0, 'nothing was preempted: the case does not test recompute');
  assert.deepEqual([...drawn.entries()].sort(), [[`${a}:0`, 6], [`${a}:1`, 6], [`${b}:0`, 6]].sort());
});
