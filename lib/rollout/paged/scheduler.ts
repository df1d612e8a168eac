// Continuous batching over the paged KV pool: decides what each step computes. The device
// engine (or the reference model in tests) executes the plan and reports the sampled tokens.
//
// A sequence has tokens (prompt, then what it sampled) and numComputed, how many of them have
// KV in its blocks. Each step gives a sequence tokens[numComputed .. numComputed + k); when
// that reaches the end of its tokens, the step samples its next token. Decode is k = 1 on a
// sequence whose KV is complete but for its last sampled token; prefill is a chunk of a
// prompt (or of a preempted sequence's tokens, recomputed).
//
// One step, under a token budget:
//  1. Running sequences in admission order: each decoding one gets 1 token; each partially
//     prefilled one a chunk of what the budget leaves after the decodes still to come. A
//     sequence the pool has no block for preempts the most recently admitted running sequence
//     not yet given work this step (itself when there is none): its blocks are freed (its
//     full blocks stay in the prefix cache) and it goes back to the front of the waiting queue,
//     to be recomputed from its tokens later.
//  2. Waiting sequences in order, while the budget, the pool and maxRunning allow: each reuses
//     the longest cached block-aligned prefix of its tokens and gets a first chunk.
// A request with n > 1 samples is one sequence until its prompt is computed; the step that
// completes it samples n tokens, and the sequence forks into n that share every block (the
// last, partial one copied on write by each child that appends to it).
import { contextBudget } from '../params.js';
import { RolloutError } from '../types.js';
import { blocksFor, slotMapping, type BlockCopy } from './block-table.js';
import type { KvPool } from './kv-pool.js';
import type { CacheEntry } from './prefix-cache.js';

export interface PagedRequest {
  promptIds: readonly number[];
  /** Samples of the prompt. Default 1. */
  n?: number;
  /** Completion tokens per sample, clipped to what the context leaves. */
  maxTokens: number;
  /** Token ids that end a sample (kept in its tokens). */
  stopTokenIds?: readonly number[];
  /** Sampling seed, passed through to the plan (sample j draws from the stream (seed, j)). */
  seed?: number;
  /** Sampling options for the executor (0 = greedy / off), passed through untouched. */
  sampling?: Readonly<{ temperature?: number; topP?: number; topK?: number; minP?: number }>;
}

export interface SchedulerOptions {
  /** Prompt + completion tokens a sequence may hold (the model's context). */
  maxModelLen: number;
  /** Tokens computed per step, decodes and prefill chunks together. Default 2048. */
  tokenBudget?: number;
  /** Most sequences running at once. Default 256. */
  maxRunning?: number;
  /** Prefix cache and forking of n samples. Default true; false computes every sample's prompt itself. */
  prefixSharing?: boolean;
}

export const SCHEDULER_DEFAULTS = { tokenBudget: 2048, maxRunning: 256, prefixSharing: true } as const;

/** 'abort': ended by Scheduler.abort() (its tokens so far are kept). */
export type FinishReason = 'stop' | 'length' | 'abort';

export interface SampleResult {
  tokenIds: number[];
  /** Log-prob of each token under the distribution it was sampled from, when the executor reports them. */
  logprobs?: number[];
  finishReason: FinishReason;
  /** The prompt left no room in the context: no token was sampled. */
  noRoom?: true;
}

/** One sequence's work in a step. */
export interface PlannedSeq {
  seqId: number;
  requestId: number;
  /** Position of the first new token (= tokens already in the KV cache). */
  start: number;
  /** Input tokens at positions start .. start + tokenIds.length - 1. */
  tokenIds: number[];
  /** The sequence's blocks (valid until complete()). */
  blockTable: readonly number[];
  /** Pool slot of each new token's KV. */
  slots: number[];
  /** Samples to draw from the logits of the last new token: their sample indices (empty mid-prefill). */
  sampleIndices: number[];
  /** 'decode': one token after a sampled one; 'prefill': a chunk of a prompt or a recompute. */
  kind: 'decode' | 'prefill';
  request: Readonly<PagedRequest>;
}

