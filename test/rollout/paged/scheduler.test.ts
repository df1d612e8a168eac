// The continuous-batching scheduler on fixed scenarios: the token budget split between decodes
// and chunked prefill, finishing (stop, max tokens, the context), requests too large for the
// pool, preemption by recompute, forks and prefix-cache hits, and the pool between phases.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { drain, runAlone } from '../../../lib/rollout/paged/index.js';
import { range, setup, step, VOCAB } from './helpers.js';

describe('Scheduler', () => {
  it('chunks a prompt by the token budget and samples when the chunk reaches its end', () => {
    const { s, model } = setup(64, 4, { maxModelLen: 256, tokenBudget: 16 });
    const id = s.submit({ promptIds: range(1, 41), maxTokens: 3, seed: 9 });
    const p = [step(s, model), step(s, model), step(s, model)];
    assert.deepEqual(p.map((x) => x.seqs.map((q) => [q.kind, q.start, q.tokenIds.length, q.sampleIndices])), [
      [['prefill', 0, 16, []]], [['prefill', 16, 16, []]], [['prefill', 32, 8, [0]]],
    ]);
    assert.deepEqual(p[1].seqs[0].slots, range(16, 32).map((i) => p[1].seqs[0].blockTable[Math.floor(i / 4)] * 4 + (i % 4)));
    const d = step(s, model);
    assert.deepEqual(d.seqs.map((q) => [q.kind, q.start, q.tokenIds.length]), [['decode', 40, 1]]);
    step(s, model);
    assert.ok(s.isDone(id) && !s.hasWork);
    assert.deepEqual(s.result(id), runAlone({ promptIds: range(1, 41), maxTokens: 3, seed: 9 }, VOCAB, 256));
    assert.deepEqual(s.result(id)[0].finishReason, 'length');
  });

  it('gives every running sequence its decode token first, then prefill chunks take what the budget leaves', () => {
    const { s, model } = setup(64, 4, { maxModelLen: 256, tokenBudget: 8 });
    s.submit({ promptIds: [1, 2], n: 3, maxTokens: 50, seed: 1 });
    step(s, model); // prompt, then 3 samples
    s.submit({ promptIds: range(100, 130), maxTokens: 4, seed: 2 });
    const p = step(s, model);
    assert.deepEqual(p.seqs.map((q) => [q.kind, q.tokenIds.length]), [['decode', 1], ['decode', 1], ['decode', 1], ['prefill', 5]]);
    assert.deepEqual(p.counts, { prefillTokens: 5, decodeTokens: 3, prefillSaved: 0, cacheHitTokens: 0, preemptions: 0, copies: 2 });
    const q = step(s, model);
    assert.deepEqual(q.seqs.map((x) => [x.kind, x.start, x.tokenIds.length]), [['decode', 3, 1], ['decode', 3, 1], ['decode', 3, 1], ['prefill', 5, 5]]);
  });

  it('a budget smaller than the running decodes serves the oldest first', () => {
    const { s, model } = setup(64, 4, { maxModelLen: 256, tokenBudget: 2 });
    s.submit({ promptIds: [1], n: 3, maxTokens: 10, seed: 1 });
    step(s, model);
    const p = step(s, model);
    assert.equal(p.seqs.length, 2);
    const r = step(s, model);
    assert.equal(r.seqs.length, 2);
  });

  it('ends a sample at a stop token (kept), at max tokens, and at the context limit with length, never an error', async () => {
    const stopReq = { promptIds: [3, 1, 4], maxTokens: 200, seed: 11, n: 4 };
    const alone = runAlone(stopReq, VOCAB, 1000);
    const stopId = alone[0].tokenIds[5];
    const { s, model } = setup(200, 4, { maxModelLen: 40 });
    const a = s.submit({ ...stopReq, stopTokenIds: [stopId] });
    const b = s.submit({ promptIds: range(0, 30), maxTokens: 100, seed: 3 });
    const c = s.submit({ promptIds: range(0, 40), maxTokens: 5 });
    const d = s.submit({ promptIds: range(0, 45), maxTokens: 5, n: 2 });
    assert.deepEqual(s.result(c), [{ tokenIds: [], logprobs: [], finishReason: 'length', noRoom: true }]);
    assert.equal(s.result(d).length, 2);
    await drain(s, model, () => s.audit());
    const ra = s.result(a);
    assert.equal(ra[0].finishReason, 'stop');
    assert.equal(ra[0].tokenIds.at(-1), stopId);
    assert.ok(ra[0].tokenIds.length <= 6);
    assert.deepEqual(ra, runAlone({ ...stopReq, stopTokenIds: [stopId] }, VOCAB, 40));
    const rb = s.result(b);
    assert.equal(rb[0].tokenIds.length, 10, 'clipped to the 40-token context');
    assert.equal(rb[0].finishReason, 'length');
  });

  it('refuses a request that cannot fit in the whole pool, in one line', () => {
    const { s } = setup(4, 4, { maxModelLen: 1000 });
    assert.throws(() => s.submit({ promptIds: range(0, 10), maxTokens: 8 }),
      /^RolloutError: a request of 10 prompt \+ 8 completion tokens needs 5 KV blocks of 4 tokens but the pool has 4; lower maxTokens or give the KV cache more memory$/);
    s.submit({ promptIds: range(0, 10), maxTokens: 7 }); // 16 tokens of KV: fits exactly
    assert.throws(() => s.submit({ promptIds: [], maxTokens: 1 }), /promptIds must hold at least one token/);
    assert.throws(() => s.submit({ promptIds: [1], maxTokens: 0 }), /maxTokens must be an integer >= 1, got 0/);
  });

  it('out of blocks, preempts the most recently admitted sequence, requeues it first and resumes it by recompute', async () => {
    // three sequences of 6 prompt + 10 completion tokens (KV of 15 tokens: 4 blocks) in 9 blocks
    const { s, model, pool } = setup(9, 4, { maxModelLen: 100, tokenBudget: 64 });
    const reqs = [0, 1, 2].map((k) => ({ promptIds: range(10 * k, 10 * k + 6), maxTokens: 10, seed: k }));
    const ids = reqs.map((r) => s.submit(r));
    const first = step(s, model);
    assert.equal(first.seqs.length, 3, 'all three admitted (2 blocks each)');
    const preempted: number[][] = [];
    await drain(s, model, (plan) => { s.audit(); if (plan.preempted.length > 0) preempted.push(plan.preempted); });
    assert.deepEqual(preempted[0], [first.seqs[2].seqId], 'the last admitted goes first');
    assert.ok(s.metrics.preemptions >= 1);
    reqs.forEach((r, k) => assert.deepEqual(s.result(ids[k]), runAlone(r, VOCAB, 100)));
    assert.ok(s.metrics.prefillSaved > 0, 'the preempted sequence found its prompt blocks in the cache');
    s.audit();
    assert.equal(pool.alloc.used, pool.cache.size, 'at the end only the cache holds blocks');
  });

  it('forks n samples from one prompt computation; a later request reuses the cached prefix', async () => {
    const { s, model } = setup(64, 4, { maxModelLen: 200 });
    const prompt = range(0, 22);
    const a = s.submit({ promptIds: prompt, n: 4, maxTokens: 6, seed: 5 });
    const p = step(s, model);
    assert.equal(p.counts.prefillTokens, 22);
    assert.equal(p.counts.prefillSaved, 3 * 22, 'three forks that did not compute the prompt');
    const d = step(s, model);
    assert.equal(d.seqs.length, 4);
    assert.equal(d.copies.length, 3, 'the partial last block is copied by all writers but the last');
    await drain(s, model, () => s.audit());
    assert.deepEqual(s.result(a), runAlone({ promptIds: prompt, n: 4, maxTokens: 6, seed: 5 }, VOCAB, 200));
    // the same conversation extended (a repair turn): the cached full blocks are reused
    const follow = [...prompt, ...s.result(a)[1].tokenIds, 7, 7, 7];
    const before = s.metrics.prefillSaved;
    const b = s.submit({ promptIds: follow, n: 2, maxTokens: 4, seed: 6 });
    const q = step(s, model);
    // blocks 0-5 hit (24 tokens); block 6 holds position 27, the sample's last token, whose KV
    // was never computed; then the fork of 2 saves one more prompt
    assert.equal(q.counts.prefillTokens, follow.length - 24);
    assert.equal(q.counts.prefillSaved, 24 + follow.length);
    assert.equal(q.counts.cacheHitTokens, 24);
    assert.equal(p.counts.cacheHitTokens, 0);
    await drain(s, model, () => s.audit());
    assert.deepEqual(s.result(b), runAlone({ promptIds: follow, n: 2, maxTokens: 4, seed: 6 }, VOCAB, 200));
    assert.equal(s.metrics.prefillSaved - before, 24 + follow.length);
  });

  it('a fully cached prompt still computes its last token, to sample from', () => {
    const { s, model } = setup(64, 4, { maxModelLen: 200 });
    s.submit({ promptIds: range(0, 8), maxTokens: 2, seed: 1 });
    step(s, model); step(s, model);
    s.submit({ promptIds: range(0, 8), maxTokens: 2, seed: 2 });
    const p = step(s, model);
    assert.deepEqual([p.counts.prefillSaved, p.counts.prefillTokens], [4, 4]);
  });

  it('releases the cache between phases and re-sizes the pool only when idle', async () => {
    const { s, model, pool } = setup(32, 4, { maxModelLen: 200 });
    s.submit({ promptIds: range(0, 30), maxTokens: 5 });
    step(s, model);
    assert.throws(() => s.resizePool(8), /^RolloutError: cannot resize the KV pool with 1 sequences running and 0 waiting; let them finish first$/);
    await drain(s, model);
    const held = pool.cache.size;
    assert.ok(held >= 8);
    assert.deepEqual(s.releaseCached(), { blocks: held, bytes: 0 });
    assert.equal(pool.alloc.free, 32);
    s.resizePool(0);
    assert.equal(pool.capacity, 0);
    s.resizePool(16);
    const id = s.submit({ promptIds: range(0, 30), maxTokens: 5 });
    await drain(s, model, () => s.audit());
    assert.deepEqual(s.result(id), runAlone({ promptIds: range(0, 30), maxTokens: 5 }, VOCAB, 200));
  });

  it('refuses to plan twice without completing, completions of the wrong shape (changing nothing), and a completion of another step', () => {
    const { s, model } = setup(8, 4, { maxModelLen: 50 });
    s.submit({ promptIds: [1, 2, 3], maxTokens: 3 });
    const p = s.schedule();
    assert.throws(() => s.schedule(), /step 0 was planned but not completed/);
    assert.throws(() => s.complete(p, { tokens: [] }), /complete\(\): 0 sample lists for 1 sequences/);
    assert.throws(() => s.complete(p, { tokens: [[1, 2]] }), /complete\(\): sequence 0 needs 1 sampled tokens, got 2/);
    assert.throws(() => s.complete(p, { tokens: [[1]], logprobs: [[]] }), /complete\(\): sequence 0 has 1 sampled tokens but 0 log-probs/);
    s.complete(p, model.execute(p));
    assert.throws(() => s.complete(p, { tokens: [[1]] }), /complete\(\) got step 0, which is not the step planned last/);
  });
});

