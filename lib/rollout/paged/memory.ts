// How many KV blocks fit in a byte budget: the size of one token's keys and values for a model
// shape, and the pool a device can give the rollout phase after the training state.
import type { ModelShape } from '../../gpu/memory-plan.js';
import { RolloutError } from '../types.js';

/** What sizes a token's KV: the model's attention shape and the cache's element type. */
export interface KvShape {
  numLayers: number;
  /** Key/value heads (GQA: fewer than the query heads). */
  numKvHeads: number;
  headDim: number;
  /** Bytes per cached element: 2 for bf16/fp16, 4 for fp32. */
  dtypeBytes: number;
}

/** The KV shape of a model as lib/gpu/memory-plan describes it (config.json's fields); bf16 cache by default. */
export function kvShapeOf(s: Pick<ModelShape, 'layers' | 'kvHeads' | 'headDim'>, dtypeBytes = 2): KvShape {
  return { numLayers: s.layers, numKvHeads: s.kvHeads, headDim: s.headDim, dtypeBytes };
}

function positiveInt(name: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 1) throw new RolloutError(`${name} must be an integer >= 1, got ${v}`);
  return v;
}

/**
 * Bytes of KV cache one token takes over the whole model:
 *   2 (K and V) x numKvHeads x headDim x numLayers x dtypeBytes.
 * Qwen3-0.6B in bf16: 2 x 8 x 128 x 28 x 2 = 114,688 bytes (112 KiB).
 */
export function kvBytesPerToken(s: KvShape): number {
  return 2 * positiveInt('numKvHeads', s.numKvHeads) * positiveInt('headDim', s.headDim) *
    positiveInt('numLayers', s.numLayers) * positiveInt('dtypeBytes', s.dtypeBytes);
}

/** Bytes of one block of `blockSize` tokens. */
export function kvBlockBytes(s: KvShape, blockSize: number): number {
  return kvBytesPerToken(s) * positiveInt('blockSize', blockSize);
}

export interface KvBudgetOptions {
  /** Free device memory once the training state (weights, master weights, moments, gradients) is allocated. */
  freeBytes: number;
  /** Kept back for the rollout phase's other buffers (activations of one step, logits, sampling). Default 0. */
  reserveBytes?: number;
  /** Fraction of what is left that the pool may take (allocator slack, fragmentation). Default 0.9. */
  utilization?: number;
  blockSize: number;
  shape: KvShape;
}

export interface KvBudget {
  blocks: number;
  bytesPerBlock: number;
  /** blocks x bytesPerBlock: what the pool allocates. */
  bytes: number;
  /** Tokens the pool holds: blocks x blockSize. */
  tokens: number;
}

/**
 * Turns "free device memory after the training state" into a block count:
 *   blocks = floor(utilization x (freeBytes - reserveBytes) / (blockSize x kvBytesPerToken)).
 * Fails with one line when not even one block fits.
 */
export function kvBlocksForMemory(o: KvBudgetOptions): KvBudget {
  const reserve = o.reserveBytes ?? 0;
  const utilization = o.utilization ?? 0.9;
  if (!(o.freeBytes >= 0) || !Number.isFinite(o.freeBytes)) throw new RolloutError(`freeBytes must be a byte count >= 0, got ${o.freeBytes}`);
  if (!(reserve >= 0) || !Number.isFinite(reserve)) throw new RolloutError(`reserveBytes must be a byte count >= 0, got ${reserve}`);
  if (!(utilization > 0 && utilization <= 1)) throw new RolloutError(`utilization must be in (0, 1], got ${utilization}`);
  const bytesPerBlock = kvBlockBytes(o.shape, o.blockSize);
  const usable = Math.max(0, o.freeBytes - reserve) * utilization;
  const blocks = Math.floor(usable / bytesPerBlock);
  if (blocks < 1) {
    throw new RolloutError(`no room for a KV cache: ${mib(o.freeBytes)} free, ${mib(reserve)} reserved, one block of ${o.blockSize} tokens needs ${mib(bytesPerBlock / utilization)}; free device memory or lower the reserve`);
  }
  return { blocks, bytesPerBlock, bytes: blocks * bytesPerBlock, tokens: blocks * o.blockSize };
}

function mib(b: number): string {
  return `${(b / 2 ** 20).toFixed(1)} MiB`;
}
