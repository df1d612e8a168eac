// What every backend of the collective interface must do, against a host reference: all-reduce
// sum (in rank order, bit for bit) and max of f32 and f64 on every rank; reduce-scatter and
// all-gather with uneven counts (one rank with none); broadcast of bytes from a rank other than
// 0; the JSON helpers; barrier. Used by the CPU backend's and the NCCL backend's tests.
import assert from 'node:assert/strict';
import { allGatherJson, allReduceNumbers, broadcastJson, partOffsets, splitCounts, type Collective } from '../../lib/dist/collective.js';
import type { Rng } from '../helpers/random.js';

function inputs(n: number, len: number, rng: Rng, Arr: Float32ArrayConstructor | Float64ArrayConstructor) {
  return Array.from({ length: n }, () => Arr.from(Array.from({ length: len }, () => rng.uniform(-1, 1) * 10 ** Math.floor(rng.uniform(-3, 3)))));
}

/** All-reduce sum and max of f32 and f64 arrays of random lengths on a world. */
export async function checkAllReduce(world: Collective[], rng: Rng): Promise<void> {
  const N = world.length;
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
}

/** Reduce-scatter and all-gather with uneven counts, broadcast, the JSON helpers and barrier on a world of 3. */
export async function checkUnevenAndHelpers(world: Collective[], rng: Rng): Promise<void> {
  const N = world.length;
  assert.equal(N, 3);
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
  // a rank with no part (ZeRO's last shard of a small bucket)
  const none = [len, 0, 0];
  const o2 = none.map((c) => new Float32Array(c));
  await Promise.all(world.map((c, r) => c.reduceScatter(xs[r]!, o2[r]!, { counts: none })));
  const g2 = world.map(() => new Float32Array(len));
  await Promise.all(world.map((c, r) => c.allGather(o2[r]!, g2[r]!, none)));
  for (const g of g2) assert.deepEqual(g, o2[0]);
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
}
