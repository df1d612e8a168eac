// NCCL on a device with world size 1 (npm run gpu:check): a non-blocking init, all-reduce,
// reduce-scatter, all-gather and broadcast of f32 and bf16 buckets of fresh random sizes and
// values, each against the host result (with one rank: the input itself, bit for bit), and a
// communicator that waits for a second rank that never comes: aborted at its deadline.
// Skipped without a device or without NCCL, saying why. MURPHY_GPU_DRYRUN=1 runs the same logic
// on host arrays through a fake libnccl compiled here (test/helpers/fake-nccl.ts): it checks
// the test code, not NCCL. Written before any GPU was available to its author: it has not yet
// run on a device.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NcclCommunicator, ncclUniqueId, type NcclDType } from '../../lib/gpu/nccl.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, dryRun, empty, freeAll, host, up } from './common.js';
import { deviceNccl } from './nccl-setup.js';

const rng = new Rng(announceSeed('gpu/nccl'));
const { nccl, skip } = deviceNccl('murphy-gpu-nccl-');
if (nccl?.found) console.log(`# gpu/nccl: NCCL ${nccl.versionText} from ${nccl.path} (${nccl.origin})${dryRun ? ' (the fake: dry run)' : ''}`);
else if (nccl) console.log(`# gpu/nccl: ${nccl.reason} — NCCL tests not run`);

function values(dtype: NcclDType, n: number): Float32Array | Uint16Array {
  // bf16: any bit pattern but NaNs (exponent all ones), so that bitwise equality is the check
  return dtype === 'f32' ? rng.normals(n, 3) : new Uint16Array(n).map(() => { const b = rng.int(65536); return (b & 0x7f80) === 0x7f80 ? b & 0xbfff : b; });
}

describe('NCCL on the device, world size 1', () => {
  it('init, then all-reduce (sum, avg), reduce-scatter, all-gather and broadcast of f32 and bf16 buckets equal the host result', { skip }, async () => {
    const c = await NcclCommunicator.init({ id: ncclUniqueId(), worldSize: 1, rank: 0, device: dryRun ? -1 : 0, timeoutMs: 60_000 });
    try {
      for (const dtype of ['f32', 'bf16'] as const) {
        for (const n of [1 + rng.int(64), (1 << 20) + rng.int(1 << 16)]) {
          const x = values(dtype, n);
          const src = up(x);
          const kind = dtype === 'f32' ? 'f32' : 'bf16';
          const out = empty(kind, n);
          try {
            for (const op of ['sum', 'avg'] as const) {
              await c.allReduce(src, out, n, dtype, op);
              assert.deepEqual(host(out), x, `allReduce ${op} ${dtype} n=${n}`);
            }
            await c.reduceScatter(src, out, n, dtype, 'sum');
            assert.deepEqual(host(out), x, `reduceScatter ${dtype} n=${n}`);
            await c.allGather(src, out, n, dtype);
            assert.deepEqual(host(out), x, `allGather ${dtype} n=${n}`);
            await c.broadcast(src, out, n, dtype, 0);
            assert.deepEqual(host(out), x, `broadcast ${dtype} n=${n}`);
          } finally {
            freeAll(src, out);
          }
        }
      }
    } finally {
      await c.close();
    }
  });

  it('a second rank that never joins: the init is aborted at its deadline, as one line', { skip: skip || (dryRun ? 'dry run: the fake cannot model a missing rank through ncclGetUniqueId ids (test/gpu-engine/nccl-comm.test.ts covers it)' : false) }, async () => {
    await assert.rejects(NcclCommunicator.init({ id: ncclUniqueId(), worldSize: 2, rank: 0, timeoutMs: 5_000 }),
      (e: Error) => /^NCCL init \(ncclCommInitRankConfig\) did not complete within 5 s on rank 0 of 2: the communicator was aborted/.test(e.message) && !e.message.includes('\n'));
  });
});
