// The engine behind `--backend embedded` (train, eval) and `serve`: on the CPU engine the
// native KV-cache generator (NativeEngine); on the device engine (--device cuda|emulate) the
// paged engine over the same PolicyModel, reading its weights in place (colocated mode:
// docs/rollout.md, "Colocated mode").
import type { StorageDType, TrainConfig } from '../config/schema.js';
import { PolicyModel } from '../model/index.js';
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

export interface LoadEngineOptions extends Partial<Pick<TrainConfig, 'kvCacheFraction' | 'kvCacheBlocks'>> {
  /** cpu: the CPU engine (NativeEngine); cuda / emulate: the device engine with the paged engine. */
  device: 'cpu' | 'cuda' | 'emulate';
  /** The device engine's storage dtype (default bf16). */
  storage?: StorageDType;
  /** The CPU engine: generate on a bf16 copy of the weights (refused on a device engine). */
  bf16Generate?: boolean;
  /** The CPU engine: each generate() returns the memory it freed to the system (`serve`; NativeEngine). */
  releaseHeap?: boolean;
}

/**
 * A model directory and the rollout engine over it (`serve`, `eval --model`): NativeEngine on
 * the CPU engine, the paged engine on a device engine (embeddedEngine).
 */
export async function loadRolloutEngine(dir: string, o: LoadEngineOptions, log: (line: string) => void = () => undefined): Promise<{ engine: RolloutEngine; model: PolicyModel }> {
  if (o.device === 'cpu') {
    const e = await NativeEngine.load(dir, { bf16Generate: o.bf16Generate, releaseHeap: o.releaseHeap });
    return { engine: e, model: e.model };
  }
  const storage = o.storage ?? 'bf16';
  if (o.bf16Generate) throw new Error(`--bf16-generate is for the CPU engine; --device ${o.device} keeps its weights in ${storage} already`);
  const model = await PolicyModel.load(dir, { device: o.device, storage });
  return { engine: embeddedEngine(model, o, log), model };
}
