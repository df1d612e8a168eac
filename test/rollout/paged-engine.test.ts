// PagedEngine over the reference model (lib/rollout/paged/reference-model.ts) and over a fake
// paged device through DeviceExecutor: every result must equal the reference model run alone
// (runAlone), whatever else shares the batch, the pool size or the moment a request arrives.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EmbeddedBackend } from '../../lib/rollout/embedded.js';
import { PagedEngine } from '../../lib/rollout/paged-engine.js';
import { deviceKv } from '../../lib/rollout/paged/device-kv.js';
import { DeviceExecutor, deviceSeed } from '../../lib/rollout/paged/device-executor.js';
import { ReferenceModel, kvBlockBytes } from '../../lib/rollout/paged/index.js';
import type { EngineSample } from '../../lib/rollout/types.js';
import { Rng, testSeed } from '../helpers/random.js';
import { alone, FakeDevice, Gate, req, VOCAB } from './paged-engine-helpers.js';

const LEN = 256;
const info = { vocabSize: VOCAB, maxModelLen: LEN };

function engine(blocks: number, o: { blockSize?: number; tokenBudget?: number; prefixSharing?: boolean; maxRunning?: number } = {}) {
  const gate = new Gate(new ReferenceModel(o.blockSize ?? 4, { vocab: VOCAB, verify: true }));
  return { e: PagedEngine.withPool(gate, info, blocks, { blockSize: 4, ...o }), gate };
}

const prompt = (rng: Rng, n: number) => Array.from({ length: n }, () => rng.int(VOCAB));

