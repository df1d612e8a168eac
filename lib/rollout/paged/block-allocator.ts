// A fixed pool of KV blocks with a free list and reference counts. Block ids index the device
// pool (block b holds token slots b x blockSize .. b x blockSize + blockSize - 1). A block is
// free when nothing holds it; every holder (a sequence's block table, the prefix cache) holds
// one reference.
import { RolloutError } from '../types.js';

export class BlockAllocator {
  readonly blockSize: number;
  private cap: number;
  private refs: Int32Array;
  /** Free block ids; the top of the stack is handed out first. */
  private freeList: number[] = [];
  private isFree: Uint8Array;

  constructor(capacity: number, blockSize: number) {
    if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new RolloutError(`blockSize must be an integer >= 1, got ${blockSize}`);
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new RolloutError(`capacity must be an integer >= 0 (blocks), got ${capacity}`);
    this.blockSize = blockSize;
    this.cap = 0;
    this.refs = new Int32Array(0);
    this.isFree = new Uint8Array(0);
    this.resize(capacity);
  }

  /** Blocks in the pool. */
  get capacity(): number { return this.cap; }

  /** Blocks nothing holds. */
  get free(): number { return this.freeList.length; }

  /** Blocks something holds: capacity - free. */
  get used(): number { return this.cap - this.freeList.length; }

  /** References held on block b (0 when free). */
  refCount(b: number): number {
    this.check(b);
    return this.refs[b];
  }

  /** Takes a free block with one reference, or null when none is free. */
  tryAllocate(): number | null {
    const b = this.freeList.pop();
    if (b === undefined) return null;
    this.isFree[b] = 0;
    this.refs[b] = 1;
    return b;
  }

  /** Takes a free block with one reference; throws when the pool is exhausted. */
  allocate(): number {
    const b = this.tryAllocate();
    if (b === null) throw new RolloutError(`the KV pool is exhausted (${this.cap} blocks of ${this.blockSize} tokens, none free)`);
    return b;
  }

  /** Adds a reference to a block something already holds (sharing it). */
  retain(b: number): void {
    this.check(b);
    if (this.refs[b] < 1) throw new RolloutError(`retain of free KV block ${b}`);
    this.refs[b]++;
  }

  /** Drops a reference; returns true when that was the last and the block is free again. */
  release(b: number): boolean {
    this.check(b);
    if (this.refs[b] < 1) throw new RolloutError(`release of free KV block ${b} (released twice?)`);
    if (--this.refs[b] > 0) return false;
    this.isFree[b] = 1;
    this.freeList.push(b);
    return true;
  }

  /**
   * Re-sizes the pool (between phases: shrink or free it for training, grow it back for
   * rollouts). Growing adds free blocks at the end; shrinking removes blocks capacity..old-1,
   * which must all be free. Block ids below the new capacity keep their contents.
   */
  resize(capacity: number): void {
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new RolloutError(`capacity must be an integer >= 0 (blocks), got ${capacity}`);
    if (capacity < this.cap) {
      let held = 0;
      for (let b = capacity; b < this.cap; b++) if (this.refs[b] > 0) held++;
      if (held > 0) throw new RolloutError(`cannot shrink the KV pool to ${capacity} blocks: ${held} of blocks ${capacity}..${this.cap - 1} are still held; finish or preempt the running sequences and release the prefix cache first`);
      this.freeList = this.freeList.filter((b) => b < capacity);
    }
    const refs = new Int32Array(capacity);
    refs.set(this.refs.subarray(0, Math.min(capacity, this.cap)));
    const isFree = new Uint8Array(capacity);
    isFree.set(this.isFree.subarray(0, Math.min(capacity, this.cap)));
    // new blocks go under the existing free ones (handed out last), lowest id on top of them
    const added: number[] = [];
    for (let b = capacity - 1; b >= this.cap; b--) { added.push(b); isFree[b] = 1; }
    this.freeList = [...added, ...this.freeList];
    this.refs = refs;
    this.isFree = isFree;
    this.cap = capacity;
  }

  /**
   * Checks the allocator against the holders' own counts (`held[b]` = references the caller
   * knows of on block b): refcount == held, free iff refcount 0, no duplicate in the free
   * list, free + used == capacity. Throws on the first violation.
   */
  audit(held: Int32Array): void {
    if (held.length !== this.cap) throw new RolloutError(`audit: ${held.length} counts for ${this.cap} blocks`);
    const seen = new Uint8Array(this.cap);
    for (const b of this.freeList) {
      if (seen[b]) throw new RolloutError(`audit: block ${b} is twice in the free list`);
      seen[b] = 1;
    }
    let free = 0;
    for (let b = 0; b < this.cap; b++) {
      if (this.refs[b] !== held[b]) throw new RolloutError(`audit: block ${b} has refcount ${this.refs[b]} but ${held[b]} holders`);
      const f = this.refs[b] === 0;
      if (f !== (this.isFree[b] === 1) || f !== (seen[b] === 1)) throw new RolloutError(`audit: block ${b} refcount ${this.refs[b]} but ${seen[b] ? '' : 'not '}in the free list`);
      if (f) free++;
    }
    if (free + this.used !== this.cap || free !== this.freeList.length) throw new RolloutError(`audit: free ${free} + used ${this.used} != capacity ${this.cap}`);
  }

  private check(b: number): void {
    if (!Number.isInteger(b) || b < 0 || b >= this.cap) throw new RolloutError(`KV block ${b} is outside the pool (0..${this.cap - 1})`);
  }
}