export interface StepCounts {
  prefillTokens: number;
  decodeTokens: number;
  /** Prompt tokens not computed thanks to sharing: prefix-cache hits plus (n - 1) x prompt at each fork. */
  prefillSaved: number;
  /** The part of prefillSaved that prefix-cache hits gave (the rest: forks). */
  cacheHitTokens: number;
  preemptions: number;
  copies: number;
}

/**
 * What executing a step gives back, per plan.seqs[i]: the tokens drawn (its
 * sampleIndices.length of them, in that order; none mid-prefill) and, optionally, their
 * log-probs under the distribution actually sampled from.
 */
export interface StepOutput {
  tokens: readonly (readonly number[])[];
  logprobs?: readonly (readonly number[])[];
}

/** What the device runs in one step. */
export interface StepPlan {
  step: number;
  /** Copy-on-write block copies, to do before this step's KV writes. */
  copies: BlockCopy[];
  seqs: PlannedSeq[];
  /** Sequences preempted while planning this step (their blocks are freed). */
  preempted: number[];
  counts: StepCounts;
}

export interface SchedulerMetrics extends StepCounts {
  steps: number;
  /** Largest number of sequences in one step. */
  maxBatch: number;
}

interface ReqState {
  id: number;
  req: Readonly<PagedRequest>;
  n: number;
  promptLen: number;
  /** maxTokens clipped to the context. */
  maxTokens: number;
  stop: Set<number>;
  samples: (SampleResult | undefined)[];
  left: number;
}

interface Seq {
  id: number;
  r: ReqState;
  /** Sample index; for an unforked sequence of an n-sample request, 0 and fork = n. */
  j: number;
  fork: number;
  tokens: number[];
  /** Log-probs of its sampled tokens (kept through preemption: recompute does not resample). */
  logprobs: number[];
  numComputed: number;
  table: number[];
  /** Leading full blocks in the prefix cache, and the entry of the last of them. */
  cachedBlocks: number;
  last: CacheEntry | null;
  /** KV is complete up to its last sampled token: it decodes. */
  decoding: boolean;
  state: 'waiting' | 'running' | 'done';
  /** Its full blocks go into the prefix cache (false when the cache was released while it ran: its KV may be stale). */
  cacheable: boolean;
}

function positiveInt(name: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 1) throw new RolloutError(`${name} must be an integer >= 1, got ${v}`);
  return v;
}

export class Scheduler {
  readonly pool: KvPool;
  readonly maxModelLen: number;
  readonly tokenBudget: number;
  readonly maxRunning: number;
  readonly prefixSharing: boolean;
  private readonly waiting: Seq[] = [];
  /** Admission order, oldest first. */
  private running: Seq[] = [];
  private readonly requests = new Map<number, ReqState>();
  private nextReq = 0;
  private nextSeq = 0;
  private stepNo = 0;
  private pendingPlan: StepPlan | null = null;
  /** Sequences aborted since the last schedule(): complete() skips them. */
  private readonly aborted = new Set<number>();
  readonly metrics: SchedulerMetrics = { steps: 0, prefillTokens: 0, decodeTokens: 0, prefillSaved: 0, cacheHitTokens: 0, preemptions: 0, copies: 0, maxBatch: 0 };

  constructor(pool: KvPool, o: SchedulerOptions) {
    this.pool = pool;
    this.maxModelLen = positiveInt('maxModelLen', o.maxModelLen);
    this.tokenBudget = positiveInt('tokenBudget', o.tokenBudget ?? SCHEDULER_DEFAULTS.tokenBudget);
    this.maxRunning = positiveInt('maxRunning', o.maxRunning ?? SCHEDULER_DEFAULTS.maxRunning);
    this.prefixSharing = o.prefixSharing ?? SCHEDULER_DEFAULTS.prefixSharing;
  }

  /** Sequences waiting or running. */
  get hasWork(): boolean { return this.waiting.length > 0 || this.running.length > 0; }
  get numWaiting(): number { return this.waiting.length; }
  get numRunning(): number { return this.running.length; }

