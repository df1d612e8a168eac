// ZeRO-1 on the device engine's own memory (docs/distributed.md, "ZeRO-1 on the device
// engine"): the TypeScript side of native/gpu/engine/zero_shard.h. With a device engine
// (--device cuda, or emulate) and the NCCL backend, lib/dist/zero.ts hands the engine the shard
// and bucket plans once (zeroInit) and each optimizer step is one native call (zeroStep) that
// reduce-scatters the engine's fp32 gradient buffer, takes the global norm, steps the shard
// with the engine's AdamW kernel and all-gathers the compute weights, all on the device. No
// pointer crosses into JavaScript: the engine owns the buffers, this module passes the
// communicator and the plans. The host path (lib/dist/zero.ts) stays for the CPU engine and TCP.
import type { AdamWHyper, RawNcclComm, ZeroPlan, ZeroShard } from '../native.js';
import type { OptimizerResult } from '../train/policy.js';
import type { Bucket } from './buckets.js';
import type { Collective } from './collective.js';
import { NcclCollective } from './nccl-collective.js';
import type { ShardPlan } from './shards.js';

/** What PolicyModel offers for ZeRO-1 on its engine's memory (lib/model/index.ts). */
export interface DeviceZeroModel {
  readonly engine: { device: 'cpu' | 'cuda' | 'emulate'; storage: 'bf16' | 'f32' };
  zeroInit(plan: ZeroPlan): void;
  zeroStep(comm: RawNcclComm, h: AdamWHyper, timeoutMs: number): Promise<OptimizerResult>;
  zeroOverlapNext(comm: RawNcclComm, timeoutMs: number, timeline?: boolean): void;
  zeroFlush(comm: RawNcclComm, timeoutMs: number): Promise<void>;
  zeroShard(): ZeroShard;
  zeroSetShard(s: ZeroShard): void;
}

/** The engine's form of the plans: the shard bounds of every rank and the bucket bounds (empty buckets dropped). */
export function zeroPlanOf(rank: number, shards: ShardPlan, buckets: readonly Bucket[]): ZeroPlan {
  const b = [0];
  for (const x of buckets) if (x.end > b[b.length - 1]!) b.push(x.end);
  if (b.length === 1) b.push(shards.total);
  return { rank, worldSize: shards.worldSize, shards: [...shards.ranges.map((r) => r.begin), shards.total], buckets: b };
}

function isDeviceZeroModel(m: unknown): m is DeviceZeroModel {
  const x = m as Partial<DeviceZeroModel> | null;
  return typeof x?.zeroInit === 'function' && typeof x.zeroStep === 'function' && x.engine !== undefined && x.engine.device !== 'cpu';
}

/** The device path when it applies (a device engine and the NCCL backend), else null (the host path). */
export function deviceZeroOf(coll: Collective, model: unknown): DeviceZero | null {
  return coll instanceof NcclCollective && isDeviceZeroModel(model) ? new DeviceZero(coll, model) : null;
}

export class DeviceZero {
  constructor(readonly coll: NcclCollective, readonly model: DeviceZeroModel) {}

  /** Hands the engine its plan and this rank's shard (master weights, moments, step). */
  init(plan: ZeroPlan, shard: ZeroShard): void {
    this.model.zeroInit(plan);
    this.model.zeroSetShard(shard);
  }

  /** The step (collective), in the collective's call order with its deadline. */
  step(h: AdamWHyper): Promise<OptimizerResult> {
    return this.coll.exclusive('zeroStep', (comm, ms) => this.model.zeroStep(comm.handle, h, ms));
  }

  /**
   * The last micro-batch of a step with the overlap (collective from its backward on): `body`
   * (the accumulate) runs with the engine armed, in the collective's call order, so its
   * backward starts each bucket's reduction as soon as the bucket's gradients are final.
   */
  accumulateOverlapped<T>(body: () => Promise<T>, timeline = false): Promise<T> {
    return this.coll.exclusive('accumulate', (comm, ms) => {
      this.model.zeroOverlapNext(comm.handle, ms, timeline);
      return body();
    });
  }

  /** Starts the reductions not started yet (collective; every rank calls it after its micro-batches). */
  flush(): Promise<void> {
    return this.coll.exclusive('zeroFlush', (comm, ms) => this.model.zeroFlush(comm.handle, ms));
  }

  /** Host copies of the shard. */
  shard(): ZeroShard {
    return this.model.zeroShard();
  }

  set(s: ZeroShard): void {
    this.model.zeroSetShard(s);
  }
}