describe('Scheduler.abort and releaseCached while running', () => {
  it('aborts waiting and running requests, mid-step too, keeping their tokens so far; the others are unchanged', async () => {
    const { s, model, pool } = setup(64, 4, { maxModelLen: 200, tokenBudget: 16 });
    const reqs = [
      { promptIds: range(0, 10), n: 3, maxTokens: 30, seed: 1 },
      { promptIds: range(5, 30), n: 2, maxTokens: 30, seed: 2 },
      { promptIds: range(40, 50), maxTokens: 30, seed: 3 },
    ];
    const ids = reqs.map((r) => s.submit(r));
    step(s, model); step(s, model); step(s, model);
    const waitingOne = s.submit({ promptIds: range(60, 99), maxTokens: 4 });
    s.abort(waitingOne);
    assert.deepEqual(s.result(waitingOne), [{ tokenIds: [], logprobs: [], finishReason: 'abort' }]);
    const plan = s.schedule();
    s.abort(ids[0]); // in flight
    s.audit();
    s.complete(plan, model.execute(plan));
    s.audit();
    const r0 = s.result(ids[0]);
    const alone0 = runAlone(reqs[0], VOCAB, 200);
    r0.forEach((x, j) => {
      assert.equal(x.finishReason, 'abort');
      assert.ok(x.tokenIds.length >= 1);
      assert.deepEqual(x.tokenIds, alone0[j].tokenIds.slice(0, x.tokenIds.length));
      assert.deepEqual(x.logprobs, alone0[j].logprobs!.slice(0, x.tokenIds.length));
    });
    await drain(s, model, () => s.audit());
    assert.deepEqual(s.result(ids[1]), runAlone(reqs[1], VOCAB, 200));
    assert.deepEqual(s.result(ids[2]), runAlone(reqs[2], VOCAB, 200));
    s.abort(ids[2]); // finished: nothing happens
    assert.deepEqual(s.result(ids[2]), runAlone(reqs[2], VOCAB, 200));
    s.releaseCached();
    assert.equal(pool.alloc.free, 64);
  });

  it('abortSample ends one forked sample (mid-step too), frees its blocks, and leaves the request\'s others unchanged', async () => {
    const { s, model } = setup(64, 4, { maxModelLen: 200, tokenBudget: 64 });
    const req = { promptIds: range(0, 10), n: 3, maxTokens: 20, seed: 4 };
    const id = s.submit(req);
    assert.equal(s.abortSample(id, 1), false, 'not forked yet: cannot end alone');
    step(s, model); // prompt computed, 3 samples forked
    step(s, model);
    const held = s.pool.alloc.used;
    assert.equal(s.abortSample(id, 1), true);
    s.audit();
    assert.ok(s.pool.alloc.used < held, 'its blocks went back');
    const plan = s.schedule();
    assert.equal(s.abortSample(id, 2), true); // in flight
    s.audit();
    s.complete(plan, model.execute(plan));
    await drain(s, model, () => s.audit());
    const alone = runAlone(req, VOCAB, 200);
    const r = s.result(id);
    assert.deepEqual(r[0], alone[0]);
    for (const j of [1, 2]) {
      assert.equal(r[j].finishReason, 'abort');
      assert.deepEqual(r[j].tokenIds, alone[j].tokenIds.slice(0, r[j].tokenIds.length));
    }
    // (the in-flight step's token of sample 2 is dropped, as abort() drops a request's)
    assert.deepEqual([r[1].tokenIds.length, r[2].tokenIds.length], [2, 2]);
    assert.equal(s.abortSample(id, 0), true, 'finished: nothing changes');
    assert.deepEqual(s.result(id)[0], alone[0]);
    assert.throws(() => s.abortSample(id, 3), /request \d+ has no sample 3 \(n = 3\)/);
  });

  it('after releaseCached, running sequences stop caching (their KV may predate new weights); new ones cache again', async () => {
    const { s, model, pool } = setup(64, 4, { maxModelLen: 200, tokenBudget: 64 });
    const a = s.submit({ promptIds: range(0, 9), maxTokens: 20, seed: 1 });
    step(s, model);
    assert.equal(pool.cache.size, 2);
    s.releaseCached();
    assert.equal(pool.cache.size, 0);
    await drain(s, model, () => s.audit());
    assert.equal(pool.cache.size, 0, 'the running sequence cached nothing more');
    assert.deepEqual(s.result(a), runAlone({ promptIds: range(0, 9), maxTokens: 20, seed: 1 }, VOCAB, 200));
    s.submit({ promptIds: range(0, 9), maxTokens: 2, seed: 1 });
    await drain(s, model, () => s.audit());
    assert.equal(pool.cache.size, 2);
  });
});

it('samples without log-probs when the executor reports none; with them, each token keeps its own through forks and preemption', async () => {
  const { s, model } = setup(9, 4, { maxModelLen: 100, tokenBudget: 64 });
  const bare = { execute: (p: Parameters<typeof model.execute>[0]) => ({ tokens: model.execute(p).tokens }) };
  const a = s.submit({ promptIds: range(0, 6), n: 2, maxTokens: 5, seed: 1 });
  await drain(s, bare);
  assert.deepEqual(s.result(a).map((x) => Object.keys(x).sort()), [['finishReason', 'tokenIds'], ['finishReason', 'tokenIds']]);
  const reqs = [0, 1, 2].map((k) => ({ promptIds: range(10 * k, 10 * k + 6), n: 2, maxTokens: 10, seed: k }));
  const ids = reqs.map((r) => s.submit(r));
  await drain(s, model, () => s.audit());
  assert.ok(s.metrics.preemptions > 0);
  reqs.forEach((r, k) => {
    const got = s.result(ids[k]), want = runAlone(r, VOCAB, 100);
    assert.deepEqual(got, want);
    assert.notDeepEqual(got[0].logprobs, got[1].logprobs);
  });
});