  /**
   * Queues a request; returns its id. A prompt that leaves no room in the context finishes at
   * once with 'length' and no tokens. A request one sequence of which could not fit in the
   * whole pool is refused with one line.
   */
  submit(req: PagedRequest): number {
    const n = positiveInt('n', req.n ?? 1);
    positiveInt('maxTokens', req.maxTokens);
    const promptLen = req.promptIds.length;
    if (promptLen < 1) throw new RolloutError('promptIds must hold at least one token');
    const maxTokens = contextBudget(req.maxTokens, promptLen, this.maxModelLen);
    const bs = this.pool.blockSize;
    // the last sampled token's KV is never computed
    const need = blocksFor(promptLen + Math.max(0, maxTokens) - 1, bs);
    if (maxTokens > 0 && need > this.pool.capacity) {
      throw new RolloutError(`a request of ${promptLen} prompt + ${maxTokens} completion tokens needs ${need} KV blocks of ${bs} tokens but the pool has ${this.pool.capacity}; lower maxTokens or give the KV cache more memory`);
    }
    const id = this.nextReq++;
    const r: ReqState = { id, req, n, promptLen, maxTokens, stop: new Set(req.stopTokenIds ?? []), samples: new Array(n).fill(undefined), left: n };
    this.requests.set(id, r);
    if (maxTokens <= 0) {
      r.samples = Array.from({ length: n }, () => ({ tokenIds: [], logprobs: [], finishReason: 'length', noRoom: true }));
      r.left = 0;
      return id;
    }
    const forkable = this.prefixSharing;
    for (let j = 0; j < (forkable ? 1 : n); j++) {
      this.waiting.push(this.newSeq(r, j, forkable ? n : 1, [...req.promptIds]));
    }
    return id;
  }

  /** Whether request `id` has all its samples. */
  isDone(id: number): boolean { return this.req(id).left === 0; }

  /** The samples of a finished request, in sample order. */
  result(id: number): SampleResult[] {
    const r = this.req(id);
    if (r.left > 0) throw new RolloutError(`request ${id} has ${r.left} samples still running`);
    return r.samples as SampleResult[];
  }

  /** Forgets a finished request's results. */
  forget(id: number): void {
    if (this.isDone(id)) this.requests.delete(id);
  }

