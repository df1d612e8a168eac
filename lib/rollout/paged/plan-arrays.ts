// A StepPlan as the flat arrays a device step takes (the varlen layout of vLLM's and
// FlashAttention's kernels): the step's tokens concatenated sequence after sequence.
import type { StepPlan } from './scheduler.js';

export interface PlanArrays {
  /** [T] input token ids, T = tokens in the step. */
  inputIds: Int32Array;
  /** [T] position of each token in its sequence (RoPE). */
  positions: Int32Array;
  /** [T] pool slot each token's K and V are written to. */
  slotMapping: Int32Array;
  /** [S + 1] token offset of each sequence's first new token; the last entry is T. */
  queryStartLoc: Int32Array;
  /** [S] context length of each sequence after the step (attention reads positions 0 .. seqLen - 1). */
  seqLens: Int32Array;
  /** [S x maxBlocks] block tables, row-major; entries past a sequence's ceil(seqLen / B) blocks are -1 and never read. */
  blockTables: Int32Array;
  maxBlocks: number;
  /** [L] token index whose logits are computed: the last new token of each sequence that samples. */
  logitsIndices: Int32Array;
  /** [R] for each sample to draw: its row in the L logits rows, and its sample index j (seed stream (seed, j)). */
  sampleRows: Int32Array;
  sampleIndices: Int32Array;
  /** [C x 2] (src, dst) block copies to do before the step's KV writes. */
  copies: Int32Array;
}

export function planArrays(plan: StepPlan): PlanArrays {
  const S = plan.seqs.length;
  let T = 0, L = 0, R = 0, maxBlocks = 0;
  for (const q of plan.seqs) {
    T += q.tokenIds.length;
    if (q.sampleIndices.length > 0) { L++; R += q.sampleIndices.length; }
    maxBlocks = Math.max(maxBlocks, q.blockTable.length);
  }
  const a: PlanArrays = {
    inputIds: new Int32Array(T), positions: new Int32Array(T), slotMapping: new Int32Array(T),
    queryStartLoc: new Int32Array(S + 1), seqLens: new Int32Array(S), blockTables: new Int32Array(S * maxBlocks).fill(-1), maxBlocks,
    logitsIndices: new Int32Array(L), sampleRows: new Int32Array(R), sampleIndices: new Int32Array(R),
    copies: new Int32Array(plan.copies.flatMap((c) => [c.src, c.dst])),
  };
  let t = 0, l = 0, r = 0;
  plan.seqs.forEach((q, i) => {
    a.queryStartLoc[i] = t;
    for (let k = 0; k < q.tokenIds.length; k++, t++) {
      a.inputIds[t] = q.tokenIds[k];
      a.positions[t] = q.start + k;
      a.slotMapping[t] = q.slots[k];
    }
    a.seqLens[i] = q.start + q.tokenIds.length;
    a.blockTables.set(q.blockTable, i * maxBlocks);
    if (q.sampleIndices.length > 0) {
      a.logitsIndices[l] = t - 1;
      for (const j of q.sampleIndices) { a.sampleRows[r] = l; a.sampleIndices[r++] = j; }
      l++;
    }
  });
  a.queryStartLoc[S] = t;
  return a;
}
