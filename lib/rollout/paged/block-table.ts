// A sequence's block table (the KV blocks holding its tokens, in order) and the slot
// arithmetic the device kernels use: token position p lives in block table[floor(p / B)] at
// offset p mod B, i.e. at slot table[floor(p / B)] x B + p mod B of the pool.

/** Slot of token position p in the pool. */
export function slotOf(table: readonly number[], p: number, blockSize: number): number {
  return table[Math.floor(p / blockSize)] * blockSize + (p % blockSize);
}

/** Slots of positions start .. start + count - 1 (the slot mapping of one sequence's new tokens). */
export function slotMapping(table: readonly number[], start: number, count: number, blockSize: number): number[] {
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) out[i] = slotOf(table, start + i, blockSize);
  return out;
}

/** Blocks needed to hold `tokens` tokens. */
export function blocksFor(tokens: number, blockSize: number): number {
  return Math.ceil(tokens / blockSize);
}

/** A block copy the device must do before the step's KV writes (copy-on-write of a shared partial block). */
export interface BlockCopy {
  src: number;
  dst: number;
}