  /** Plans the next step. Call complete() with its sampled tokens before planning another. */
  schedule(): StepPlan {
    if (this.pendingPlan !== null) throw new RolloutError(`step ${this.pendingPlan.step} was planned but not completed`);
    this.aborted.clear();
    const counts: StepCounts = { prefillTokens: 0, decodeTokens: 0, prefillSaved: 0, cacheHitTokens: 0, preemptions: 0, copies: 0 };
    const plan: StepPlan = { step: this.stepNo++, copies: [], seqs: [], preempted: [], counts };
    let budget = this.tokenBudget;
    const given = new Set<Seq>();
    const order = [...this.running];
    let decodesAhead = order.reduce((a, s) => a + (s.decoding ? 1 : 0), 0);
    for (const s of order) {
      if (budget < 1) break;
      if (s.state !== 'running') continue; // preempted earlier in this step
      if (s.decoding) decodesAhead--;
      const want = s.decoding ? 1 : Math.min(s.tokens.length - s.numComputed, budget - Math.min(decodesAhead, budget));
      if (want < 1) continue;
      // a decode needs its token; a chunk takes what fits; when nothing fits, preempt
      let k = this.pool.fitAppend(s.table, s.numComputed, want);
      while (k < 1 && s.state === 'running') {
        const v = this.victim(given);
        if (v.decoding && v !== s) decodesAhead--;
        this.preempt(v, plan);
        k = this.pool.fitAppend(s.table, s.numComputed, want);
      }
      if (s.state !== 'running') continue;
      this.give(s, k, plan, given);
      budget -= k;
    }
    // admit waiting sequences
    while (this.waiting.length > 0 && budget >= 1 && this.running.length < this.maxRunning) {
      const s = this.waiting[0];
      const hits = this.prefixSharing ? this.pool.cache.match(s.tokens, Math.floor((s.tokens.length - 1) / this.pool.blockSize)) : [];
      const hitTokens = hits.length * this.pool.blockSize;
      // hits nobody holds count as available until this sequence takes them
      let hitsFree = 0;
      for (const e of hits) if (this.pool.alloc.refCount(e.block) === 1) hitsFree++;
      const want = Math.min(s.tokens.length - hitTokens, budget);
      const table = hits.map((e) => e.block);
      const k = this.pool.fitAppend(table, hitTokens, want, this.pool.available - hitsFree);
      if (k < 1) break;
      this.waiting.shift();
      for (const b of table) this.pool.retain(b);
      s.table = table;
      s.numComputed = hitTokens;
      s.cachedBlocks = hits.length;
      s.last = hits.length > 0 ? hits[hits.length - 1] : null;
      counts.prefillSaved += hitTokens;
      counts.cacheHitTokens += hitTokens;
      s.state = 'running';
      this.running.push(s);
      this.give(s, k, plan, given);
      budget -= k;
    }
    if (plan.seqs.length === 0 && this.hasWork) {
      throw new RolloutError(`scheduler stalled at step ${plan.step}: ${this.waiting.length} waiting, ${this.running.length} running, ${this.pool.available} of ${this.pool.capacity} blocks available`);
    }
    const m = this.metrics;
    m.steps = plan.step + 1;
    m.maxBatch = Math.max(m.maxBatch, plan.seqs.length);
    m.prefillTokens += counts.prefillTokens;
    m.decodeTokens += counts.decodeTokens;
    m.prefillSaved += counts.prefillSaved;
    m.cacheHitTokens += counts.cacheHitTokens;
    m.preemptions += counts.preemptions;
    m.copies += counts.copies;
    this.pendingPlan = plan;
    return plan;
  }

  /**
   * Applies a step's results (StepOutput). Returns the requests that finished.
   */
  complete(plan: StepPlan, out: StepOutput): number[] {
    if (this.pendingPlan !== plan) throw new RolloutError(`complete() got step ${plan.step}, which is not the step planned last`);
    const sampled = out.tokens, lps = out.logprobs;
    if (sampled.length !== plan.seqs.length) throw new RolloutError(`complete(): ${sampled.length} sample lists for ${plan.seqs.length} sequences`);
    if (lps !== undefined && lps.length !== plan.seqs.length) throw new RolloutError(`complete(): ${lps.length} log-prob lists for ${plan.seqs.length} sequences`);
    plan.seqs.forEach((p, i) => {
      const n = p.sampleIndices.length, got = sampled[i].length, lp = lps?.[i];
      if (got !== n) throw new RolloutError(`complete(): sequence ${p.seqId} needs ${n} sampled tokens, got ${got}`);
      if (lp !== undefined && lp.length !== n) throw new RolloutError(`complete(): sequence ${p.seqId} has ${n} sampled tokens but ${lp.length} log-probs`);
    });
    this.pendingPlan = null;
    const byId = new Map(this.running.map((s) => [s.id, s]));
    const done: Seq[] = [];
    const finishedReqs: number[] = [];
    for (let i = 0; i < plan.seqs.length; i++) {
      const p = plan.seqs[i];
      const s = byId.get(p.seqId);
      if (s === undefined) {
        if (this.aborted.has(p.seqId)) continue;
        throw new RolloutError(`internal: sequence ${p.seqId} of step ${plan.step} is not running`);
      }
      s.numComputed += p.tokenIds.length;
      if (this.prefixSharing) this.cacheFullBlocks(s);
      if (p.sampleIndices.length === 0) continue;
      const toks = sampled[i], lp = lps?.[i];
      const family = [s];
      if (s.fork > 1) {
        const at = this.running.indexOf(s);
        for (let j = 1; j < s.fork; j++) {
          const c = this.newSeq(s.r, j, 1, [...s.tokens]);
          c.logprobs = [...s.logprobs];
          c.table = this.pool.fork(s.table);
          c.numComputed = s.numComputed;
          c.cachedBlocks = s.cachedBlocks;
          c.last = s.last;
          c.state = 'running';
          c.cacheable = s.cacheable;
          family.push(c);
        }
        this.running.splice(at + 1, 0, ...family.slice(1));
        this.metrics.prefillSaved += (s.fork - 1) * s.r.promptLen;
        plan.counts.prefillSaved += (s.fork - 1) * s.r.promptLen;
        s.fork = 1;
      }
      family.forEach((f, q) => {
        const t = toks[q];
        f.tokens.push(t);
        if (lp !== undefined) f.logprobs.push(lp[q]);
        f.decoding = true;
        const produced = f.tokens.length - f.r.promptLen;
        if (f.r.stop.has(t)) this.finish(f, 'stop', done);
        else if (produced >= f.r.maxTokens) this.finish(f, 'length', done);
      });
    }
    if (done.length > 0) {
      const gone = new Set(done);
      this.running = this.running.filter((s) => !gone.has(s));
      for (const s of done) if (s.r.left === 0 && !finishedReqs.includes(s.r.id)) finishedReqs.push(s.r.id);
    }
    return finishedReqs;
  }

