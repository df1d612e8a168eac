// The prefix cache: chained block keys, longest block-aligned match, LRU eviction of blocks no
// sequence holds, and release of the whole cache.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KvPool } from '../../../lib/rollout/paged/index.js';

const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

/** A sequence that computed `tokens` into fresh blocks and cached its full blocks. */
function computed(pool: KvPool, tokens: number[]): number[] {
  const t: number[] = [];
  assert.ok(pool.append(t, 0, tokens.length, []));
  let parent = null;
  for (let i = 0; i < Math.floor(tokens.length / pool.blockSize); i++) parent = pool.register(parent, tokens, t, i);
  return t;
}

describe('PrefixCache', () => {
  it('matches the longest cached block-aligned prefix, whole blocks only', () => {
    const pool = new KvPool({ blocks: 16, blockSize: 4 });
    const a = range(0, 14); // blocks [0..3] [4..7] [8..11], partial [12, 13] not cached
    const t = computed(pool, a);
    assert.equal(pool.cache.size, 3);
    const same = pool.cache.match([...range(0, 10), 99, 98, 97, 96], 10);
    assert.deepEqual(same.map((e) => e.block), t.slice(0, 2), 'diverges inside block 3: two blocks');
    assert.deepEqual(pool.cache.match(range(0, 20), 10).map((e) => e.block), t.slice(0, 3));
    assert.deepEqual(pool.cache.match(range(0, 20), 1).map((e) => e.block), t.slice(0, 1), 'capped at maxBlocks');
    assert.deepEqual(pool.cache.match([1, 1, 2, 3], 1), []);
  });

  it('the same tokens after a different prefix are a different block', () => {
    const pool = new KvPool({ blocks: 16, blockSize: 2 });
    computed(pool, [1, 2, 7, 7]);
    assert.equal(pool.cache.match([3, 4, 7, 7], 2).length, 0);
    assert.equal(pool.cache.match([1, 2, 7, 7], 2).length, 2);
    const u = computed(pool, [3, 4, 7, 7]);
    assert.deepEqual(pool.cache.match([3, 4, 7, 7], 2).map((e) => e.block), u);
  });

  it('a prefix computed twice is cached once; the second copy is freed with its sequence', () => {
    const pool = new KvPool({ blocks: 8, blockSize: 4 });
    const t1 = computed(pool, range(0, 8));
    const t2 = computed(pool, range(0, 8));
    assert.equal(pool.cache.size, 2);
    pool.audit([t1, t2]);
    pool.freeTable(t2);
    assert.equal(pool.alloc.free, 6, 'the duplicate blocks are free again');
    pool.freeTable(t1);
    assert.equal(pool.cache.evictable, 2);
    pool.audit([]);
  });

  it('evicts cached blocks nobody holds, least recently released first, tail before prefix', () => {
    const pool = new KvPool({ blocks: 6, blockSize: 2 });
    const a = computed(pool, [1, 1, 2, 2, 3, 3]);
    const b = computed(pool, [5, 5, 6, 6]);
    assert.equal(pool.alloc.free, 1);
    assert.equal(pool.cache.evictable, 0, 'held by their sequences');
    assert.equal(pool.available, 1);
    const aBlocks = [...a];
    pool.freeTable(a); // a's blocks released tail first: [3,3] then [2,2] then [1,1]
    assert.deepEqual(a, [], 'freeTable empties the table');
    pool.freeTable(b);
    assert.equal(pool.available, 6);
    const taken = [pool.allocate(), pool.allocate(), pool.allocate()];
    assert.deepEqual(taken.slice(1), [aBlocks[2], aBlocks[1]], 'after the free block, a\'s tail goes first');
    assert.equal(pool.cache.match([1, 1, 2, 2, 3, 3], 3).length, 1);
    assert.equal(pool.cache.match([5, 5, 6, 6], 2).length, 2);
    // a hit makes a block held again: not evictable
    const hit = pool.cache.match([5, 5, 6, 6], 2).map((e) => e.block);
    for (const blk of hit) pool.retain(blk);
    assert.equal(pool.cache.evictable, 1);
    assert.equal(pool.allocate(), aBlocks[0]);
    assert.equal(pool.allocate(), null, 'held cached blocks are never evicted');
    pool.audit([taken, [aBlocks[0]], hit].map((t) => t.filter((x): x is number => x !== null)));
  });

  it('releaseCached frees every cached block no sequence holds and reports the bytes', () => {
    const pool = new KvPool({ blocks: 8, blockSize: 4, bytesPerBlock: 1000 });
    const keep = computed(pool, range(0, 8));
    const gone = computed(pool, range(100, 112));
    pool.freeTable(gone);
    assert.equal(pool.alloc.free, 3);
    assert.deepEqual(pool.releaseCached(), { blocks: 3, bytes: 3000 });
    assert.equal(pool.cache.size, 0);
    assert.equal(pool.alloc.free, 6);
    assert.equal(pool.cache.match(range(0, 8), 2).length, 0, 'nothing matches after a release (stale weights)');
    pool.audit([keep]);
    pool.freeTable(keep);
    assert.equal(pool.alloc.free, 8);
    pool.resize(2);
    assert.equal(pool.capacity, 2);
  });
});
