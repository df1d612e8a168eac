// The bandwidth bound of a decode step (bench/gpu-generate.bench.ts, issue 14): a decode step
// of B sequences must read every weight the step multiplies by once and each sequence's whole
// KV cache once, so it cannot take less than
//   t_min = (weight bytes + KV bytes) / copy bandwidth
// with, for storage of e bytes per element (bf16: 2, f32: 4),
//   weight bytes = e x (layers x (projections + norms) + final norm + vocab x hidden (the lm
//                  head; a tied one is the embedding matrix) + B x hidden (the B embedding rows
//                  gathered; an untied embedding is read only there))
//   KV bytes     = sum over the B sequences of seqLen_i x kvBytesPerToken
//                  (kvBytesPerToken = 2 x layers x kvHeads x headDim x e; seqLen_i counts the
//                  new token, whose K and V the step writes and attention reads back)
// and the copy bandwidth measured in the same run (copyBuffer: read + write bytes over time).
// Activations, logits and sampling are left out: at B <= 256 they are small next to these.
import { modelShapeFromHfConfig, parameterCount } from '../lib/gpu/memory-plan.js';
import { hfConfig, type ModelSizes } from '../lib/model/index.js';
import { kvBytesPerToken, kvShapeOf } from '../lib/rollout/paged/index.js';

export interface DecodeBytes {
  weights: number;
  kv: number;
  total: number;
}

/** Bytes one decode step over sequences of these context lengths (after the step) must read. */
export function decodeStepBytes(sizes: ModelSizes, storageBytes: number, seqLens: ArrayLike<number>): DecodeBytes {
  const shape = modelShapeFromHfConfig(hfConfig(sizes));
  const p = parameterCount(shape);
  const B = seqLens.length;
  const weights = storageBytes * (shape.layers * p.perLayer + shape.hidden + shape.vocab * shape.hidden + B * shape.hidden);
  let tokens = 0;
  for (let i = 0; i < B; i++) tokens += seqLens[i]!;
  const kv = tokens * kvBytesPerToken(kvShapeOf(shape, storageBytes));
  return { weights, kv, total: weights + kv };
}

/** The fraction of the bound reached: t_min / t_measured = (bytes / copy GB/s) / seconds. */
export function boundFraction(bytes: number, seconds: number, copyGbps: number): number {
  return bytes / (copyGbps * 1e9) / seconds;
}
