// A step plan as the device's flat arrays, and a pool sized from device memory.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { KvPool, Scheduler, planArrays, slotOf } from '../../../lib/rollout/paged/index.js';
import { range, setup, step } from './helpers.js';

it('flattens a step: tokens, positions and slots per sequence, offsets, context lengths, padded tables, sample rows', () => {
  const { s, model } = setup(64, 4, { maxModelLen: 256, tokenBudget: 12 });
  s.submit({ promptIds: range(1, 7), n: 3, maxTokens: 2, seed: 4 });
  step(s, model);
  s.submit({ promptIds: range(50, 68), maxTokens: 2, seed: 5 });
  s.submit({ promptIds: [9, 8], n: 2, maxTokens: 2, seed: 6 });
  const plan = s.schedule();
  // 3 decodes (copying the forks' shared partial block), then a 9-token chunk of the 18-token prompt
  assert.deepEqual(plan.seqs.map((q) => [q.kind, q.tokenIds.length, q.sampleIndices]), [['decode', 1, [0]], ['decode', 1, [1]], ['decode', 1, [2]], ['prefill', 9, []]]);
  const a = planArrays(plan);
  assert.equal(a.inputIds.length, 12);
  assert.deepEqual([...a.queryStartLoc], [0, 1, 2, 3, 12]);
  assert.deepEqual([...a.positions], [6, 6, 6, ...range(0, 9)]);
  assert.deepEqual([...a.inputIds.subarray(3)], range(50, 59));
  assert.deepEqual([...a.seqLens], [7, 7, 7, 9]);
  assert.equal(a.maxBlocks, 3);
  plan.seqs.forEach((q, i) => {
    const row = [...a.blockTables.subarray(i * 3, i * 3 + 3)];
    assert.deepEqual(row.slice(0, q.blockTable.length), [...q.blockTable]);
    assert.ok(row.slice(q.blockTable.length).every((b) => b === -1));
    for (let k = 0; k < q.tokenIds.length; k++) assert.equal(a.slotMapping[a.queryStartLoc[i] + k], slotOf(q.blockTable, q.start + k, 4));
  });
  assert.deepEqual([...a.logitsIndices], [0, 1, 2]);
  assert.deepEqual([...a.sampleRows], [0, 1, 2]);
  assert.equal(a.copies.length, 2 * plan.copies.length);
  assert.equal(plan.copies.length, 2);
  s.complete(plan, model.execute(plan));
  const p2 = s.schedule();
  const b = planArrays(p2);
  // the 18-token prompt's last chunk samples 1, the [9, 8] prompt forks 2 samples from one logits row
  const last = p2.seqs.filter((q) => q.sampleIndices.length > 0 && q.kind === 'prefill');
  assert.deepEqual(last.map((q) => q.sampleIndices), [[0], [0, 1]]);
  assert.deepEqual([...b.sampleIndices.subarray(-3)], [0, 0, 1]);
  const rows = [...b.sampleRows];
  assert.equal(rows.at(-1), rows.at(-2), 'both forks sample the same logits row');
  assert.equal(b.logitsIndices.at(-1), b.inputIds.length - 1);
});

it('a pool sized from device memory reports the bytes it gives back', () => {
  const shape = { numLayers: 2, numKvHeads: 2, headDim: 8, dtypeBytes: 2 }; // 128 bytes per token
  const pool = KvPool.forMemory({ freeBytes: 10_000, reserveBytes: 1_808, utilization: 1, blockSize: 4, shape });
  assert.equal(pool.capacity, 16); // 8192 / 512
  assert.equal(pool.bytesPerBlock, 512);
  const s = new Scheduler(pool, { maxModelLen: 64 });
  const t: number[] = [];
  pool.append(t, 0, 8, []);
  pool.register(null, range(0, 8), t, 0);
  pool.register(pool.cache.match(range(0, 8), 1)[0], range(0, 8), t, 1);
  pool.freeTable(t);
  assert.deepEqual(s.releaseCached(), { blocks: 2, bytes: 1024 });
});