describe('PagedEngine over the reference model', () => {
  const seed = testSeed('paged-engine');

  it('concurrent generate() calls share one batch and give what each request gives alone', async () => {
    const rng = new Rng(seed);
    const { e, gate } = engine(400);
    const shared = prompt(rng, 9);
    const reqs = Array.from({ length: 12 }, (_, k) => req(k % 3 === 0 ? [...shared, ...prompt(rng, k)] : prompt(rng, 1 + rng.int(20)), { n: 1 + rng.int(3), maxTokens: 1 + rng.int(30), seed: rng.int(1000) }));
    const out = await Promise.all(reqs.map((r) => e.generate([r])));
    reqs.forEach((r, k) => assert.deepEqual(out[k][0], alone(r, LEN), `request ${k}`));
    // all 12 were admitted in the first step: one loop for every caller
    assert.equal(new Set(gate.plans[0].seqs.map((q) => q.requestId)).size, 12);
    assert.equal(e.metrics.requests, 12);
    assert.ok(e.metrics.maxBatch >= 12);
    assert.equal(e.metrics.steps, gate.plans.length);
  });

  it('a request arriving while the loop runs joins the running batch', async () => {
    const { e, gate } = engine(400);
    const a = req([1, 2, 3, 4, 5], { maxTokens: 30 });
    const b = req([9, 8, 7], { maxTokens: 5, seed: 11 });
    const h = gate.hold(3);
    const pa = e.generate([a]);
    await h.reached;
    const pb = e.generate([b]);
    h.release();
    const [ra, rb] = await Promise.all([pa, pb]);
    assert.deepEqual(ra[0], alone(a, LEN));
    assert.deepEqual(rb[0], alone(b, LEN));
    // b ran in steps that also advanced a: the same batch, not a second loop after the first
    const both = gate.plans.filter((p) => new Set(p.seqs.map((q) => q.requestId)).size === 2);
    assert.ok(both.length >= 5, `${both.length} steps held both requests`);
    assert.equal(e.metrics.steps, gate.plans.length);
  });

  it('n > 1 forks after one prefill (saved prefill counted); stop ids end samples with stop', async () => {
    const rng = new Rng(seed + 1);
    const { e } = engine(400);
    const p = prompt(rng, 13);
    const r = req(p, { n: 4, maxTokens: 25 });
    const [[s0]] = await e.generate([req(p, { maxTokens: 25 })]);
    assert.deepEqual((await e.generate([r]))[0], alone(r, LEN));
    assert.ok(e.metrics.prefillSaved >= 3 * p.length, `saved ${e.metrics.prefillSaved}`);
    // a stop id the first sample meets at its 4th token
    const stop = req(p, { n: 4, maxTokens: 25, stopTokenIds: [s0.tokenIds[3]] });
    const got = (await e.generate([stop]))[0];
    assert.deepEqual(got, alone(stop, LEN));
    assert.equal(got[0].finishReason, 'stop');
    assert.equal(got[0].tokenIds.at(-1), s0.tokenIds[3]);
  });

  it('max tokens are clipped to the context: length there, and no room is length with no tokens', async () => {
    const { e } = engine(400);
    const near = req(Array.from({ length: LEN - 6 }, (_, i) => i % VOCAB), { n: 2, maxTokens: 100 });
    const full = req(Array.from({ length: LEN }, (_, i) => i % VOCAB), { maxTokens: 10 });
    const [a, b] = await e.generate([near, full]);
    assert.deepEqual(a.map((s) => [s.tokenIds.length, s.finishReason]), [[6, 'length'], [6, 'length']]);
    assert.deepEqual(a, alone(near, LEN));
    assert.deepEqual(b, [{ tokenIds: [], logprobs: [], finishReason: 'length' }]);
  });

  it('a pool too small for all preempts and resumes: the same tokens as a big pool', async () => {
    const rng = new Rng(seed + 2);
    const reqs = Array.from({ length: 10 }, () => req(prompt(rng, 10 + rng.int(30)), { n: 1 + rng.int(3), maxTokens: 20 + rng.int(30), seed: rng.int(1000) }));
    // the largest request fits alone (50 tokens at most -> 13 blocks of 4 per sequence); the batch does not
    const small = engine(40);
    const big = engine(2000);
    const [rs, rb] = await Promise.all([Promise.all(reqs.map((r) => small.e.generate([r]))), Promise.all(reqs.map((r) => big.e.generate([r])))]);
    assert.deepEqual(rs, rb);
    reqs.forEach((r, k) => assert.deepEqual(rs[k][0], alone(r, LEN)));
    assert.ok(small.e.metrics.preemptions > 0, 'the small pool preempted');
    assert.equal(big.e.metrics.preemptions, 0);
  });

  it('prefix sharing off gives the same tokens and saves nothing', async () => {
    const rng = new Rng(seed + 3);
    const p = prompt(rng, 20);
    const reqs = [req(p, { n: 3 }), req([...p, 1, 2, 3], { n: 2, seed: 3 })];
    const on = engine(400), off = engine(400, { prefixSharing: false });
    assert.deepEqual(await on.e.generate(reqs), await off.e.generate(reqs));
    assert.equal(off.e.metrics.prefillSaved, 0);
    assert.ok(on.e.metrics.prefillSaved > 0);
  });

  it('an aborted request ends with abort and the tokens it had; the others are unchanged', async () => {
    const { e, gate } = engine(400);
    const ctl = new AbortController();
    const a = req([1, 2, 3], { n: 2, maxTokens: 40, signal: ctl.signal });
    const b = req([4, 5, 6], { maxTokens: 30 });
    const h = gate.hold(5);
    const p = Promise.all([e.generate([a]), e.generate([b])]);
    await h.reached;
    ctl.abort();
    h.release();
    const [[ra], [rb]] = await p;
    const want = alone(a, LEN);
    ra.forEach((s, j) => {
      assert.equal(s.finishReason, 'abort');
      assert.ok(s.tokenIds.length < 40);
      assert.deepEqual(s.tokenIds, want[j].tokenIds.slice(0, s.tokenIds.length));
    });
    assert.deepEqual(rb, alone(b, LEN));
    // an already aborted signal: nothing runs
    const done = new AbortController();
    done.abort();
    const [[x]] = await e.generate([req([1], { signal: done.signal })]);
    assert.deepEqual(x, { tokenIds: [], logprobs: [], finishReason: 'abort' });
  });

  it('onToken streams every token; returning true ends that sample with abort', async () => {
    const { e } = engine(400);
    const seen: number[][] = [[], [], []];
    const r = req([3, 1, 4, 1, 5], { n: 3, maxTokens: 20, onToken: (j, t) => { seen[j].push(t.id); return j === 1 && seen[j].length === 4; } });
    const [out] = await e.generate([r]);
    const want = alone(r, LEN);
    assert.deepEqual(out[0], want[0]);
    assert.deepEqual(out[2], want[2]);
    assert.deepEqual(out[1], { tokenIds: want[1].tokenIds.slice(0, 4), logprobs: want[1].logprobs.slice(0, 4), finishReason: 'abort' });
    assert.deepEqual(seen[0], want[0].tokenIds);
    assert.deepEqual(seen[1], want[1].tokenIds.slice(0, 4));
    // the ended sample left the batch: 20 + 4 + 20 decoded tokens at most, not 3 x 20
    assert.ok(e.metrics.decodeTokens <= 20 + 4 + 20, `decoded ${e.metrics.decodeTokens}`);
  });

  it('close() ends running requests with abort and refuses new ones', async () => {
    const { e, gate } = engine(400);
    const h = gate.hold(2);
    const p = e.generate([req([1, 2], { maxTokens: 50 })]);
    await h.reached;
    const closing = e.close();
    h.release();
    const [[s]] = await p;
    await closing;
    assert.equal(s.finishReason, 'abort');
    await assert.rejects(e.generate([req([1])]), /closed/);
  });

  it('a failing step fails the requests it served and gives the pool back; the engine keeps working', async () => {
    const dev = new FakeDevice(null);
    let fail = true;
    const exec = new DeviceExecutor(dev);
    const e = new PagedEngine({
      executor: { execute: (plan) => (fail && plan.step === 2 ? Promise.reject(new Error('device fault')) : exec.execute(plan)) },
      info, kv: deviceKv(dev, { numLayers: 1, numKvHeads: 1, headDim: 4, dtypeBytes: 2 }, LEN, { kvCacheBlocks: 100, blockSize: 4 }),
    });
    await assert.rejects(Promise.all([e.generate([req([1, 2])]), e.generate([req([3])])]), /device fault/);
    assert.equal(dev.calls.release, 1);
    fail = false;
    const r = req([5, 6, 7]);
    assert.deepEqual((await e.generate([r]))[0], alone(r, LEN).map((s) => ({ ...s, logprobs: s.logprobs.map(Math.fround) })));
    assert.equal(dev.calls.allocate, 2);
  });

  it('a row the device could not sample (token -1: NaN or -inf logits) fails the step in one line', async () => {
    const dev = new FakeDevice(null);
    const step = dev.pagedStep.bind(dev);
    dev.pagedStep = async (a, s) => { const r = await step(a, s); if (dev.calls.steps === 3) r.tokens[0] = -1; return r; };
    const e = new PagedEngine({ executor: new DeviceExecutor(dev), info, kv: deviceKv(dev, { numLayers: 1, numKvHeads: 1, headDim: 4, dtypeBytes: 2 }, LEN, { kvCacheBlocks: 100, blockSize: 4 }) });
    await assert.rejects(e.generate([req([1, 2, 3])]), /^RolloutError: the device sampled no token for request 0 at position 5: its logits are NaN or -inf \(the model has diverged\); resume from an earlier checkpoint or lower the learning rate$/);
    assert.equal(dev.calls.release, 1);
  });

  it('refuses top log-prob alternatives in one line', async () => {
    const { e } = engine(100);
    await assert.rejects(e.generate([req([1], { topLogprobs: 2 })]), /does not report top log-prob alternatives/);
  });
});

