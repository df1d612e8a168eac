// The device half of bench/collectives.bench.ts: the same ops over NCCL, one rank process per
// GPU (CUDA_VISIBLE_DEVICES set per rank by the parent). Two ways to drive it:
//   device (default): on device buffers. The bench's host arrays stand for their device copies:
//     each is uploaded once and the ops run on the copies, so the timings are device-to-device.
//   --staged: through lib/dist's collective interface (NcclCollective), host arrays staged
//     through device buffers on every call, as data-parallel training does today (ZeRO-1 over
//     the device engine moves fp32 host copies): upload + NCCL + download.
// barrier() is an all-reduce of one float. --dry-run: world size 1 through the tests' fake
// libnccl on host memory (device -1), to check this code without a GPU; its figures measure
// nothing and are never written. Not yet run on a GPU: no device was available to its author.
import { join } from 'node:path';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { findNccl, NcclCommunicator, ncclUniqueId, uniqueIdFromHex, uniqueIdHex } from '../lib/gpu/nccl.js';
import { DeviceStaging, HostStaging, NcclCollective } from '../lib/dist/nccl-collective.js';
import { cuda, DeviceArray } from '../lib/native.js';
import { buildFakeNccl } from '../test/helpers/fake-nccl.js';

export interface NcclBenchMode {
  /** Host arrays through NcclCollective (staged), instead of device buffers. */
  staged: boolean;
  /** The fake library on host memory (no GPU; figures meaningless). */
  dryRun: boolean;
}

/** Why the NCCL half cannot run here, or false; with the GPU count to use. Dry run: builds the fake and points MURPHY_NCCL at it. */
export function ncclBenchSkip(mode: NcclBenchMode): { skip: string | false; devices: number } {
  if (mode.dryRun) {
    process.env.MURPHY_NCCL = buildFakeNccl(join(mkdtempSync(join(tmpdir(), 'murphy-nccl-bench-')), 'libnccl.so.2'));
  } else {
    const st = cuda.status();
    if (!st.available) return { skip: st.reason, devices: 0 };
  }
  const r = findNccl({ install: true });
  if (!r.found) return { skip: r.reason ?? 'NCCL not found', devices: 0 };
  return { skip: false, devices: mode.dryRun ? 1 : cuda.status().devices.length };
}

/** Rank 0's id, made in the parent (NCCL installed there by ncclBenchSkip). */
export function ncclBenchId(): string {
  return uniqueIdHex(ncclUniqueId());
}

/** The collective the bench's rank loop drives, over NCCL. */
export async function ncclBenchRank(rank: number, world: number, idHex: string, mode: NcclBenchMode) {
  const device = mode.dryRun ? -1 : 0;
  const c = await NcclCommunicator.init({ id: uniqueIdFromHex(idHex), worldSize: world, rank, device, timeoutMs: 600_000 });
  if (mode.staged) {
    const coll = new NcclCollective(c, mode.dryRun ? new HostStaging() : new DeviceStaging(), 600_000);
    return {
      barrier: () => coll.barrier(),
      allReduce: (buf: Float32Array) => coll.allReduce(buf),
      reduceScatter: (buf: Float32Array, part: Float32Array) => coll.reduceScatter(buf, part),
      allGather: (part: Float32Array, buf: Float32Array) => coll.allGather(part, buf),
      broadcast: (buf: Float32Array, root: number) => coll.broadcast(buf, root),
      close: () => coll.close(),
    };
  }
  const dev = new Map<Float32Array, DeviceArray | Float32Array>();
  const on = (a: Float32Array): DeviceArray | Float32Array => {
    let d = dev.get(a);
    if (d === undefined) dev.set(a, (d = mode.dryRun ? a.slice() : DeviceArray.from(a)));
    return d;
  };
  const one = new Float32Array(1);
  return {
    barrier: () => c.allReduce(on(one), on(one), 1, 'f32', 'sum'),
    allReduce: (buf: Float32Array) => c.allReduce(on(buf), on(buf), buf.length, 'f32', 'sum'),
    reduceScatter: (buf: Float32Array, part: Float32Array) => c.reduceScatter(on(buf), on(part), part.length, 'f32', 'sum'),
    allGather: (part: Float32Array, buf: Float32Array) => c.allGather(on(part), on(buf), part.length, 'f32'),
    broadcast: (buf: Float32Array, root: number) => c.broadcast(on(buf), on(buf), buf.length, 'f32', root),
    close: async () => {
      await c.close();
      for (const d of dev.values()) if (d instanceof DeviceArray) d.free();
    },
  };
}