  /**
   * Drops the prefix cache (new weights make it stale; the training phase wants the memory).
   * Running sequences keep their blocks. Returns the blocks and bytes given back.
   */
  releaseCached(): { blocks: number; bytes: number } {
    // what running sequences compute from now on extends KV that may predate new weights: not cached
    for (const s of this.running) s.cacheable = false;
    return this.pool.releaseCached();
  }

  /**
   * Ends a request now: its waiting sequences leave the queue, its running ones free their
   * blocks, and every unfinished sample ends with 'abort' and the tokens it had. Allowed
   * between schedule() and complete(): the aborted sequences' results in that step are ignored.
   */
  abort(id: number): void {
    const r = this.req(id);
    if (r.left === 0) return;
    const end = (s: Seq) => {
      const js = s.fork > 1 ? Array.from({ length: s.fork }, (_, q) => s.j + q) : [s.j];
      for (const j of js) r.samples[j] = this.sample(s, 'abort');
      // a plan in flight may still read this table: release its blocks (not reused before the
      // next schedule()) and leave the array as it is
      for (let i = s.table.length - 1; i >= 0; i--) this.pool.release(s.table[i]);
      s.table = [];
      s.state = 'done';
      this.aborted.add(s.id);
    };
    for (const s of this.waiting) if (s.r === r) end(s);
    for (const s of this.running) if (s.r === r) end(s);
    this.waiting.splice(0, this.waiting.length, ...this.waiting.filter((s) => s.r !== r));
    this.running = this.running.filter((s) => s.r !== r);
    r.left = 0;
  }

  /**
   * Ends sample j of request `id` now, as abort() ends a whole request: it keeps the tokens it
   * has, ends with 'abort' and frees its blocks; the request's other samples go on. Only a
   * sample that runs as its own sequence can end alone: false (nothing changed) while it is
   * still part of an n-sample prompt not yet forked. True when it ended (or had already).
   * Allowed between schedule() and complete(), as abort().
   */
  abortSample(id: number, j: number): boolean {
    const r = this.req(id);
    if (!(Number.isInteger(j) && j >= 0 && j < r.n)) throw new RolloutError(`request ${id} has no sample ${j} (n = ${r.n})`);
    if (r.samples[j] !== undefined) return true;
    const own = (q: Seq) => q.r === r && q.j === j && q.fork === 1;
    const s = this.running.find(own) ?? this.waiting.find(own);
    if (s === undefined) return false;
    r.samples[j] = this.sample(s, 'abort');
    for (let i = s.table.length - 1; i >= 0; i--) this.pool.release(s.table[i]);
    s.table = [];
    s.state = 'done';
    this.aborted.add(s.id);
    this.running = this.running.filter((q) => q !== s);
    const w = this.waiting.indexOf(s);
    if (w >= 0) this.waiting.splice(w, 1);
    r.left--;
    return true;
  }

