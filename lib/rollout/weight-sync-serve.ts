// `murphy-native serve`'s side of the NCCL weight sync: the worker extension's murphy_nccl_*
// methods (python/murphy_vllm) over the loopback fake (weight-sync-loopback.ts), so the
// trainer's sequencing, deadlines and fallback run end to end on the CPU. One "worker" (TP = PP
// = DP = 1); the received bf16 buckets are loaded into the engine with setWeights.
import { LoopbackReceiver } from './weight-sync-loopback.js';
import { parseSyncMeta, unpackBucket } from './weight-sync-plan.js';
import type { PolicyWeights, RolloutEngine } from './types.js';
import { RolloutError } from './types.js';
import { NCCL_METHODS } from './weight-sync.js';

type Json = Record<string, unknown>;

/** What serve reports as its worker's NCCL and GPU (the loopback channel's defaults match the version). */
export const LOOPBACK_WORKER = { ncclVersion: 'loopback', gpuUuid: 'loopback-serve' } as const;

export class LoopbackWorker {
  private rx: LoopbackReceiver | undefined;

  constructor(private readonly engine: RolloutEngine, private readonly exclusive: <T>(fn: () => Promise<T>) => Promise<T>) {}

  /** Whether `method` is one of the murphy_nccl_* methods. */
  static handles(method: string): boolean {
    return (Object.values(NCCL_METHODS) as string[]).includes(method);
  }

  /** Runs one collective_rpc call; returns its {results: [...]} body. */
  async call(method: string, args: unknown[], timeoutS: number | undefined): Promise<Json> {
    const timeoutMs = (timeoutS ?? 600) * 1000;
    switch (method) {
      case NCCL_METHODS.info:
        return { results: [{ rank: 0, tp_size: 1, pp_size: 1, dp_rank: 0, dp_size: 1, gpu_uuid: LOOPBACK_WORKER.gpuUuid, nccl_version: LOOPBACK_WORKER.ncclVersion }] };
      case NCCL_METHODS.init: {
        const [idHex, world, offset] = args;
        if (typeof idHex !== 'string' || !Number.isSafeInteger(world) || !Number.isSafeInteger(offset) || (offset as number) < 1 || (offset as number) >= (world as number)) {
          throw new RolloutError(`${method}(uid_hex, world, rank_offset): expected a hex string and integers with 1 <= rank_offset < world`, { status: 400 });
        }
        this.rx?.close();
        this.rx = undefined;
        try {
          this.rx = await LoopbackReceiver.connect(idHex, offset as number, timeoutMs);
        } catch (e) {
          throw new RolloutError(`${method}: ${(e as Error).message}`, { status: 400 });
        }
        return { results: [{ rank: offset, world }] };
      }
      case NCCL_METHODS.recv: {
        const rx = this.rx;
        if (rx === undefined) throw new RolloutError(`${method}: no weight-sync group (call ${NCCL_METHODS.init} first)`, { status: 400 });
        if (typeof args[0] !== 'string') throw new RolloutError(`${method}(meta_json): expected the metadata as a JSON string`, { status: 400 });
        const meta = parseSyncMeta(args[0]);
        const setWeights = this.engine.setWeights?.bind(this.engine);
        if (setWeights === undefined) throw new RolloutError(`${method}: this engine cannot take weights from memory`, { status: 400 });
        const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
        let bytes = 0;
        try {
          for (const b of meta.buckets) {
            for (const t of unpackBucket(await rx.recv(b.bytes, timeoutMs), b)) tensors.set(t.name, t);
            bytes += b.bytes;
          }
        } catch (e) {
          rx.close();
          this.rx = undefined;
          throw new RolloutError(`${method}: ${(e as Error).message}`, { status: 500 });
        }
        const policy: PolicyWeights = {
          params: () => [...tensors].map(([name, t]) => ({ name, shape: t.shape, numel: t.data.length })),
          getParam: (name) => tensors.get(name)!.data,
          save: () => Promise.reject(new Error('not a model')),
        };
        await this.exclusive(async () => {
          try {
            await setWeights(policy);
          } catch (e) {
            throw new RolloutError(`${method}: ${(e as Error).message}`, { status: 400 });
          }
        });
        return { results: [{ loaded: true, tensors: tensors.size, buckets: meta.buckets.length, bytes, step: meta.step, rank: rx.rank, world_size: 1 }] };
      }
      default:
        this.rx?.close();
        this.rx = undefined;
        return { results: [{ closed: true }] };
    }
  }
}
