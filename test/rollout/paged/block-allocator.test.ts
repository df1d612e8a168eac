// The KV block allocator, the memory-budget helpers and block-table operations (fork, copy-on-write).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { modelShapeFromHfConfig } from '../../../lib/gpu/memory-plan.js';
import { BlockAllocator, KvPool, kvBlockBytes, kvBlocksForMemory, kvBytesPerToken, kvShapeOf, slotMapping, type BlockCopy } from '../../../lib/rollout/paged/index.js';

const QWEN3_06B = { numLayers: 28, numKvHeads: 8, headDim: 128, dtypeBytes: 2 };

describe('BlockAllocator', () => {
  it('allocates, shares and frees blocks by reference count', () => {
    const a = new BlockAllocator(4, 16);
    assert.equal(a.capacity, 4);
    assert.equal(a.free, 4);
    const got = [a.allocate(), a.allocate(), a.allocate(), a.allocate()];
    assert.deepEqual([...got].sort(), [0, 1, 2, 3]);
    assert.equal(a.free, 0);
    assert.equal(a.tryAllocate(), null);
    assert.throws(() => a.allocate(), /^RolloutError: the KV pool is exhausted \(4 blocks of 16 tokens, none free\)$/);
    a.retain(got[0]);
    assert.equal(a.refCount(got[0]), 2);
    assert.equal(a.release(got[0]), false);
    assert.equal(a.free, 0);
    assert.equal(a.release(got[0]), true);
    assert.equal(a.free, 1);
    assert.equal(a.allocate(), got[0], 'the freed block is handed out again');
  });

  it('refuses double releases, retains of free blocks and ids outside the pool', () => {
    const a = new BlockAllocator(2, 4);
    const b = a.allocate();
    a.release(b);
    assert.throws(() => a.release(b), /release of free KV block \d \(released twice\?\)/);
    assert.throws(() => a.retain(b), /retain of free KV block/);
    assert.throws(() => a.retain(7), /KV block 7 is outside the pool \(0\.\.1\)/);
    assert.throws(() => new BlockAllocator(2, 0), /blockSize must be an integer >= 1, got 0/);
  });

  it('grows, and shrinks only over free blocks', () => {
    const a = new BlockAllocator(2, 4);
    const x = a.allocate(), y = a.allocate();
    a.resize(4);
    assert.equal(a.capacity, 4);
    assert.equal(a.free, 2);
    assert.deepEqual([a.allocate(), a.allocate()].sort(), [2, 3]);
    assert.throws(() => a.resize(2), /^RolloutError: cannot shrink the KV pool to 2 blocks: 2 of blocks 2\.\.3 are still held; finish or preempt/);
    a.release(2); a.release(3);
    a.resize(2);
    assert.equal(a.free, 0);
    assert.equal(a.refCount(x) + a.refCount(y), 2, 'blocks below the new capacity are kept');
    a.release(x); a.release(y);
    a.resize(0);
    assert.equal(a.capacity, 0);
    a.audit(new Int32Array(0));
  });

  it('audit catches a reference count that does not match its holders', () => {
    const a = new BlockAllocator(3, 4);
    const b = a.allocate();
    const held = new Int32Array(3);
    held[b] = 1;
    a.audit(held);
    held[b] = 2;
    assert.throws(() => a.audit(held), /block \d has refcount 1 but 2 holders/);
  });
});

