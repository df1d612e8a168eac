// The benchmark configs of the policy model and their matrix products, shared by
// bench/model.bench.ts (whole training / generation steps) and bench/gemm.bench.ts (each product).
import { presets, type ModelSizes } from '../lib/model/index.js';

export interface ModelCase { name: string; sizes: ModelSizes; seqs: number; seqLen: number; trainIters: number; prompts: number; promptLen: number; newTokens: number }

/** "small" (4 layers, hidden 256, vocab 32768) and Qwen3-0.6B's layer shape truncated to 2 layers. */
export function modelCases(quick: boolean): ModelCase[] {
  return [
    { name: 'small', sizes: { ...presets.small, dtype: 'float32' }, seqs: 4, seqLen: 128, trainIters: quick ? 1 : 3, prompts: 4, promptLen: 32, newTokens: quick ? 8 : 32 },
    { name: 'qwen3-0.6b-2layers', sizes: { ...presets['qwen3-0.6b'], numLayers: 2, dtype: 'float32' }, seqs: 2, seqLen: 128, trainIters: quick ? 1 : 2, prompts: 4, promptLen: 32, newTokens: quick ? 4 : 16 },
  ];
}

/** Which product of a linear layer a shape is: the forward, the input gradient or the weight gradient. */
export type ShapeProduct = 'forward' | 'backwardInput' | 'backwardWeight';

/**
 * The model's own matrix products as (name, m, k, n, product): y[m,n] = x[m,k] w[k,n] as a plain
 * GEMM. The linear layer with weight W [out, in] maps to it as: forward m = tokens, k = in,
 * n = out; input gradient m = tokens, k = out, n = in; weight gradient m = out, k = tokens, n = in.
 */
export function gemmShapes(c: ModelCase): [string, number, number, number, ShapeProduct][] {
  const s = c.sizes, T = c.seqs * c.seqLen, q = s.numHeads * s.headDim, kv = s.numKvHeads * s.headDim;
  const H = s.hiddenSize, I = s.intermediateSize;
  return [
    [`${c.name} q fwd`, T, H, q, 'forward'], [`${c.name} k/v fwd`, T, H, kv, 'forward'], [`${c.name} o fwd`, T, q, H, 'forward'],
    [`${c.name} gate/up fwd`, T, H, I, 'forward'], [`${c.name} gate/up dx`, T, I, H, 'backwardInput'], [`${c.name} gate/up dw`, I, T, H, 'backwardWeight'],
    [`${c.name} down fwd`, T, I, H, 'forward'], [`${c.name} down dx`, T, H, I, 'backwardInput'], [`${c.name} down dw`, H, T, I, 'backwardWeight'],
    [`${c.name} lm head fwd`, T, H, s.vocabSize, 'forward'], [`${c.name} decode gate/up`, c.prompts, H, I, 'forward'],
  ];
}
