// The device half of bench/collectives.bench.ts: the same ops over NCCL, one rank process per
// GPU (CUDA_VISIBLE_DEVICES set per rank by the parent), on device buffers. The bench's host
// arrays stand for their device copies: each is uploaded once and the ops run on the copies,
// so the timings are device-to-device. barrier() is an all-reduce of one float. Not yet run:
// no GPU was available to its author.
import { findNccl, NcclCommunicator, ncclUniqueId, uniqueIdFromHex, uniqueIdHex } from '../lib/gpu/nccl.js';
import { cuda, DeviceArray } from '../lib/native.js';

/** Why the NCCL half cannot run here, or false; with the GPU count to use. */
export function ncclBenchSkip(): { skip: string | false; devices: number } {
  const st = cuda.status();
  if (!st.available) return { skip: st.reason, devices: 0 };
  const r = findNccl({ install: true });
  if (!r.found) return { skip: r.reason ?? 'NCCL not found', devices: 0 };
  return { skip: false, devices: st.devices.length };
}

/** Rank 0's id, made in the parent (NCCL installed there by ncclBenchSkip). */
export function ncclBenchId(): string {
  return uniqueIdHex(ncclUniqueId());
}

/** The collective the bench's rank loop drives, over NCCL. */
export async function ncclBenchRank(rank: number, world: number, idHex: string) {
  const c = await NcclCommunicator.init({ id: uniqueIdFromHex(idHex), worldSize: world, rank, device: 0, timeoutMs: 600_000 });
  const dev = new Map<Float32Array, DeviceArray>();
  const on = (a: Float32Array): DeviceArray => {
    let d = dev.get(a);
    if (d === undefined) dev.set(a, (d = DeviceArray.from(a)));
    return d;
  };
  const one = DeviceArray.from(new Float32Array(1));
  return {
    barrier: () => c.allReduce(one, one, 1, 'f32', 'sum'),
    allReduce: (buf: Float32Array) => c.allReduce(on(buf), on(buf), buf.length, 'f32', 'sum'),
    reduceScatter: (buf: Float32Array, part: Float32Array) => c.reduceScatter(on(buf), on(part), part.length, 'f32', 'sum'),
    allGather: (part: Float32Array, buf: Float32Array) => c.allGather(on(part), on(buf), part.length, 'f32'),
    broadcast: (buf: Float32Array, root: number) => c.broadcast(on(buf), on(buf), buf.length, 'f32', root),
    close: async () => {
      await c.close();
      for (const d of [...dev.values(), one]) d.free();
    },
  };
}
