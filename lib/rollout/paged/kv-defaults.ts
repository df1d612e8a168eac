// The paged KV cache's defaults, apart from the device cache (device-kv.ts re-exports them): the
// CLI's option tables read them without loading the rollout engine.
import { SCHEMA } from '../../config/schema.js';

export const KV_CACHE_DEFAULTS = {
  /** The training config's default (one source: lib/config/schema.ts). */
  kvCacheFraction: SCHEMA.kvCacheFraction.default as number,
  /** The budget when the device cannot tell its free memory (the emulated device, on the host). */
  unknownFreeBytes: 64 * 2 ** 20,
} as const;
