// Which channel rank 0 of a weight-sync group opens, from what the servers' workers said in
// murphy_nccl_info, and the client's weightSync option for a `--weight-sync` mode:
//   - every worker is `murphy-native serve`'s loopback fake (NCCL version 'loopback'):
//     `nccl` opens the loopback channel (lib/rollout/weight-sync-loopback.ts: bf16 buckets over
//     TCP on 127.0.0.1; the servers must be on this machine); `auto` keeps the disk sync, which
//     moves the exact f32 weights (a refusal, said once);
//   - every worker is vLLM's: NCCL from this process's CUDA device (NcclChannel);
//   - a mix: refused (one group cannot be both).
import { isLoopback } from './server.js';
import type { WeightSync } from './types.js';
import type { VllmBackend } from './vllm.js';
import { LoopbackChannel } from './weight-sync-loopback.js';
import { LOOPBACK_WORKER } from './weight-sync-serve.js';
import { NcclChannel, NcclWeightSync, WeightSyncRefused, type ServerWorkers, type SyncChannel, type WeightSyncMode } from './weight-sync.js';

/** Whether a server's murphy_nccl_info answer is serve's loopback fake. */
function isLoopbackFake(w: ServerWorkers): boolean {
  return Array.isArray(w.results) && w.results.length > 0 &&
    w.results.every((x) => x !== null && typeof x === 'object' && (x as { nccl_version?: unknown }).nccl_version === LOOPBACK_WORKER.ncclVersion);
}

/** Rank 0's channel for these servers in `mode` (see the top of this file); refusals are WeightSyncRefused. */
export async function openSyncChannel(mode: Exclude<WeightSyncMode, 'disk'>, workers: readonly ServerWorkers[], device = 0): Promise<SyncChannel> {
  const fake = workers.filter(isLoopbackFake);
  if (fake.length === 0) return NcclChannel.open(device);
  if (fake.length < workers.length) {
    throw new WeightSyncRefused(`${fake[0]!.server} is murphy-native serve (a loopback fake of NCCL) and ${workers.find((w) => !isLoopbackFake(w))!.server} is not: one weight-sync group cannot hold both; use --weight-sync disk`);
  }
  if (mode === 'auto') {
    throw new WeightSyncRefused('the servers are murphy-native serve, whose NCCL methods are a loopback fake: auto keeps the disk sync (exact f32 weights); --weight-sync nccl sends bf16 buckets over loopback TCP instead');
  }
  const remote = workers.find((w) => !isLoopback(new URL(w.server).hostname));
  if (remote !== undefined) throw new WeightSyncRefused(`${remote.server}: murphy-native serve's loopback fake of NCCL reaches only a trainer on the same machine; use --weight-sync disk`);
  return LoopbackChannel.open();
}

/**
 * The client's weightSync option for a mode: undefined (the disk sync) for 'disk', else the
 * NCCL sync (NCCL from CUDA device `device`, or serve's loopback fake) with the disk sync as
 * fallback.
 */
export function weightSyncFor(mode: WeightSyncMode, o: { device?: number; bucketBytes?: number; timeoutMs?: number; log?: (line: string) => void } = {}): ((client: VllmBackend, disk: WeightSync) => WeightSync) | undefined {
  if (mode === 'disk') return undefined;
  return (client, disk) => new NcclWeightSync(client, { mode, channel: (workers) => openSyncChannel(mode, workers, o.device ?? 0), fallback: disk, bucketBytes: o.bucketBytes, timeoutMs: o.timeoutMs, log: o.log });
}
