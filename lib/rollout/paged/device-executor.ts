// The StepExecutor of a device engine: a StepPlan as the flat arrays of one paged step
// (planArrays) plus one row of sampling options per sample to draw, run by the device's
// pagedStep (lib/model's PolicyModel on device 'cuda' or 'emulate'), and the sampled tokens
// handed back per sequence in plan order.
import { mix32 } from '../../murphy/rng.js';
import { RolloutError } from '../types.js';
import type { StepExecutor } from './drive.js';
import type { PagedSampling } from '../../native/paged.js';
import { planArrays, type PlanArrays } from './plan-arrays.js';
import type { StepOutput, StepPlan } from './scheduler.js';

export type { PagedSampling };

export interface PagedStepResult {
  /** [R] one token per sample row. */
  tokens: Int32Array;
  /** [R] its log-prob under the distribution it was sampled from. */
  logprobs: Float32Array;
}

export interface KvInfo {
  bytesPerBlock: number;
  /** Blocks allocated now (0 when released). */
  blocks: number;
  /** Free device memory, or null when the device cannot tell (the emulated device). */
  freeBytes: number | null;
}

/** What a paged step needs from the device engine (PolicyModel on 'cuda' / 'emulate'). */
export interface PagedDevice {
  kvAllocate(o: { blocks: number; blockSize: number }): void | Promise<void>;
  kvRelease(): void | Promise<void>;
  kvInfo(): KvInfo;
  pagedStep(arrays: PlanArrays, sampling: PagedSampling): PagedStepResult | Promise<PagedStepResult>;
}

/**
 * A request seed as the device's 32-bit one: seeds below 2^32 as they are, larger ones
 * (NativeEngine draws up to 2^47) folded by mix32(low 32 bits, high bits).
 */
export function deviceSeed(seed: number): number {
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RolloutError(`seed must be a non-negative integer, got ${seed}`);
  if (seed < 2 ** 32) return seed;
  return mix32(seed >>> 0, Math.floor(seed / 2 ** 32));
}

/** One row of sampling options per sample row of `a`, from each sampling sequence's request. */
export function samplingArrays(plan: StepPlan, a: PlanArrays): PagedSampling {
  const R = a.sampleRows.length;
  const s: PagedSampling = {
    temperature: new Float32Array(R), topP: new Float32Array(R), topK: new Int32Array(R), minP: new Float32Array(R),
    seed: new Uint32Array(R), step: new Int32Array(R),
  };
  let r = 0;
  for (const q of plan.seqs) {
    if (q.sampleIndices.length === 0) continue;
    const o = q.request.sampling ?? {};
    const seed = deviceSeed(q.request.seed ?? 0);
    const step = q.start + q.tokenIds.length - q.request.promptIds.length;
    for (let k = 0; k < q.sampleIndices.length; k++, r++) {
      s.temperature[r] = o.temperature ?? 1;
      s.topP[r] = o.topP ?? 1;
      s.topK[r] = o.topK ?? 0;
      s.minP[r] = o.minP ?? 0;
      s.seed[r] = seed;
      s.step[r] = step;
    }
  }
  if (r !== R) throw new RolloutError(`internal: ${r} sampling rows for ${R} sample rows`);
  return s;
}

/**
 * Splits per-row results back into one list per plan.seqs entry (plan order, sample order).
 * A token -1 (no distribution to sample: NaN or -inf logits) fails the step in one line.
 */
export function splitRows(plan: StepPlan, res: PagedStepResult): StepOutput {
  const R = res.tokens.length;
  let r = 0;
  const tokens: number[][] = [], logprobs: number[][] = [];
  for (const q of plan.seqs) {
    const n = q.sampleIndices.length;
    if (r + n > R) throw new RolloutError(`the device step returned ${R} tokens, the plan draws more`);
    for (let k = r; k < r + n; k++) {
      // the device's answer for a row whose logits are all -inf or NaN
      if (res.tokens[k] < 0) throw new RolloutError(`the device sampled no token for request ${q.requestId} at position ${q.start + q.tokenIds.length}: its logits are NaN or -inf (the model has diverged); resume from an earlier checkpoint or lower the learning rate`);
    }
    tokens.push(Array.from(res.tokens.subarray(r, r + n)));
    logprobs.push(Array.from(res.logprobs.subarray(r, r + n)));
    r += n;
  }
  if (r !== R || res.logprobs.length !== R) throw new RolloutError(`the device step returned ${R} tokens and ${res.logprobs.length} log-probs for ${r} samples`);
  return { tokens, logprobs };
}

/** Executes plans with the device's pagedStep. */
export class DeviceExecutor implements StepExecutor {
  constructor(readonly device: Pick<PagedDevice, 'pagedStep'>) {}

  async execute(plan: StepPlan): Promise<StepOutput> {
    const a = planArrays(plan);
    const res = await this.device.pagedStep(a, samplingArrays(plan, a));
    return splitRows(plan, res);
  }
}
