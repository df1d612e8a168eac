// Property tests on seeded random workloads (replay with MURPHY_SEED): tree-shaped requests
// (shared problem prompts, follow-ups that extend earlier conversations) arriving while others
// run, through pools from roomy to barely large enough for the largest request. After every
// step: every block's refcount == tables holding it + the cache's hold, free + used ==
// capacity, no block both free and held, the step within the token budget. At the end: every
// request's samples equal the reference model run alone, with prefix sharing and without, and
// nothing but the cache holds a block.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { KvPool, ReferenceModel, Scheduler, blocksFor, runAlone, type PagedRequest, type SampleResult } from '../../../lib/rollout/paged/index.js';
import { Rng, testSeed } from '../../helpers/random.js';

const VOCAB = 23;

interface Workload {
  blockSize: number;
  maxModelLen: number;
  tokenBudget: number;
  maxRunning: number;
  blocks: number;
  /** Requests with the step at which each arrives. */
  arrivals: { at: number; req: PagedRequest }[];
}

function workload(rng: Rng): Workload {
  const blockSize = [1, 2, 4, 8, 16][rng.int(5)];
  const maxModelLen = 24 + rng.int(120);
  const problems = Array.from({ length: 1 + rng.int(3) }, () => Array.from({ length: 1 + rng.int(30) }, () => rng.int(VOCAB)));
  const arrivals: Workload['arrivals'] = [];
  const prompts: number[][] = [...problems];
  for (let k = 0; k < 4 + rng.int(10); k++) {
    // a problem prompt, or an earlier prompt extended (a follow-up turn), or something new
    const u = rng.next();
    const base = u < 0.4 ? problems[rng.int(problems.length)] : u < 0.85 ? prompts[rng.int(prompts.length)] : [];
    const ext = Array.from({ length: (base.length === 0 ? 1 : 0) + rng.int(20) }, () => rng.int(VOCAB));
    const promptIds = [...base, ...ext].slice(0, maxModelLen + 2);
    prompts.push(promptIds);
    arrivals.push({
      at: rng.int(30),
      req: { promptIds, n: 1 + rng.int(4), maxTokens: 1 + rng.int(40), seed: rng.int(1000), stopTokenIds: rng.next() < 0.5 ? [rng.int(VOCAB)] : [] },
    });
  }
  arrivals.sort((a, b) => a.at - b.at);
  // the largest single sequence must fit; beyond that, from tight to roomy
  let need = 1;
  for (const { req } of arrivals) {
    const m = Math.min(req.maxTokens, maxModelLen - req.promptIds.length);
    if (m > 0) need = Math.max(need, blocksFor(req.promptIds.length + m - 1, blockSize));
  }
  const blocks = rng.next() < 0.5 ? need + rng.int(3) : need + rng.int(8 * need);
  return { blockSize, maxModelLen, tokenBudget: 1 + rng.int(48), maxRunning: 1 + rng.int(12), blocks, arrivals };
}

/**
 * Runs a workload; with `chaos`, also aborts random requests or single samples of them (some while a step is in flight)
 * and releases the prefix cache at random points (returned: the aborted request indices).
 */
async function run(w: Workload, prefixSharing: boolean, chaos?: Rng): Promise<{ results: SampleResult[][]; s: Scheduler; pool: KvPool; aborted: Set<number> }> {
  const pool = new KvPool({ blocks: w.blocks, blockSize: w.blockSize });
  const s = new Scheduler(pool, { maxModelLen: w.maxModelLen, tokenBudget: w.tokenBudget, maxRunning: w.maxRunning, prefixSharing });
  const model = new ReferenceModel(w.blockSize, { vocab: VOCAB, verify: true });
  const ids: number[] = [];
  const aborted = new Set<number>();
  let next = 0;
  const mayAbort = () => {
    if (chaos === undefined || ids.length === 0 || chaos.next() > 0.04) return;
    const k = chaos.int(ids.length);
    if (!s.isDone(ids[k])) aborted.add(k);
    // one sample alone (when it runs as its own sequence) or the whole request
    if (chaos.next() < 0.5) s.abortSample(ids[k], chaos.int(w.arrivals[k].req.n ?? 1));
    else s.abort(ids[k]);
  };
  for (let stepNo = 0; next < w.arrivals.length || s.hasWork; stepNo++) {
    while (next < w.arrivals.length && w.arrivals[next].at <= stepNo) ids.push(s.submit(w.arrivals[next++].req));
    if (!s.hasWork) continue;
    if (chaos !== undefined && chaos.next() < 0.03) s.releaseCached();
    mayAbort();
    if (!s.hasWork) continue;
    const plan = s.schedule();
    s.audit();
    mayAbort();
    const tokens = plan.seqs.reduce((a, q) => a + q.tokenIds.length, 0);
    assert.ok(tokens >= 1 && tokens <= w.tokenBudget, `step ${plan.step}: ${tokens} tokens, budget ${w.tokenBudget}`);
    assert.equal(new Set(plan.seqs.map((q) => q.seqId)).size, plan.seqs.length, 'a sequence at most once per step');
    s.complete(plan, model.execute(plan));
    s.audit();
    assert.ok(pool.alloc.free + pool.alloc.used === pool.capacity);
    assert.ok(plan.step < 20_000, 'no progress');
  }
  return { results: ids.map((id) => s.result(id)), s, pool, aborted };
}

