// One rank of the multi-GPU NCCL check (test/gpu/nccl-multi.test.ts):
//   node --import tsx test/gpu/nccl-rank.ts ID_HEX WORLD RANK SEED
// Joins the communicator on CUDA device 0 of this process (the parent sets CUDA_VISIBLE_DEVICES
// to one GPU per rank), runs all-reduce, reduce-scatter, all-gather and
// broadcast of f32 and bf16 buckets whose values are small integers (so every sum is exact in
// both types, whatever order NCCL adds in), compares each with the host result, and prints one
// JSON line {rank, ok, checks, error?}.
import './binary.js';
import { NcclCommunicator, uniqueIdFromHex, type NcclDType } from '../../lib/gpu/nccl.js';
import { DeviceArray, fromBf16, toBf16 } from '../../lib/native.js';
import { Rng } from '../helpers/random.js';

const [idHex, worldArg, rankArg, seedArg] = process.argv.slice(2);
const world = Number(worldArg), rank = Number(rankArg), seed = Number(seedArg);

/** Rank r's input of n elements: integers in [-16, 16], the same on every process for a given r. */
function input(r: number, n: number): Float32Array {
  const g = new Rng(seed * 1000 + r);
  return new Float32Array(n).map(() => g.int(33) - 16);
}
const asType = (x: Float32Array, t: NcclDType) => (t === 'f32' ? x : (toBf16(x) as Uint16Array));
const hostOf = (d: DeviceArray, t: NcclDType): Float32Array => (t === 'f32' ? (d.download() as Float32Array) : (fromBf16(d.download() as Uint16Array) as Float32Array));

function same(got: Float32Array, want: Float32Array, what: string): void {
  for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) throw new Error(`${what}: element ${i} is ${got[i]}, the host result ${want[i]}`);
}

async function main(): Promise<number> {
  const c = await NcclCommunicator.init({ id: uniqueIdFromHex(idHex), worldSize: world, rank, device: 0, timeoutMs: 120_000 });
  let checks = 0;
  try {
    for (const t of ['f32', 'bf16'] as NcclDType[]) {
      for (const n of [world * 7, world * (1 << 18)]) {
        const mine = input(rank, n);
        const all = Array.from({ length: world }, (_, r) => input(r, n));
        const send = DeviceArray.from(asType(mine, t));
        const full = DeviceArray.empty(t === 'f32' ? 'f32' : 'bf16', n);
        const part = DeviceArray.empty(t === 'f32' ? 'f32' : 'bf16', n / world);
        const gathered = DeviceArray.empty(t === 'f32' ? 'f32' : 'bf16', n * world);
        try {
          const sum = new Float32Array(n).map((_, i) => all.reduce((a, x) => a + x[i], 0));
          await c.allReduce(send, full, n, t, 'sum');
          same(hostOf(full, t), sum, `allReduce ${t} n=${n}`);
          await c.reduceScatter(send, part, n / world, t, 'sum');
          same(hostOf(part, t), sum.subarray(rank * (n / world), (rank + 1) * (n / world)), `reduceScatter ${t} n=${n}`);
          await c.allGather(send, gathered, n, t);
          const cat = new Float32Array(n * world);
          all.forEach((x, r) => cat.set(x, r * n));
          same(hostOf(gathered, t), cat, `allGather ${t} n=${n}`);
          await c.broadcast(rank === 0 ? send : null, full, n, t, 0);
          same(hostOf(full, t), all[0], `broadcast ${t} n=${n}`);
          checks += 4;
        } finally {
          for (const d of [send, full, part, gathered]) d.free();
        }
      }
    }
  } finally {
    await c.close();
  }
  return checks;
}

main().then(
  (checks) => console.log(JSON.stringify({ rank, ok: true, checks })),
  (e: unknown) => { console.log(JSON.stringify({ rank, ok: false, error: e instanceof Error ? e.message : String(e) })); process.exitCode = 1; },
);
