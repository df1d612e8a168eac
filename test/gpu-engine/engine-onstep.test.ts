// The model binding's generate: every onStep call has run when the promise resolves, also when
// the JS thread is slower than the decode loop (the step deliveries and the call's completion
// are separate event-loop sources; the binding fences them). Every engine serves generate through
// this binding.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';

/** A word no one notifies: Atomics.wait on it blocks the calling thread for its timeout. */
const blocker = new Int32Array(new SharedArrayBuffer(4));

describe('generate with onStep', () => {
  it('all steps are delivered before the promise resolves, even with a slow callback', async () => {
    const m = await PolicyModel.random('tiny', { seed: 1 });
    for (let round = 0; round < 1; round++) {
      let delivered = 0;
      // more steps than the event loop dispatches from the queue at once (1000)
      const gens = await m.generate([[1, 2, 3]], {
        maxNewTokens: 1200, n: 1, temperature: 1, seed: round,
        onStep: (st) => {
          delivered += st.samples.length;
          // a slow consumer: the JS thread blocked half a millisecond a step (not a timed
          // assertion), asleep rather than spinning, which burned ~0.5 s of CPU a run
          Atomics.wait(blocker, 0, 0, 0.5);
        },
      });
      assert.equal(delivered, gens.reduce((a, g) => a + g.tokens.length, 0), `round ${round}: steps delivered when the promise resolved`);
    }
  });
});
