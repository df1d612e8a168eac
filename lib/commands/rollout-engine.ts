// The engine behind `--backend embedded` (train, eval) and `serve`: on the CPU engine the
// native KV-cache generator (NativeEngine); on the device engine (--device cuda|emulate) the
// paged engine over the same PolicyModel, reading its weights in place (colocated mode:
// docs/rollout.md, "Colocated mode").
import type { TrainConfig } from '../config/schema.js';
import type { PolicyModel } from '../model/index.js';
import { NativeEngine } from '../rollout/engine.js';
import { PagedEngine } from '../rollout/paged-engine.js';
import { KV_CACHE_DEFAULTS } from '../rollout/paged/device-kv.js';
import type { RolloutEngine } from '../rollout/types.js';

/**
 * The rollout engine over `model`: PagedEngine on a device engine ('cuda', 'emulate'),
 * NativeEngine on the CPU engine. `log` gets one line saying which.
 */
export function embeddedEngine(model: PolicyModel, c: Partial<Pick<TrainConfig, 'kvCacheFraction' | 'kvCacheBlocks'>> = {}, log: (line: string) => void = () => undefined): RolloutEngine {
  const { device } = model.engine;
  if (device === 'cpu') return new NativeEngine(model);
  const e = PagedEngine.onPolicy(model, { kvCacheFraction: c.kvCacheFraction, kvCacheBlocks: c.kvCacheBlocks });
  log(`rollouts: paged engine on device '${device}' over the policy's own weights (KV cache: ${c.kvCacheBlocks != null ? `${c.kvCacheBlocks} blocks` : `${c.kvCacheFraction ?? KV_CACHE_DEFAULTS.kvCacheFraction} of the free memory`} per rollout phase, released for training)`);
  return e;
}