  /** Re-sizes the pool between phases; nothing may be waiting or running. */
  resizePool(blocks: number): void {
    if (this.hasWork) throw new RolloutError(`cannot resize the KV pool with ${this.running.length} sequences running and ${this.waiting.length} waiting; let them finish first`);
    this.pool.releaseCached();
    this.pool.resize(blocks);
  }

  /** Checks every block's reference count against the running tables and the cache (throws on a violation). */
  audit(): void {
    for (const s of this.waiting) if (s.table.length > 0) throw new RolloutError(`audit: waiting sequence ${s.id} holds blocks`);
    for (const s of this.running) {
      if (s.table.length !== blocksFor(s.numComputed, this.pool.blockSize) && this.pendingPlan === null) {
        throw new RolloutError(`audit: sequence ${s.id} has ${s.table.length} blocks for ${s.numComputed} computed tokens`);
      }
    }
    this.pool.audit(this.running.map((s) => s.table));
  }

  private req(id: number): ReqState {
    const r = this.requests.get(id);
    if (r === undefined) throw new RolloutError(`no request ${id}`);
    return r;
  }

  private newSeq(r: ReqState, j: number, fork: number, tokens: number[]): Seq {
    return { id: this.nextSeq++, r, j, fork, tokens, logprobs: [], numComputed: 0, table: [], cachedBlocks: 0, last: null, decoding: false, state: 'waiting', cacheable: true };
  }

  /** The most recently admitted running sequence not yet given work this step. */
  private victim(given: Set<Seq>): Seq {
    for (let i = this.running.length - 1; i >= 0; i--) if (!given.has(this.running[i])) return this.running[i];
    throw new RolloutError('no sequence to preempt');
  }

  private preempt(s: Seq, plan: StepPlan): void {
    this.pool.freeTable(s.table);
    s.numComputed = 0;
    s.cachedBlocks = 0;
    s.last = null;
    s.decoding = false;
    s.cacheable = true; // recomputed from its tokens with the current weights
    this.running.splice(this.running.indexOf(s), 1);
    this.waiting.unshift(s);
    plan.preempted.push(s.id);
    s.state = 'waiting';
    plan.counts.preemptions++;
  }

  private give(s: Seq, k: number, plan: StepPlan, given: Set<Seq>): void {
    const start = s.numComputed;
    if (!this.pool.append(s.table, start, k, plan.copies)) throw new RolloutError(`internal: no blocks for sequence ${s.id} after fitting`);
    const end = start + k;
    const kind = s.decoding ? 'decode' : 'prefill';
    plan.seqs.push({
      seqId: s.id, requestId: s.r.id, start, tokenIds: s.tokens.slice(start, end), blockTable: s.table,
      slots: slotMapping(s.table, start, k, this.pool.blockSize),
      sampleIndices: end === s.tokens.length ? Array.from({ length: s.fork }, (_, q) => s.j + q) : [],
      kind, request: s.r.req,
    });
    given.add(s);
    const c = plan.counts;
    if (kind === 'decode') c.decodeTokens += k;
    else c.prefillTokens += k;
    c.copies = plan.copies.length;
  }

  private cacheFullBlocks(s: Seq): void {
    if (!s.cacheable) return;
    const full = Math.floor(s.numComputed / this.pool.blockSize);
    while (s.cachedBlocks < full) {
      s.last = this.pool.register(s.last, s.tokens, s.table, s.cachedBlocks);
      s.cachedBlocks++;
    }
  }

  private sample(s: Seq, reason: FinishReason): SampleResult {
    const tokenIds = s.tokens.slice(s.r.promptLen);
    return s.logprobs.length === tokenIds.length ? { tokenIds, logprobs: [...s.logprobs], finishReason: reason } : { tokenIds, finishReason: reason };
  }

  private finish(s: Seq, reason: FinishReason, done: Seq[]): void {
    s.r.samples[s.j] = this.sample(s, reason);
    s.r.left--;
    s.state = 'done';
    this.pool.freeTable(s.table);
    done.push(s);
  }
}
