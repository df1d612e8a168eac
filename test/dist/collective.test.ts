// The CPU backend of the collective interface against a host reference (conformance.ts): sums in
// rank order, max, reduce-scatter and all-gather with uneven counts, broadcast, bit-identical results on
// every rank, out-of-order calls and a closed peer reported as errors.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Rng, testSeed } from '../helpers/random.js';
import { checkAllReduce, checkUnevenAndHelpers } from './conformance.js';
import { closeWorlds, localWorld } from './helpers.js';

const seed = testSeed('dist/collective');

after(closeWorlds);

describe('CPU collective (loopback TCP)', () => {
  it('all-reduce sum/max equals the host reference (rank-order sum) bit for bit on every rank', async () => {
    const rng = new Rng(seed);
    for (const N of [2, 3]) {
      const world = await localWorld(N);
      try {
        await checkAllReduce(world, rng);
      } finally {
        await Promise.all(world.map((c) => c.close()));
      }
    }
  });

  it('reduce-scatter and all-gather with uneven counts; broadcast; JSON helpers', async () => {
    const rng = new Rng(seed + 1);
    const N = 3;
    const world = await localWorld(N);
    try {
      await checkUnevenAndHelpers(world, rng);
    } finally {
      await Promise.all(world.map((c) => c.close()));
    }
  });

  it('calls made in a different order on two ranks fail with one line naming both', async () => {
    const world = await localWorld(2);
    try {
      const a = world[0]!.barrier();
      const b = world[1]!.allReduce(new Float32Array(4));
      const [ra, rb] = await Promise.allSettled([a, b]);
      const msgs = [ra, rb].filter((x) => x.status === 'rejected').map((x) => String((x as PromiseRejectedResult).reason.message));
      assert.ok(msgs.length >= 1);
      assert.match(msgs[0]!, /out of order: rank \d sent (barrier|allReduce) #1 while rank \d is in (allReduce|barrier) #1/);
    } finally {
      await Promise.all(world.map((c) => c.close()));
    }
  });

  it('a peer that exits is named in the error of the rank waiting for it', async () => {
    const world = await localWorld(2);
    await world[1]!.close();
    await assert.rejects(world[0]!.allReduce(new Float64Array(3)), /rank 1 closed its connection/);
    await world[0]!.close();
  });
});
