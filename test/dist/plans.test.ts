// Property tests of the bucket plan, the shard plan and re-sharding, over random sizes (seeded).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { flatLayout, planBuckets } from '../../lib/dist/buckets.js';
import { assembleRange, planShards, rangeCounts } from '../../lib/dist/shards.js';
import { Rng, testSeed } from '../helpers/random.js';

const seed = testSeed('dist/plans');

describe('bucket plan', () => {
  it('covers the parameters in order, whole, within the byte size unless one parameter is larger', () => {
    const rng = new Rng(seed);
    for (let trial = 0; trial < 200; trial++) {
      const n = rng.int(30);
      const params = Array.from({ length: n }, (_, i) => ({ name: `p${i}`, numel: rng.int(5) === 0 ? 0 : 1 + rng.int(5000) }));
      const { params: flat, total } = flatLayout(params);
      const cap = 4 * (1 + rng.int(8000));
      const b = planBuckets(flat, cap, 4);
      assert.deepEqual(b.flatMap((x) => x.params), params.map((_, i) => i));
      let at = 0;
      for (const x of b) {
        assert.equal(x.begin, at);
        assert.equal(x.end, flat[x.params.at(-1)!]!.offset + flat[x.params.at(-1)!]!.numel);
        if (x.params.length > 1) assert.ok((x.end - x.begin) * 4 <= cap);
        at = x.end;
      }
      assert.equal(at, total);
      // greedy: the next bucket's first parameter did not fit in the previous bucket
      for (let i = 1; i < b.length; i++) assert.ok((b[i - 1]!.end - b[i - 1]!.begin + flat[b[i]!.params[0]!]!.numel) * 4 > cap);
    }
  });
});

describe('shard plan', () => {
  it('contiguous, covering, aligned and balanced', () => {
    const rng = new Rng(seed + 1);
    for (let trial = 0; trial < 500; trial++) {
      const total = rng.int(3) === 0 ? rng.int(100) : rng.int(1_000_000);
      const W = 1 + rng.int(9);
      const align = [1, 8, 64, 128][rng.int(4)]!;
      const p = planShards(total, W, align);
      assert.equal(p.ranges[0]!.begin, 0);
      assert.equal(p.ranges[W - 1]!.end, total);
      for (let r = 0; r < W; r++) {
        const x = p.ranges[r]!;
        assert.ok(x.end >= x.begin);
        if (r > 0) assert.equal(x.begin, p.ranges[r - 1]!.end);
        if (x.begin < total) assert.equal(x.begin % align, 0);
      }
      const sizes = p.ranges.map((x) => x.end - x.begin);
      assert.ok(Math.max(...sizes) - Math.min(...sizes) < 2 * align, `${JSON.stringify(sizes)} align ${align}`);
      const b0 = rng.int(total + 1);
      const b1 = b0 + rng.int(total - b0 + 1);
      const c = rangeCounts(p, b0, b1);
      assert.equal(c.reduce((a, v) => a + v, 0), b1 - b0);
    }
  });

  it('re-sharding from any world size to any other gives back the same vector', () => {
    const rng = new Rng(seed + 2);
    for (let trial = 0; trial < 100; trial++) {
      const total = rng.int(20_000);
      const data = Float32Array.from({ length: total }, () => rng.normal());
      const from = planShards(total, 1 + rng.int(8), [1, 64][rng.int(2)]!);
      const to = planShards(total, 1 + rng.int(8), [1, 64][rng.int(2)]!);
      const pieces = from.ranges.map((r) => ({ begin: r.begin, data: data.slice(r.begin, r.end) }));
      for (const r of to.ranges) assert.deepEqual(assembleRange(pieces, r), data.subarray(r.begin, r.end));
      if (total > 10 && from.worldSize > 1) {
        const missing = pieces.filter((_, i) => i !== 1 || pieces[1]!.data.length === 0);
        if (missing.length < pieces.length) assert.throws(() => assembleRange(missing, { begin: 0, end: total }), /re-sharding: element \d+ of \[0, \d+\) is in no shard/);
      }
    }
  });
});