it('random tree workloads: invariants after every step, outputs equal to running each request alone, shared or not', async () => {
  const seed = testSeed('paged KV scheduler properties');
  const rng = new Rng(seed);
  let preemptions = 0, saved = 0, copies = 0;
  for (let round = 0; round < 12; round++) {
    const w = workload(rng);
    const where = `seed ${seed}, round ${round}: block ${w.blockSize}, ${w.blocks} blocks, budget ${w.tokenBudget}, context ${w.maxModelLen}`;
    const alone = w.arrivals.map(({ req }) => runAlone(req, VOCAB, w.maxModelLen));
    const shared = await run(w, true);
    assert.deepEqual(shared.results, alone, `with prefix sharing (${where})`);
    const plain = await run(w, false);
    assert.deepEqual(plain.results, alone, `without prefix sharing (${where})`);
    for (const { s, pool } of [shared, plain]) {
      assert.equal(pool.alloc.used, pool.cache.size, `only the cache holds blocks at the end (${where})`);
      s.releaseCached();
      assert.equal(pool.alloc.free, pool.capacity, `no leaks (${where})`);
      s.audit();
    }
    assert.equal(plain.s.metrics.prefillSaved, 0);
    if (shared.s.metrics.preemptions === 0 && plain.s.metrics.preemptions === 0) {
      assert.equal(shared.s.metrics.prefillTokens + shared.s.metrics.prefillSaved, plain.s.metrics.prefillTokens, `saved + computed = computed without sharing (${where})`);
    }
    preemptions += shared.s.metrics.preemptions + plain.s.metrics.preemptions;
    saved += shared.s.metrics.prefillSaved;
    copies += shared.s.metrics.copies;
  }
  console.log(`# ${preemptions} preemptions, ${saved} prefill tokens saved, ${copies} copy-on-write copies`);
});

it('a tiny pool forces preemptions and still gives the same outputs', async () => {
  const seed = testSeed('paged KV tiny pool');
  const rng = new Rng(seed);
  const problem = Array.from({ length: 13 }, () => rng.int(VOCAB));
  const arrivals = Array.from({ length: 8 }, (_, k) => ({
    at: 0,
    req: { promptIds: k % 2 === 0 ? problem : [...problem, ...Array.from({ length: 5 }, () => rng.int(VOCAB))], n: 1 + (k % 3), maxTokens: 20, seed: rng.int(1000) },
  }));
  for (const blockSize of [2, 4]) {
    const w: Workload = { blockSize, maxModelLen: 64, tokenBudget: 32, maxRunning: 16, blocks: blocksFor(18 + 19, blockSize), arrivals };
    const alone = arrivals.map(({ req }) => runAlone(req, VOCAB, 64));
    for (const sharing of [true, false]) {
      const r = await run(w, sharing);
      assert.ok(r.s.metrics.preemptions > 0, `block ${blockSize}, sharing ${sharing}: expected preemptions (seed ${seed})`);
      assert.deepEqual(r.results, alone, `block ${blockSize}, sharing ${sharing} (seed ${seed})`);
    }
  }
});

it('random aborts (also mid-step) and cache releases: invariants hold, aborted samples are prefixes, the rest unchanged', async () => {
  const seed = testSeed('paged KV aborts and releases');
  const rng = new Rng(seed);
  let abortedSamples = 0;
  for (let round = 0; round < 8; round++) {
    const w = workload(rng);
    const alone = w.arrivals.map(({ req }) => runAlone(req, VOCAB, w.maxModelLen));
    for (const sharing of [true, false]) {
      const where = `seed ${seed}, round ${round}, sharing ${sharing}`;
      const r = await run(w, sharing, new Rng(rng.int(2 ** 31)));
      r.results.forEach((samples, k) => {
        if (!r.aborted.has(k)) return assert.deepEqual(samples, alone[k], `request ${k} (${where})`);
        samples.forEach((x, j) => {
          if (x.finishReason !== 'abort') return assert.deepEqual(x, alone[k][j], `request ${k} sample ${j} (${where})`);
          abortedSamples++;
          assert.deepEqual(x.tokenIds, alone[k][j].tokenIds.slice(0, x.tokenIds.length), `aborted request ${k} sample ${j} (${where})`);
        });
      });
      assert.equal(r.pool.alloc.used, r.pool.cache.size, `only the cache holds blocks at the end (${where})`);
      r.s.releaseCached();
      assert.equal(r.pool.alloc.free, r.pool.capacity, `no leaks (${where})`);
    }
  }
  console.log(`# ${abortedSamples} samples aborted`);
});
