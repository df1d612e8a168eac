// How big the paged engine's KV pool is, and taking / giving back its device memory: the pool
// is allocated before a rollout phase from what the device has free then (the training state
// already allocated), and released before the training phase, so one device holds both.
import { RolloutError } from '../types.js';
import { KV_CACHE_DEFAULTS } from './kv-defaults.js';
import { DEFAULT_BLOCK_SIZE } from './kv-pool.js';
import { blocksFor } from './block-table.js';
import { kvBlockBytes, kvBlocksForMemory, type KvShape } from './memory.js';
import type { PagedDevice } from './device-executor.js';

/** The KV pool of one rollout phase. */
export interface KvGrant {
  blocks: number;
  blockSize: number;
  bytesPerBlock: number;
}

/** Device memory for the pool: taken before a rollout phase, given back after it. */
export interface KvLease {
  acquire(): Promise<KvGrant> | KvGrant;
  release(): Promise<void> | void;
}

/** The training config's KV keys (docs/rollout.md, "Colocated mode"). */
export interface KvCacheOptions {
  /** Share of the device's free memory (measured when the pool is taken) that the pool may use. Default 0.9. */
  kvCacheFraction?: number;
  /** Pool size in blocks; overrides kvCacheFraction. */
  kvCacheBlocks?: number | null;
  /** Tokens per block. Default 16. */
  blockSize?: number;
}

export { KV_CACHE_DEFAULTS };

/** A pool of a fixed number of blocks with nothing behind it (the reference model in tests). */
export function fixedKv(blocks: number, blockSize = DEFAULT_BLOCK_SIZE, bytesPerBlock = 0): KvLease {
  return { acquire: () => ({ blocks, blockSize, bytesPerBlock }), release: () => undefined };
}

/**
 * The pool of a device engine: kvCacheBlocks when given, else
 *   floor(kvCacheFraction x freeBytes / (blockSize x kvBytesPerToken))
 * (kvBlocksForMemory), freeBytes read from kvInfo() with the pool released. It must hold
 * at least one full-context sequence (maxModelLen tokens), else one line says what to change.
 */
export function deviceKv(device: Pick<PagedDevice, 'kvAllocate' | 'kvRelease' | 'kvInfo'>, shape: KvShape, maxModelLen: number, o: KvCacheOptions = {}): KvLease {
  const blockSize = o.blockSize ?? DEFAULT_BLOCK_SIZE;
  const fraction = o.kvCacheFraction ?? KV_CACHE_DEFAULTS.kvCacheFraction;
  if (!(fraction > 0 && fraction <= 1)) throw new RolloutError(`kvCacheFraction must be in (0, 1], got ${fraction}`);
  if (o.kvCacheBlocks != null && (!Number.isSafeInteger(o.kvCacheBlocks) || o.kvCacheBlocks < 1)) throw new RolloutError(`kvCacheBlocks must be an integer >= 1, got ${o.kvCacheBlocks}`);
  const bytesPerBlock = kvBlockBytes(shape, blockSize);
  const minBlocks = blocksFor(maxModelLen, blockSize);
  return {
    acquire: async () => {
      let blocks: number;
      if (o.kvCacheBlocks != null) blocks = o.kvCacheBlocks;
      else {
        const free = device.kvInfo().freeBytes ?? KV_CACHE_DEFAULTS.unknownFreeBytes;
        blocks = kvBlocksForMemory({ freeBytes: free, utilization: fraction, blockSize, shape }).blocks;
      }
      if (blocks < minBlocks) {
        throw new RolloutError(`the KV cache has ${blocks} blocks of ${blockSize} tokens but one sequence of the model's context (${maxModelLen} tokens) needs ${minBlocks}; raise kvCacheFraction or kvCacheBlocks, or free device memory`);
      }
      await device.kvAllocate({ blocks, blockSize });
      return { blocks, blockSize, bytesPerBlock };
    },
    release: () => device.kvRelease(),
  };
}
