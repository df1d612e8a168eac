// The KV pool as the scheduler sees it: the block allocator, the prefix cache over it, and
// the operations on sequences' block tables (grow, fork, copy-on-write, free), keeping every
// block's reference count equal to the tables holding it plus the cache's hold.
import { RolloutError } from '../types.js';
import { BlockAllocator } from './block-allocator.js';
import { blocksFor, type BlockCopy } from './block-table.js';
import { kvBlocksForMemory, type KvBudgetOptions } from './memory.js';
import { PrefixCache, type CacheEntry } from './prefix-cache.js';

export interface KvPoolOptions {
  /** Blocks in the pool (kvBlocksForMemory gives it from a byte budget). */
  blocks: number;
  /** Tokens per block. Default 16. */
  blockSize?: number;
  /** Bytes of one block on the device, for reporting memory given back. Default 0 (unknown). */
  bytesPerBlock?: number;
}

export const DEFAULT_BLOCK_SIZE = 16;

export interface ReleasedMemory {
  blocks: number;
  bytes: number;
}

export class KvPool {
  readonly alloc: BlockAllocator;
  readonly cache: PrefixCache;
  readonly blockSize: number;
  readonly bytesPerBlock: number;

  constructor(o: KvPoolOptions) {
    this.blockSize = o.blockSize ?? DEFAULT_BLOCK_SIZE;
    this.alloc = new BlockAllocator(o.blocks, this.blockSize);
    this.cache = new PrefixCache(this.alloc);
    this.bytesPerBlock = o.bytesPerBlock ?? 0;
  }

  /** A pool of the blocks that fit in a device memory budget (kvBlocksForMemory). */
  static forMemory(o: KvBudgetOptions): KvPool {
    const b = kvBlocksForMemory(o);
    return new KvPool({ blocks: b.blocks, blockSize: o.blockSize, bytesPerBlock: b.bytesPerBlock });
  }

  get capacity(): number { return this.alloc.capacity; }

  /** Blocks a sequence can get now: free ones plus cached ones nobody holds (evicted on demand). */
  get available(): number { return this.alloc.free + this.cache.evictable; }

  /** A block with one reference, evicting the least recently used cached block when none is free. */
  allocate(): number | null {
    const b = this.alloc.tryAllocate();
    if (b !== null) return b;
    if (this.cache.evictOne() === null) return null;
    return this.alloc.tryAllocate();
  }

  /** A sequence takes a reference on a block it shares (a cache hit, a fork). */
  retain(b: number): void {
    this.alloc.retain(b);
    this.cache.touched(b);
  }

  /** A sequence drops its reference. */
  release(b: number): void {
    if (!this.alloc.release(b)) this.cache.touched(b);
  }

  /** Frees a table's blocks, last block first (so a sequence's tail is evicted before its prefix). */
  freeTable(table: number[]): void {
    for (let i = table.length - 1; i >= 0; i--) this.release(table[i]);
    table.length = 0;
  }

  /** A child table sharing every block of `table` by reference. */
  fork(table: readonly number[]): number[] {
    for (const b of table) this.retain(b);
    return [...table];
  }

  /**
   * Blocks that writing positions start .. start + count - 1 into `table` takes: the new
   * blocks past its end, plus one when the last block is partial and shared (copy-on-write).
   */
  blocksToAppend(table: readonly number[], start: number, count: number): number {
    return Math.max(0, blocksFor(start + count, this.blockSize) - table.length) + (this.mustCopy(table, start) ? 1 : 0);
  }

  /** The most tokens (<= count) that can be appended at `start` with `available` blocks. */
  fitAppend(table: readonly number[], start: number, count: number, available = this.available): number {
    if (this.blocksToAppend(table, start, count) <= available) return count;
    const room = (table.length + available - (this.mustCopy(table, start) ? 1 : 0)) * this.blockSize - start;
    return Math.max(0, Math.min(count, room));
  }

  /**
   * Makes `table` hold positions start .. start + count - 1: copies a shared partial last
   * block (pushing the copy onto `copies`) and appends new blocks. All or nothing: returns
   * false and changes nothing when the pool cannot supply the blocks.
   */
  append(table: number[], start: number, count: number, copies: BlockCopy[]): boolean {
    if (this.blocksToAppend(table, start, count) > this.available) return false;
    if (this.mustCopy(table, start)) {
      const dst = this.allocate()!;
      const src = table[table.length - 1];
      copies.push({ src, dst });
      this.release(src);
      table[table.length - 1] = dst;
    }
    const need = blocksFor(start + count, this.blockSize);
    while (table.length < need) table.push(this.allocate()!);
    return true;
  }

  /** Caches block `table[i]`, full and computed, holding tokens[i*B .. (i+1)*B) after `parent`. */
  register(parent: CacheEntry | null, tokens: readonly number[], table: readonly number[], i: number): CacheEntry {
    const e = this.cache.insert(parent, tokens, i * this.blockSize, table[i]);
    this.cache.touched(table[i]);
    return e;
  }

  /**
   * Drops the prefix cache (after a weight update, or before the training phase): every
   * cached block no sequence holds is freed. Returns what was given back.
   */
  releaseCached(): ReleasedMemory {
    const blocks = this.cache.clear();
    return { blocks, bytes: blocks * this.bytesPerBlock };
  }

  /** Re-sizes the pool between phases (see BlockAllocator.resize); the prefix cache should be released first. */
  resize(blocks: number): void {
    this.alloc.resize(blocks);
  }

  /**
   * Checks that every block's reference count equals the tables holding it plus the cache's
   * hold, and the allocator's own invariants (free iff unheld, free + used == capacity).
   */
  audit(tables: Iterable<readonly number[]>): void {
    const held = new Int32Array(this.capacity);
    for (const t of tables) {
      for (const b of t) {
        if (!(b >= 0 && b < this.capacity)) throw new RolloutError(`audit: a table holds block ${b}, outside the pool`);
        held[b]++;
      }
    }
    for (let b = 0; b < this.capacity; b++) if (this.cache.holds(b)) held[b]++;
    this.alloc.audit(held);
  }

  private mustCopy(table: readonly number[], start: number): boolean {
    return start % this.blockSize !== 0 && table.length > 0 && start < table.length * this.blockSize &&
      this.alloc.refCount(table[table.length - 1]) > 1;
  }
}
