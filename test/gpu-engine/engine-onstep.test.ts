// The model binding's generate: every onStep call has run when the promise resolves, also when
// the JS thread is slower than the decode loop (the step deliveries and the call's completion
// are separate event-loop sources; the binding fences them). Every engine serves generate through
// this binding.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';

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
          const until = performance.now() + 0.5; // a slow consumer (busy half a millisecond), not a timed assertion
          while (performance.now() < until) { /* spin */ }
        },
      });
      assert.equal(delivered, gens.reduce((a, g) => a + g.tokens.length, 0), `round ${round}: steps delivered when the promise resolved`);
    }
  });
});
