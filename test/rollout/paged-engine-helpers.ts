// Shared set-up of the PagedEngine tests: engine requests, the reference model as executor, a
// gate that holds a step until the test releases it, and a fake paged device that computes the
// reference model's tokens from the flat arrays of a step (what DeviceExecutor sends).
import { rollKv, referenceLogprob, referenceToken, runAlone, type PagedRequest, type SampleResult, type StepPlan } from '../../lib/rollout/paged/index.js';
import type { StepExecutor } from '../../lib/rollout/paged/drive.js';
import type { KvInfo, PagedDevice, PagedSampling, PagedStepResult } from '../../lib/rollout/paged/device-executor.js';
import type { PlanArrays } from '../../lib/rollout/paged/plan-arrays.js';
import assert from 'node:assert/strict';
import type { EngineRequest, EngineSample, RolloutEngine } from '../../lib/rollout/types.js';

export const VOCAB = 37;
const ROOT = 0x6a09e667;

export function req(promptIds: number[], o: Partial<EngineRequest> = {}): EngineRequest {
  return { promptIds, n: 1, maxTokens: 20, temperature: 1, topP: 1, topK: 0, minP: 0, seed: 7, stopTokenIds: [], ...o };
}

/** What the reference model gives the request alone, as EngineSamples. */
export function alone(r: EngineRequest, maxModelLen: number): EngineSample[] {
  const p: PagedRequest = { promptIds: r.promptIds, n: r.n, maxTokens: r.maxTokens, seed: r.seed, stopTokenIds: r.stopTokenIds };
  return runAlone(p, VOCAB, maxModelLen).map((s: SampleResult) => ({ tokenIds: s.tokenIds, logprobs: s.logprobs ?? [], finishReason: s.finishReason }));
}

/** Wraps an executor: records each plan; `hold(step)` makes that step wait for release(). */
export class Gate implements StepExecutor {
  readonly plans: StepPlan[] = [];
  private held = new Map<number, { reached: () => void; go: Promise<void>; release: () => void; reachedP: Promise<void> }>();
  constructor(readonly inner: StepExecutor) {}

  /** Step number `step` (0-based over this executor) waits; returns when it is reached and a release function. */
  hold(step: number): { reached: Promise<void>; release: () => void } {
    let reached!: () => void, release!: () => void;
    const reachedP = new Promise<void>((r) => { reached = r; });
    const go = new Promise<void>((r) => { release = r; });
    this.held.set(step, { reached, go, release, reachedP });
    return { reached: reachedP, release };
  }

  async execute(plan: StepPlan) {
    const k = this.plans.length;
    this.plans.push(plan);
    const h = this.held.get(k);
    if (h !== undefined) {
      h.reached();
      await h.go;
    }
    return this.inner.execute(plan);
  }
}

/**
 * A fake device: its pool is an array of rolling hashes (the reference model's "KV"), written
 * at slotMapping and read through blockTables; sample row r draws referenceToken(kv, seed, j).
 * It records the sampling rows (and each row's step and position sampled) and counts calls.
 */
export class FakeDevice implements PagedDevice {
  kv = new Uint32Array(0);
  blocks = 0;
  blockSize = 0;
  readonly calls = { allocate: 0, release: 0, steps: 0 };
  readonly sampling: PagedSampling[] = [];
  /** Per sample row drawn: its step and the position it samples. */
  readonly steps: { step: number; position: number }[] = [];
  constructor(readonly freeBytes: number | null = null) {}

  kvAllocate(o: { blocks: number; blockSize: number }): void {
    if (this.blocks > 0) throw new Error('kvAllocate twice without kvRelease');
    this.blocks = o.blocks;
    this.blockSize = o.blockSize;
    this.kv = new Uint32Array(o.blocks * o.blockSize);
    this.calls.allocate++;
  }

  kvRelease(): void {
    this.blocks = 0;
    this.kv = new Uint32Array(0);
    this.calls.release++;
  }

  kvInfo(): KvInfo {
    return { bytesPerBlock: 0, blocks: this.blocks, freeBytes: this.freeBytes };
  }

  async pagedStep(a: PlanArrays, s: PagedSampling): Promise<PagedStepResult> {
    if (this.blocks === 0) throw new Error('pagedStep with no KV pool allocated');
    this.calls.steps++;
    this.sampling.push(s);
    const B = this.blockSize;
    for (let c = 0; c < a.copies.length; c += 2) this.kv.copyWithin(a.copies[c + 1] * B, a.copies[c] * B, (a.copies[c] + 1) * B);
    const S = a.seqLens.length;
    for (let i = 0; i < S; i++) {
      for (let t = a.queryStartLoc[i]; t < a.queryStartLoc[i + 1]; t++) {
        const p = a.positions[t];
        const prev = p === 0 ? ROOT : this.kv[a.blockTables[i * a.maxBlocks + Math.floor((p - 1) / B)] * B + ((p - 1) % B)];
        this.kv[a.slotMapping[t]] = rollKv(prev, a.inputIds[t]);
      }
    }
    const R = a.sampleRows.length;
    const tokens = new Int32Array(R), logprobs = new Float32Array(R);
    for (let r = 0; r < R; r++) {
      const t = a.logitsIndices[a.sampleRows[r]];
      this.steps.push({ step: s.step[r], position: a.positions[t] + 1 });
      const kv = this.kv[a.slotMapping[t]];
      tokens[r] = referenceToken(kv, s.seed[r], a.sampleIndices[r], VOCAB);
      logprobs[r] = referenceLogprob(kv, s.seed[r], a.sampleIndices[r]);
    }
    await new Promise<void>((ok) => setImmediate(ok));
    return { tokens, logprobs };
  }
}

/**
 * Runs `reqs` (concurrently) through a PagedEngine and one at a time through NativeEngine on
 * the CPU engine with the same weights; asserts equal token ids and log-probs within `lpTol`
 * (relative to max(1, |lp|)). Shared by the emulated test and test/gpu/paged-engine.test.ts.
 */
export async function checkAgainstNative(paged: RolloutEngine, cpu: RolloutEngine, reqs: EngineRequest[], lpTol: number, what: string): Promise<EngineSample[][]> {
  const got = await Promise.all(reqs.map((r) => paged.generate([r]).then((x) => x[0])));
  for (const [k, r] of reqs.entries()) {
    const [want] = await cpu.generate([r]);
    got[k].forEach((g, j) => {
      assert.deepEqual(g.tokenIds, want[j].tokenIds, `${what}: request ${k} sample ${j} (seed ${r.seed})`);
      assert.equal(g.finishReason, want[j].finishReason, `${what}: request ${k} sample ${j}`);
      g.logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - want[j].logprobs[t]) <= lpTol * Math.max(1, Math.abs(lp)), `${what}: request ${k} sample ${j} log-prob ${t}: ${lp} vs ${want[j].logprobs[t]}`));
    });
  }
  return got;
}