describe('PagedEngine over a paged device (DeviceExecutor)', () => {
  const seed = testSeed('paged-engine-device');
  const shape = { numLayers: 2, numKvHeads: 2, headDim: 8, dtypeBytes: 2 };

  function deviceEngine(dev: FakeDevice, o: { kvCacheBlocks?: number; kvCacheFraction?: number; prefixSharing?: boolean } = {}) {
    return new PagedEngine({ executor: new DeviceExecutor(dev), info, kv: deviceKv(dev, shape, LEN, { blockSize: 8, ...o }), weights: dev, prefixSharing: o.prefixSharing });
  }
  const f32 = (s: EngineSample[]) => s.map((x) => ({ ...x, logprobs: x.logprobs.map(Math.fround) }));

  it('the flat arrays and sampling rows reach the device and give the reference tokens, with and without sharing', async () => {
    const rng = new Rng(seed);
    const p = prompt(rng, 30);
    const reqs = Array.from({ length: 8 }, (_, k) => req(k < 4 ? p : [...p, ...prompt(rng, 5 + k)], { n: 1 + rng.int(4), maxTokens: 10 + rng.int(40), seed: rng.int(2 ** 31), temperature: k / 8, topK: k }));
    for (const prefixSharing of [true, false]) {
      const dev = new FakeDevice(null);
      const e = deviceEngine(dev, { kvCacheBlocks: 300, prefixSharing });
      const out = await Promise.all(reqs.map((r) => e.generate([r])));
      reqs.forEach((r, k) => assert.deepEqual(out[k][0], f32(alone(r, LEN)), `request ${k}, sharing ${prefixSharing}`));
      // per-row options: every temperature asked for reached the device
      const temps = new Set(dev.sampling.flatMap((s) => Array.from(s.temperature)));
      for (let k = 0; k < 8; k++) assert.ok(temps.has(Math.fround(k / 8)));
      if (prefixSharing) assert.ok(e.metrics.prefillSaved > 3 * p.length);
      // every draw's step is its token's index in the completion (generate()'s numbering)
      const lens = new Set(reqs.map((r) => r.promptIds.length));
      for (const { step, position } of dev.steps) assert.ok(step >= 0 && lens.has(position - step), `step ${step} at position ${position}`);
    }
  });

  it('sizes the pool from free device memory x kvCacheFraction, allocates per rollout phase and releases for training', async () => {
    const per = kvBlockBytes(shape, 8);
    const dev = new FakeDevice(1000 * per);
    const e = deviceEngine(dev, { kvCacheFraction: 0.5 });
    await e.generate([req([1, 2, 3])]);
    assert.equal(dev.blocks, 500);
    assert.equal(e.metrics.kvBlocks, 500);
    await e.releaseMemory();
    assert.deepEqual([dev.calls.allocate, dev.calls.release, dev.blocks], [1, 1, 0]);
    assert.equal(e.scheduler, null);
    await e.generate([req([1, 2, 3])]);
    assert.deepEqual([dev.calls.allocate, e.metrics.kvAllocations], [2, 2]);
    // too little memory for one full-context sequence: one line naming the keys
    const poor = deviceEngine(new FakeDevice(10 * per));
    await assert.rejects(poor.generate([req([1])]), /the KV cache has \d+ blocks of 8 tokens but one sequence of the model's context \(256 tokens\) needs 32; raise kvCacheFraction or kvCacheBlocks/);
  });

  it('generate() and releaseMemory() interleaved: no step on a released pool, every result right', async () => {
    const dev = new FakeDevice(null); // its pagedStep throws without a pool
    const e = deviceEngine(dev, { kvCacheBlocks: 64 });
    const r = req([1, 2, 3], { maxTokens: 6 });
    const want = f32(alone(r, LEN));
    // released while the loop still runs, while the pool is being taken, and with nothing running
    const a = e.generate([r]);
    const ra = e.releaseMemory();
    const b = e.generate([r]);
    await ra;
    const c = e.generate([r]);
    await e.releaseMemory();
    const d = e.generate([r]);
    const rd = e.releaseMemory();
    for (const x of await Promise.all([a, b, c, d])) assert.deepEqual(x[0], want);
    await rd;
    await e.releaseMemory();
    assert.equal(dev.blocks, 0);
    assert.equal(dev.calls.allocate, dev.calls.release);
  });

  it('releaseMemory waits for the running batch', async () => {
    const dev = new FakeDevice(null);
    const gate = new Gate(new DeviceExecutor(dev));
    const e = new PagedEngine({ executor: gate, info, kv: deviceKv(dev, shape, LEN, { kvCacheBlocks: 64, blockSize: 8 }) });
    const h = gate.hold(1);
    const p = e.generate([req([1, 2], { maxTokens: 10 })]);
    await h.reached;
    const rel = e.releaseMemory();
    h.release();
    const [[s]] = await p;
    await rel;
    assert.equal(s.tokenIds.length, 10);
    assert.equal(dev.calls.release, 1);
  });

  it('seeds above 32 bits are folded for the device; unseeded requests draw one seed for all their samples', async () => {
    assert.equal(deviceSeed(5), 5);
    assert.notEqual(deviceSeed(2 ** 40 + 5), deviceSeed(5));
    assert.ok(deviceSeed(2 ** 40 + 5) < 2 ** 32);
    const dev = new FakeDevice(null);
    const e = deviceEngine(dev, { kvCacheBlocks: 100 });
    await e.generate([req([1, 2, 3], { n: 3, seed: undefined, maxTokens: 3 })]);
    const seeds = new Set(dev.sampling.flatMap((s) => Array.from(s.seed)));
    assert.equal(seeds.size, 1);
  });
});

describe('EmbeddedBackend over a PagedEngine', () => {
  it('passes concurrent calls through to one running batch, reports prefill saved, syncs shared weights for free', async () => {
    const dev = new FakeDevice(null);
    const gate = new Gate(new DeviceExecutor(dev));
    const e = new PagedEngine({ executor: gate, info, kv: deviceKv(dev, { numLayers: 1, numKvHeads: 1, headDim: 4, dtypeBytes: 2 }, LEN, { kvCacheBlocks: 200, blockSize: 4 }), weights: dev });
    const b = new EmbeddedBackend({ engine: e, maxTokens: 12 });
    const p = [5, 6, 7, 8, 9, 10, 11, 12, 13];
    const out = await Promise.all([b.generate(p, 4, { seed: 1 }), b.generate(p, 4, { seed: 2, temperature: 0.5 }), b.generate([...p, 1], 2, { seed: 3, topK: 5 })]);
    assert.deepEqual(out[0].map((c) => c.tokenIds), alone(req(p, { n: 4, seed: 1, maxTokens: 12 }), LEN).map((s) => s.tokenIds));
    // different sampling options still ran in the same steps
    assert.equal(new Set(gate.plans[0].seqs.map((q) => q.requestId)).size, 3);
    const c = b.counters;
    assert.ok(c.prefillSaved! >= 2 * 3 * p.length, `saved ${c.prefillSaved}`);
    assert.equal(c.prefillTokens, e.metrics.prefillTokens);
    // the same weights object (wrapped as NativePolicy wraps its model): nothing moves
    const rep = await b.syncWeights({ model: dev } as never, 1);
    assert.equal(rep.method, 'shared');
    assert.equal(e.scheduler!.pool.cache.size, 0, 'the prefix cache is dropped after a weight update');
    await b.releaseRolloutMemory();
    assert.equal(dev.calls.release, 1);
    await b.close();
  });

  it('the batcher\'s stats count the engine\'s steps as its batches, with the requests each step held', async () => {
    const rng = new Rng(testSeed('paged-batcher-stats'));
    const { e, gate } = engine(400);
    const b = new EmbeddedBackend({ engine: e, maxTokens: 16 });
    const h = gate.hold(2);
    const first = Array.from({ length: 6 }, (_, k) => b.generate(prompt(rng, 3 + rng.int(9)), 1 + rng.int(2), { seed: k, maxTokens: 4 + rng.int(12) }));
    await h.reached;
    // two more join the running batch at its next step
    const later = Array.from({ length: 2 }, (_, k) => b.generate(prompt(rng, 5), 1, { seed: 100 + k, maxTokens: 6 }));
    h.release();
    await Promise.all([...first, ...later]);
    const perStep = gate.plans.map((p) => new Set(p.seqs.map((q) => q.requestId)).size);
    const st = b.stats;
    assert.equal(st.requests, 8);
    assert.equal(st.calls, 8, 'a continuous engine gets one generate() call per request');
    assert.equal(st.batches, gate.plans.length, `batches are the engine's steps (${gate.plans.length}), not its calls`);
    assert.equal(st.maxMerged, Math.max(...perStep));
    assert.ok(st.maxMerged >= 6, `${st.maxMerged}`);
    assert.ok(Math.abs(st.meanMerged - perStep.reduce((a, x) => a + x, 0) / perStep.length) < 1e-12, `${st.meanMerged}`);
    // a second backend over the same engine counts from its own start
    const b2 = new EmbeddedBackend({ engine: e, maxTokens: 8 });
    assert.deepEqual([b2.stats.batches, b2.stats.meanMerged], [0, 0]);
    await b2.generate([1, 2, 3], 1, { seed: 9, maxTokens: 3 });
    assert.equal(b2.stats.batches, gate.plans.length - st.batches);
    assert.equal(b2.stats.meanMerged, 1);
    await b.close();
  });

  it('a weight sync waits for the calls in flight and holds the requests queued after it', async () => {
    const dev = new FakeDevice(null);
    const gate = new Gate(new DeviceExecutor(dev));
    const e = new PagedEngine({ executor: gate, info, kv: deviceKv(dev, { numLayers: 1, numKvHeads: 1, headDim: 4, dtypeBytes: 2 }, LEN, { kvCacheBlocks: 200, blockSize: 4 }), weights: dev });
    const b = new EmbeddedBackend({ engine: e, maxTokens: 10 });
    const order: string[] = [];
    let plansAtSync = -1;
    const set = e.setWeights.bind(e);
    let busyAtSync: boolean | undefined;
    e.setWeights = async (p) => { order.push('sync'); plansAtSync = gate.plans.length; busyAtSync = e.scheduler?.hasWork; return set(p); };
    const h = gate.hold(2);
    const pa = b.generate([1, 2, 3], 1, { seed: 1 }).then(() => order.push('a'));
    await h.reached;
    const ps = b.syncWeights({ model: dev } as never, 1);
    const pb = b.generate([4, 5, 6], 1, { seed: 2 }).then(() => order.push('b'));
    h.release();
    await Promise.all([pa, ps, pb]);
    assert.equal(busyAtSync, false, 'the sync ran with nothing in flight');
    assert.equal(order.at(-1), 'b');
    // no step before the sync held b: it waited behind the sync, not in the running batch
    for (const plan of gate.plans.slice(0, plansAtSync)) assert.equal(new Set(plan.seqs.map((q) => q.requestId)).size, 1);
    assert.ok(gate.plans.length > plansAtSync);
    await b.close();
  });
});
