// Packing training samples into micro-batches by a token budget.
import type { TrainingSample } from '../murphy/flatten.js';
import type { TrainBatch } from '../model/index.js';

export interface PackedMicroBatch {
  batch: TrainBatch;
  /** Samples in this micro-batch, in packing order. */
  samples: TrainingSample[];
  /** Tokens (prompt + completion) of all sequences. */
  tokens: number;
  /** Tokens in the loss (completion tokens). */
  lossTokens: number;
}

/** Sequence length of a sample: prompt + completion. */
export function sampleTokens(s: TrainingSample): number {
  return s.promptIds.length + s.completionIds.length;
}

/**
 * Groups samples into bins of at most `budget` tokens: first-fit over samples sorted by
 * length, longest first (ties keep input order, so packing is deterministic). A sample
 * longer than the budget gets a bin of its own.
 */
export function planMicroBatches(samples: readonly TrainingSample[], budget: number): TrainingSample[][] {
  if (!(budget >= 1)) throw new Error(`micro-batch token budget must be >= 1, got ${budget}`);
  const order = samples.map((s, i) => [sampleTokens(s), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  const bins: { used: number; items: number[] }[] = [];
  for (const [len, i] of order) {
    let bin = bins.find((b) => b.used + len <= budget);
    if (!bin) {
      bin = { used: 0, items: [] };
      bins.push(bin);
    }
    bin.used += len;
    bin.items.push(i);
  }
  return bins.map((b) => b.items.sort((x, y) => x - y).map((i) => samples[i]!));
}

/**
 * A packed TrainBatch: tokens = prompt ++ completion per sample; mask = 1 on completion
 * tokens; advantages = the sample's advantage on its completion tokens; oldLogp = the
 * sample's rollout log-probs (or `oldLogp(sample)` when given, e.g. scored by the policy).
 */
export function packSamples(samples: readonly TrainingSample[], oldLogp?: (s: TrainingSample, k: number) => number[] | undefined): PackedMicroBatch {
  let total = 0;
  for (const s of samples) total += sampleTokens(s);
  const tokens = new Int32Array(total);
  const positions = new Int32Array(total);
  const mask = new Uint8Array(total);
  const adv = new Float32Array(total);
  const old = new Float32Array(total);
  const seqOffsets = new Int32Array(samples.length + 1);
  let o = 0;
  let lossTokens = 0;
  samples.forEach((s, k) => {
    seqOffsets[k] = o;
    const P = s.promptIds.length;
    for (let i = 0; i < P; i++) {
      tokens[o + i] = s.promptIds[i]!;
      positions[o + i] = i;
    }
    const lp = oldLogp?.(s, k) ?? s.logprobs;
    for (let i = 0; i < s.completionIds.length; i++) {
      const t = o + P + i;
      tokens[t] = s.completionIds[i]!;
      positions[t] = P + i;
      mask[t] = 1;
      adv[t] = s.advantage;
      old[t] = lp ? lp[i]! : 0;
    }
    lossTokens += s.completionIds.length;
    o += P + s.completionIds.length;
  });
  seqOffsets[samples.length] = o;
  const hasOld = samples.length > 0 && samples.every((s, k) => (oldLogp?.(s, k) ?? s.logprobs) !== undefined);
  return {
    batch: { tokens, positions, seqOffsets, mask, advantages: adv, oldLogp: hasOld ? old : undefined },
    samples: samples.slice(),
    tokens: total,
    lossTokens,
  };
}
