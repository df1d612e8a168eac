// Random operations on the KV pool alone (seeded; MURPHY_SEED replays): tables that grow,
// fork, copy on write and are freed, full blocks cached and hit, cached blocks evicted, the
// cache released and the pool re-sized. After every operation the audit holds (refcount ==
// tables holding the block + the cache's hold, free iff unheld, free + used == capacity), and
// every table's blocks hold the tokens written for it (a simulated KV store, copies included).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { KvPool, slotOf, type BlockCopy, type CacheEntry } from '../../../lib/rollout/paged/index.js';
import { Rng, testSeed } from '../../helpers/random.js';

interface T { tokens: number[]; table: number[]; cached: number; last: CacheEntry | null }

it('random pool operations keep reference counts, the free list and block contents right', () => {
  const seed = testSeed('paged KV pool operations');
  const rng = new Rng(seed);
  for (let round = 0; round < 6; round++) {
    const B = 1 + rng.int(6);
    let pool = new KvPool({ blocks: 4 + rng.int(40), blockSize: B });
    let store = new Int32Array(pool.capacity * B).fill(-1);
    const seqs: T[] = [];
    const where = (op: string) => `seed ${seed}, round ${round}, block ${B}: after ${op}`;
    const check = (op: string) => {
      pool.audit(seqs.map((s) => s.table));
      for (const s of seqs) {
        for (let p = 0; p < s.tokens.length; p++) assert.equal(store[slotOf(s.table, p, B)], s.tokens[p], `${where(op)}: position ${p}`);
      }
    };
    const write = (s: T, extra: number[]) => {
      const copies: BlockCopy[] = [];
      if (!pool.append(s.table, s.tokens.length, extra.length, copies)) return false;
      for (const c of copies) store.copyWithin(c.dst * B, c.src * B, (c.src + 1) * B);
      extra.forEach((t, i) => { store[slotOf(s.table, s.tokens.length + i, B)] = t; });
      s.tokens.push(...extra);
      return true;
    };
    for (let op = 0; op < 300; op++) {
      const u = rng.next();
      const s = seqs.length > 0 ? seqs[rng.int(seqs.length)] : undefined;
      let name: string;
      if (u < 0.25 || s === undefined) {
        name = 'new sequence';
        // start from a cached prefix of some earlier tokens (a hit), or from nothing
        const base = s !== undefined && rng.next() < 0.5 ? s.tokens.slice(0, rng.int(s.tokens.length + 1)) : [];
        const hits = pool.cache.match(base, Math.floor(base.length / B));
        for (const e of hits) pool.retain(e.block);
        const t: T = { tokens: base.slice(0, hits.length * B), table: hits.map((e) => e.block), cached: hits.length, last: hits.at(-1) ?? null };
        seqs.push(t);
        if (!write(t, Array.from({ length: rng.int(3 * B) }, () => rng.int(4)))) name += ' (no room)';
      } else if (u < 0.55) {
        name = 'append';
        write(s, Array.from({ length: 1 + rng.int(2 * B) }, () => rng.int(4)));
      } else if (u < 0.65) {
        name = 'fork';
        seqs.push({ tokens: [...s.tokens], table: pool.fork(s.table), cached: s.cached, last: s.last });
      } else if (u < 0.8) {
        name = 'cache full blocks';
        while (s.cached < Math.floor(s.tokens.length / B)) s.last = pool.register(s.last, s.tokens, s.table, s.cached++);
      } else if (u < 0.95) {
        name = 'free';
        pool.freeTable(s.table);
        seqs.splice(seqs.indexOf(s), 1);
      } else {
        name = 'release cache';
        pool.releaseCached();
        for (const t of seqs) { t.cached = 0; t.last = null; }
        if (seqs.length === 0) {
          name = 'resize';
          const cap = 1 + rng.int(40);
          pool.resize(cap);
          const grown = new Int32Array(cap * B).fill(-1);
          grown.set(store.subarray(0, Math.min(store.length, grown.length)));
          store = grown;
        }
      }
      check(name);
    }
    for (const t of seqs) pool.freeTable(t.table);
    seqs.length = 0;
    pool.releaseCached();
    check('the end');
    assert.equal(pool.alloc.free, pool.capacity, where('the end'));
    pool = undefined as unknown as KvPool;
  }
});
