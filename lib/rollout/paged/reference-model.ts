// A deterministic stand-in for the model, for testing the paged KV machinery end to end
// without one. Its "KV" at position p is a rolling hash of the tokens 0..p,
//   kv(-1) = ROOT,  kv(p) = mix(kv(p - 1), token_p),
// written to the pool slot the plan gives for p and computed from the slot of p - 1 read
// through the sequence's block table, so like real KV it depends on the whole prefix and is
// wrong whenever a block table, a slot mapping, a shared block or a copy-on-write is wrong.
// Sample j of a request with seed s after position p is  mix(kv(p), s, j) mod vocab, with a
// made-up log-prob that is as deterministic (so that log-probs are checked through the plumbing).
// runAlone() computes the same tokens with no cache at all: the outputs any schedule must give.
import { mix32 } from '../../murphy/rng.js';
import { RolloutError } from '../types.js';
import { slotOf } from './block-table.js';
import type { FinishReason, PagedRequest, SampleResult, StepOutput, StepPlan } from './scheduler.js';

const ROOT = 0x6a09e667;

/** kv(p) from kv(p - 1) and token p. */
export function rollKv(prev: number, token: number): number {
  return mix32(prev, token);
}

/** The token sample j of a request seeded `seed` draws after a prefix whose last KV is `kv`. */
export function referenceToken(kv: number, seed: number, j: number, vocab: number): number {
  return mix32(kv, seed, j) % vocab;
}

export interface ReferenceModelOptions {
  vocab: number;
  /**
   * After each sampled position, re-read the whole context through the block table and check
   * every slot holds the right position and the rolling hash (attention's reads). O(context)
   * per sampled token: for tests. Default false.
   */
  verify?: boolean;
}

/** The log-prob the reference model reports for that token: in (-10, 0]. */
export function referenceLogprob(kv: number, seed: number, j: number): number {
  return -(mix32(kv, seed, j, 0x51ed) % 10_000) / 1000;
}

/** Executes StepPlans on a simulated KV pool of blockSize-token blocks (grows with the pool). */
export class ReferenceModel {
  private kv = new Uint32Array(0);
  private tok = new Int32Array(0);
  private pos = new Int32Array(0);
  readonly vocab: number;
  readonly verify: boolean;
  /** Tokens whose KV was computed (written), sampled tokens drawn. */
  readonly counts = { written: 0, sampled: 0 };

  constructor(readonly blockSize: number, o: ReferenceModelOptions) {
    this.vocab = o.vocab;
    this.verify = o.verify ?? false;
  }

  execute(plan: StepPlan): StepOutput {
    const bs = this.blockSize;
    let maxSlot = 0;
    for (const c of plan.copies) maxSlot = Math.max(maxSlot, (Math.max(c.src, c.dst) + 1) * bs);
    for (const p of plan.seqs) for (const b of p.blockTable) maxSlot = Math.max(maxSlot, (b + 1) * bs);
    this.ensure(maxSlot);
    // copy-on-write copies first, before any of this step's writes
    for (const c of plan.copies) {
      this.kv.copyWithin(c.dst * bs, c.src * bs, (c.src + 1) * bs);
      this.tok.copyWithin(c.dst * bs, c.src * bs, (c.src + 1) * bs);
      this.pos.copyWithin(c.dst * bs, c.src * bs, (c.src + 1) * bs);
    }
    const logprobs: number[][] = [];
    const tokens = plan.seqs.map((p) => {
      for (let i = 0; i < p.tokenIds.length; i++) {
        const at = p.start + i;
        const s = p.slots[i];
        if (s !== slotOf(p.blockTable, at, bs)) throw new RolloutError(`slot mapping of sequence ${p.seqId} at position ${at}: ${s}, table says ${slotOf(p.blockTable, at, bs)}`);
        let prev = ROOT;
        if (at > 0) {
          const q = slotOf(p.blockTable, at - 1, bs);
          if (this.pos[q] !== at - 1) throw new RolloutError(`sequence ${p.seqId}: slot ${q} holds position ${this.pos[q]}, expected ${at - 1}`);
          prev = this.kv[q];
        }
        this.kv[s] = rollKv(prev, p.tokenIds[i]);
        this.tok[s] = p.tokenIds[i];
        this.pos[s] = at;
        this.counts.written++;
      }
      if (p.sampleIndices.length === 0) { logprobs.push([]); return []; }
      const last = p.start + p.tokenIds.length - 1;
      const kv = this.kv[slotOf(p.blockTable, last, bs)];
      if (this.verify) this.check(p.seqId, p.blockTable, last, kv);
      this.counts.sampled += p.sampleIndices.length;
      logprobs.push(p.sampleIndices.map((j) => referenceLogprob(kv, p.request.seed ?? 0, j)));
      return p.sampleIndices.map((j) => referenceToken(kv, p.request.seed ?? 0, j, this.vocab));
    });
    return { tokens, logprobs };
  }

  private check(seq: number, table: readonly number[], last: number, kv: number): void {
    let h = ROOT;
    for (let at = 0; at <= last; at++) {
      const s = slotOf(table, at, this.blockSize);
      if (this.pos[s] !== at) throw new RolloutError(`sequence ${seq}: slot ${s} holds position ${this.pos[s]}, expected ${at}`);
      h = rollKv(h, this.tok[s]);
      if (this.kv[s] !== h) throw new RolloutError(`sequence ${seq}: KV at position ${at} (slot ${s}) does not match its tokens`);
    }
    if (h !== kv) throw new RolloutError(`sequence ${seq}: KV at ${last} differs from a re-read of its context`);
  }

  private ensure(slots: number): void {
    if (slots <= this.kv.length) return;
    const n = Math.max(slots, this.kv.length * 2);
    const grow = <T extends Uint32Array | Int32Array>(a: T, make: (n: number) => T): T => { const b = make(n); b.set(a); return b; };
    this.kv = grow(this.kv, (k) => new Uint32Array(k));
    this.tok = grow(this.tok, (k) => new Int32Array(k));
    this.pos = grow(this.pos, (k) => new Int32Array(k).fill(-1));
  }
}

/**
 * The reference model's samples for one request with no KV cache: what any schedule (shared
 * or not, preempted or not) must produce. maxModelLen clips maxTokens as the scheduler does.
 */
export function runAlone(req: PagedRequest, vocab: number, maxModelLen: number): SampleResult[] {
  const n = req.n ?? 1;
  const maxTokens = Math.min(req.maxTokens, maxModelLen - req.promptIds.length);
  if (maxTokens <= 0) return Array.from({ length: n }, () => ({ tokenIds: [], logprobs: [], finishReason: 'length' as const, noRoom: true as const }));
  let base = ROOT;
  for (const t of req.promptIds) base = rollKv(base, t);
  const stop = new Set(req.stopTokenIds ?? []);
  return Array.from({ length: n }, (_, j) => {
    let kv = base;
    const out: number[] = [];
    const lps: number[] = [];
    let reason: FinishReason = 'length';
    for (;;) {
      const t = referenceToken(kv, req.seed ?? 0, j, vocab);
      out.push(t);
      lps.push(referenceLogprob(kv, req.seed ?? 0, j));
      if (stop.has(t)) { reason = 'stop'; break; }
      if (out.length >= maxTokens) break;
      kv = rollKv(kv, t);
    }
    return { tokenIds: out, logprobs: lps, finishReason: reason };
  });
}
