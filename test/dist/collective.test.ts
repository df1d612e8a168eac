// The CPU backend of the collective interface against a host reference: sums in rank order,
// max, reduce-scatter and all-gather with uneven counts, broadcast, bit-identical results on
// every rank, out-of-order calls and a closed peer reported as errors.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { allGatherJson, allReduceNumbers, broadcastJson, partOffsets, splitCounts } from '../../lib/dist/collective.js';
import { Rng, testSeed } from '../helpers/random.js';
import { closeWorlds, localWorld } from './helpers.js';

const seed = testSeed('dist/collective');

function inputs(n: number, len: number, rng: Rng, Arr: Float32ArrayConstructor | Float64ArrayConstructor) {
  return Array.from({ length: n }, () => Arr.from({ length: len }, () => rng.uniform(-1, 1) * 10 ** Math.floor(rng.uniform(-3, 3))));
}

after(closeWorlds);

describe('CPU collective (loopback TCP)', () => {
  it('all-reduce sum/max equals the host reference (rank-order sum) bit for bit on every rank', async () => {
    const rng = new Rng(seed);
    for (const N of [2, 3]) {
      const world = await localWorld(N);
      try {
        for (const Arr of [Float32Array, Float64Array]) {
          const len = 1 + Math.floor(rng.uniform(0, 1000));
          const xs = inputs(N, len, rng, Arr);
          const ref = new Arr(len);
          const mx = new Arr(len).fill(-Infinity);
          for (let i = 0; i < len; i++) {
            let a = xs[0]![i]!;
            for (let r = 1; r < N; r++) a = Arr === Float32Array ? Math.fround(a + xs[r]![i]!) : a + xs[r]![i]!;
            ref[i] = a;
            for (let r = 0; r < N; r++) mx[i] = Math.max(mx[i]!, xs[r]![i]!);
          }
          const bufs = xs.map((x) => x.slice());
          await Promise.all(world.map((c, r) => c.allReduce(bufs[r]!)));
          for (const b of bufs) assert.deepEqual(b, ref);
          const m = xs.map((x) => x.slice());
          await Promise.all(world.map((c, r) => c.allReduce(m[r]!, 'max')));
          for (const b of m) assert.deepEqual(b, mx);
        }
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
      const len = 50 + Math.floor(rng.uniform(0, 50));
      const counts = splitCounts(len, N);
      counts[0]! += 3;
      counts[2]! -= 3;
      const off = partOffsets(counts);
      const xs = inputs(N, len, rng, Float32Array);
      const outs = counts.map((c) => new Float32Array(c));
      await Promise.all(world.map((c, r) => c.reduceScatter(xs[r]!, outs[r]!, { counts })));
      for (let r = 0; r < N; r++) {
        for (let i = 0; i < counts[r]!; i++) assert.equal(outs[r]![i], Math.fround(Math.fround(xs[0]![off[r]! + i]! + xs[1]![off[r]! + i]!) + xs[2]![off[r]! + i]!));
      }
      const gathered = world.map(() => new Float32Array(len));
      await Promise.all(world.map((c, r) => c.allGather(outs[r]!, gathered[r]!, counts)));
      const cat = new Float32Array(len);
      outs.forEach((o, r) => cat.set(o, off[r]!));
      for (const g of gathered) assert.deepEqual(g, cat);
      const bytes = world.map((_, r) => (r === 1 ? new Uint8Array([1, 2, 3, 250]) : new Uint8Array(4)));
      await Promise.all(world.map((c, r) => c.broadcast(bytes[r]!, 1)));
      for (const b of bytes) assert.deepEqual([...b], [1, 2, 3, 250]);
      const js = await Promise.all(world.map((c, r) => allGatherJson(c, { r, s: 'x'.repeat(r) })));
      for (const j of js) assert.deepEqual(j, [{ r: 0, s: '' }, { r: 1, s: 'x' }, { r: 2, s: 'xx' }]);
      const bj = await Promise.all(world.map((c, r) => broadcastJson(c, r === 0 ? { dir: '/a/b' } : undefined)));
      for (const b of bj) assert.deepEqual(b, { dir: '/a/b' });
      const sums = await Promise.all(world.map((c, r) => allReduceNumbers(c, [r, 1])));
      for (const s of sums) assert.deepEqual(s, [3, 3]);
      await Promise.all(world.map((c) => c.barrier()));
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