describe('KV memory budget', () => {
  it('bytes per token = 2 x kv heads x head dim x layers x dtype bytes', () => {
    assert.equal(kvBytesPerToken(QWEN3_06B), 2 * 8 * 128 * 28 * 2);
    assert.equal(kvBytesPerToken(QWEN3_06B), 114_688);
    assert.equal(kvBlockBytes(QWEN3_06B, 16), 16 * 114_688);
  });

  it('takes the shape from config.json through the GPU memory plan\'s reader', () => {
    const cfg = { model_type: 'qwen3', vocab_size: 151936, hidden_size: 1024, intermediate_size: 3072, num_hidden_layers: 28,
      num_attention_heads: 16, num_key_value_heads: 8, head_dim: 128, tie_word_embeddings: true };
    assert.deepEqual(kvShapeOf(modelShapeFromHfConfig(cfg)), QWEN3_06B);
    assert.equal(kvBytesPerToken(kvShapeOf(modelShapeFromHfConfig(cfg), 4)), 2 * 114_688);
  });

  it('turns free memory after the training state into a block count', () => {
    const GiB = 2 ** 30;
    const b = kvBlocksForMemory({ freeBytes: 20 * GiB, reserveBytes: 2 * GiB, utilization: 0.9, blockSize: 16, shape: QWEN3_06B });
    assert.equal(b.blocks, Math.floor((0.9 * 18 * GiB) / (16 * 114_688)));
    assert.equal(b.bytes, b.blocks * b.bytesPerBlock);
    assert.equal(b.tokens, b.blocks * 16);
    assert.ok(b.bytes <= 0.9 * 18 * GiB && b.bytes + b.bytesPerBlock > 0.9 * 18 * GiB);
  });

  it('no room for one block is one line naming the sizes', () => {
    assert.throws(() => kvBlocksForMemory({ freeBytes: 3 * 2 ** 20, reserveBytes: 2 * 2 ** 20, blockSize: 16, shape: QWEN3_06B }),
      /^RolloutError: no room for a KV cache: 3\.0 MiB free, 2\.0 MiB reserved, one block of 16 tokens needs 1\.9 MiB; free device memory or lower the reserve$/);
    assert.throws(() => kvBlocksForMemory({ freeBytes: 1e9, utilization: 1.5, blockSize: 16, shape: QWEN3_06B }), /utilization must be in \(0, 1\]/);
    assert.throws(() => kvBytesPerToken({ ...QWEN3_06B, numKvHeads: 0 }), /numKvHeads must be an integer >= 1, got 0/);
  });
});

describe('block tables', () => {
  it('slot of position p = table[p / B] x B + p mod B', () => {
    assert.deepEqual(slotMapping([5, 2, 9], 2, 7, 4), [22, 23, 8, 9, 10, 11, 36]);
  });

  it('a fork shares every block; appending into the shared partial block copies it once per writer but the last', () => {
    const pool = new KvPool({ blocks: 8, blockSize: 4 });
    const copies: BlockCopy[] = [];
    const parent: number[] = [];
    assert.ok(pool.append(parent, 0, 10, copies)); // 10 tokens: 2 full blocks + a partial one
    assert.equal(parent.length, 3);
    assert.deepEqual(copies, []);
    const a = pool.fork(parent), b = pool.fork(parent);
    for (const blk of parent) assert.equal(pool.alloc.refCount(blk), 3);
    assert.ok(pool.append(a, 10, 1, copies));
    assert.deepEqual(copies, [{ src: parent[2], dst: a[2] }]);
    assert.notEqual(a[2], parent[2]);
    assert.deepEqual(a.slice(0, 2), parent.slice(0, 2), 'full blocks stay shared');
    assert.ok(pool.append(b, 10, 1, copies));
    assert.equal(copies.length, 2);
    assert.equal(pool.alloc.refCount(parent[2]), 1);
    assert.ok(pool.append(parent, 10, 1, copies), 'the last holder writes in place');
    assert.equal(copies.length, 2);
    assert.equal(pool.alloc.refCount(parent[0]), 3);
    pool.audit([parent, a, b]);
    // appending at a block boundary takes a new block, no copy
    assert.ok(pool.append(a, 11, 2, copies));
    assert.equal(a.length, 4);
    assert.equal(copies.length, 2);
    pool.audit([parent, a, b]);
    for (const t of [parent, a, b]) pool.freeTable(t);
    assert.equal(pool.alloc.free, 8);
    pool.audit([]);
  });

  it('append is all or nothing and fitAppend says how many tokens fit', () => {
    const pool = new KvPool({ blocks: 3, blockSize: 4 });
    const t: number[] = [];
    assert.equal(pool.fitAppend(t, 0, 20), 12);
    assert.equal(pool.append(t, 0, 13, []), false);
    assert.deepEqual(t, []);
    assert.equal(pool.alloc.free, 3);
    assert.ok(pool.append(t, 0, 6, []));
    const c = pool.fork(t);
    // c writing at 6 must copy its partial block: 1 block left, so the copy takes it and no more fits
    assert.equal(pool.blocksToAppend(c, 6, 1), 1);
    assert.equal(pool.fitAppend(c, 6, 5), 2);
    assert.equal(pool.fitAppend(c, 6, 5, 0), 0);
  });
});
