// Automatic prefix caching of full KV blocks, keyed by a chained hash (vLLM's scheme): a full
// block's key is hash(parent block's key, the block's tokens), so one key names the whole
// prefix up to the end of that block. Lookups walk a new sequence's blocks from the start and
// stop at the first block not cached: the longest cached block-aligned prefix. Hash
// collisions cannot give a wrong hit: an entry matches only with the same parent entry and
// the same tokens, compared exactly.
//
// The cache holds one reference on each cached block (BlockAllocator). A cached block that no
// sequence holds (refcount 1) is evictable; eviction takes the least recently released first.
import { hashIds } from '../../murphy/rng.js';
import type { BlockAllocator } from './block-allocator.js';

/** One cached full block. */
export interface CacheEntry {
  readonly block: number;
  readonly parent: CacheEntry | null;
  readonly tokens: Int32Array;
  readonly key: number;
}

const ROOT_KEY = 0x2545f491;

function sameTokens(a: Int32Array, b: readonly number[], at: number): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[at + i]) return false;
  return true;
}

export class PrefixCache {
  private readonly byKey = new Map<number, CacheEntry[]>();
  private readonly byBlock = new Map<number, CacheEntry>();
  /** Cached blocks only the cache holds, least recently released first (Map keeps insertion order). */
  private readonly lru = new Map<number, CacheEntry>();

  constructor(private readonly alloc: BlockAllocator) {}

  /** Cached blocks. */
  get size(): number { return this.byBlock.size; }

  /** Cached blocks that no sequence holds: what eviction can free. */
  get evictable(): number { return this.lru.size; }

  /** Whether block b is in the cache (the cache then holds one reference on it). */
  holds(b: number): boolean { return this.byBlock.has(b); }

  /** The key of a block of `tokens[at .. at + blockSize)` under `parent`. */
  static key(parent: CacheEntry | null, tokens: readonly number[], at: number, blockSize: number): number {
    return hashIds(tokens.slice(at, at + blockSize), parent === null ? ROOT_KEY : parent.key);
  }

  /** The cached block holding tokens[at .. at + blockSize) after `parent`, if any. */
  lookup(parent: CacheEntry | null, tokens: readonly number[], at: number): CacheEntry | undefined {
    const bs = this.alloc.blockSize;
    if (at + bs > tokens.length) return undefined;
    const list = this.byKey.get(PrefixCache.key(parent, tokens, at, bs));
    return list?.find((e) => e.parent === parent && sameTokens(e.tokens, tokens, at));
  }

  /** The longest chain of cached blocks covering tokens from the start, at most maxBlocks long. */
  match(tokens: readonly number[], maxBlocks: number): CacheEntry[] {
    const out: CacheEntry[] = [];
    let parent: CacheEntry | null = null;
    for (let i = 0; i < maxBlocks; i++) {
      const e = this.lookup(parent, tokens, i * this.alloc.blockSize);
      if (e === undefined) break;
      out.push(e);
      parent = e;
    }
    return out;
  }

  /**
   * Caches `block`, a full block holding tokens[at .. at + blockSize) whose KV is computed.
   * When the same prefix is already cached (another sequence computed it too), returns that
   * entry and leaves `block` alone; otherwise the cache takes a reference on `block`.
   */
  insert(parent: CacheEntry | null, tokens: readonly number[], at: number, block: number): CacheEntry {
    const bs = this.alloc.blockSize;
    const existing = this.lookup(parent, tokens, at);
    if (existing !== undefined) return existing;
    const mine = this.byBlock.get(block);
    if (mine !== undefined) return mine; // the block is cached under another chain: keep that
    const e: CacheEntry = { block, parent, tokens: Int32Array.from(tokens.slice(at, at + bs)), key: PrefixCache.key(parent, tokens, at, bs) };
    const list = this.byKey.get(e.key);
    if (list === undefined) this.byKey.set(e.key, [e]);
    else list.push(e);
    this.byBlock.set(block, e);
    this.alloc.retain(block);
    return e;
  }

  /**
   * Tells the cache that block b's reference count changed (after a retain or release by a
   * sequence): a cached block left only to the cache becomes evictable (most recently
   * released last), one a sequence holds again is not.
   */
  touched(b: number): void {
    const e = this.byBlock.get(b);
    if (e === undefined) return;
    this.lru.delete(b);
    if (this.alloc.refCount(b) === 1) this.lru.set(b, e);
  }

  /** Frees the least recently released evictable block; returns its id, or null when none. */
  evictOne(): number | null {
    const first = this.lru.keys().next();
    if (first.done === true) return null;
    const b = first.value;
    this.drop(this.byBlock.get(b)!);
    return b;
  }

  /**
   * Drops every entry (after a weight update the cached KV is stale; before the training
   * phase the memory goes back). Blocks that sequences still hold stay allocated to them.
   * Returns how many blocks became free.
   */
  clear(): number {
    let freed = 0;
    for (const e of [...this.byBlock.values()]) if (this.drop(e)) freed++;
    return freed;
  }

  private drop(e: CacheEntry): boolean {
    const list = this.byKey.get(e.key)!;
    const i = list.indexOf(e);
    list.splice(i, 1);
    if (list.length === 0) this.byKey.delete(e.key);
    this.byBlock.delete(e.block);
    this.lru.delete(e.block);
    return this.alloc.release(e.block);
  }
}
