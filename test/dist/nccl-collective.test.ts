// The NCCL backend of the collective interface (lib/dist/nccl-collective.ts) against the tests'
// fake libnccl.so.2 (test/helpers/fake-nccl.ts), whose communicators of one id form a world in
// this process and reduce in rank order: the interface's results against the host reference
// (conformance.ts, as the CPU backend), worlds of 1, 2 and 3; the rank arithmetic and op order
// as the library saw them (uneven counts: padded to the largest part only where that moves
// fewer bytes than an all-reduce, all-gathers as one broadcast per owning part; bytes for the moves,
// double for f64, barrier as one float); ZeRO-1 over it bit for bit equal to ZeRO-1 over the
// CPU backend; a rank that never calls (deadline, abort, then every call rejects); calls that
// disagree; a rank 0 on another backend.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import { CollectiveError, type Collective } from '../../lib/dist/collective.js';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { NcclCollective } from '../../lib/dist/nccl-collective.js';
import { TcpCollective } from '../../lib/dist/tcp.js';
import { joinJob } from '../../lib/dist/backend.js';
import { defaultConfig } from '../../lib/config/index.js';
import { binaryInfo } from '../../lib/native.js';
import { PolicyModel, type TrainBatch } from '../../lib/model/index.js';
import { setNumThreads } from '../../lib/native.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng, testSeed } from '../helpers/random.js';
import { checkAllReduce, checkUnevenAndHelpers } from './conformance.js';
import { fakeNcclCalls, localWorld, ncclLocalWorld, useFakeNccl, ZERO_HYPER as hyper, ZERO_LOSS as loss } from './helpers.js';

const seed = testSeed('dist/nccl-collective');
setNumThreads(1);
const dir = mkdtempSync(join(tmpdir(), 'murphy-nccl-coll-'));
const log = join(dir, 'calls.log');
/** The fake's log lines of rank r. */
const callsOf = (r: number): string[] => fakeNcclCalls(log, r);
useFakeNccl(dir, () => rmSync(dir, { recursive: true, force: true }), { log });
beforeEach(() => writeFileSync(log, ''));

async function closeAll(world: Collective[]): Promise<void> {
  await Promise.all(world.map((c) => c.close()));
}

describe('NCCL collective (fake library)', () => {
  it('all-reduce sum/max of f32 and f64 equal the host reference on every rank, worlds of 1, 2 and 3', async () => {
    const rng = new Rng(seed);
    for (const N of [1, 2, 3]) {
      const world = await ncclLocalWorld(N);
      try {
        await checkAllReduce(world, rng);
      } finally {
        await closeAll(world);
      }
    }
  });

  it('reduce-scatter and all-gather with uneven counts; broadcast; JSON helpers; barrier', async () => {
    const world = await ncclLocalWorld(3);
    try {
      await checkUnevenAndHelpers(world, new Rng(seed + 1));
    } finally {
      await closeAll(world);
    }
  });

  it('the calls NCCL sees: uneven parts padded only where it moves fewer bytes, all-gathers as broadcasts of the parts, moves as bytes, f64 as double, barrier as one float, in program order', async () => {
    const world = await ncclLocalWorld(3);
    try {
      const counts = [5, 3, 0];
      const xs = world.map((_, r) => Float32Array.from({ length: 8 }, (_, i) => r * 10 + i));
      const outs = counts.map((c) => new Float32Array(c));
      await Promise.all(world.map((c, r) => c.reduceScatter(xs[r]!, outs[r]!, { counts, op: 'max' })));
      assert.deepEqual([...outs[0]!], [20, 21, 22, 23, 24]);
      assert.deepEqual([...outs[1]!], [25, 26, 27]);
      const g = world.map(() => new Float32Array(8));
      await Promise.all(world.map((c, r) => c.allGather(outs[r]!, g[r]!, counts)));
      for (const x of g) assert.deepEqual([...x], [20, 21, 22, 23, 24, 25, 26, 27]);
      const d = world.map((_, r) => new Float64Array([r + 0.5, 1e-300]));
      await Promise.all(world.map((c, r) => c.allReduce(d[r]!)));
      for (const x of d) assert.deepEqual([...x], [4.5, 3e-300]);
      await Promise.all(world.map((c) => c.barrier()));
      const eq = world.map((_, r) => new Float32Array(6).fill(r));
      const eqOut = world.map(() => new Float32Array(2));
      await Promise.all(world.map((c, r) => c.reduceScatter(eq[r]!, eqOut[r]!)));
      for (const x of eqOut) assert.deepEqual([...x], [3, 3]);
      // a part holding the whole bucket (ZeRO's usual case): padding it would send 3 blocks of
      // 8; an all-reduce of the 8 moves fewer bytes, and each rank keeps its part
      const lop = [0, 8, 0];
      const lopOut = lop.map((n) => new Float32Array(n));
      await Promise.all(world.map((c, r) => c.reduceScatter(xs[r]!, lopOut[r]!, { counts: lop })));
      assert.deepEqual([...lopOut[1]!], [30, 33, 36, 39, 42, 45, 48, 51]);
      const lg = world.map(() => new Float32Array(8));
      await Promise.all(world.map((c, r) => c.allGather(lopOut[r]!, lg[r]!, lop)));
      for (const x of lg) assert.deepEqual([...x], [30, 33, 36, 39, 42, 45, 48, 51]);
      const want = [
        'reduceScatter count=5 dtype=7 op=2 root=-1', // 3 blocks of 5 floats: 15 < 2 x 8
        'broadcast count=20 dtype=1 op=-1 root=0', // rank 0's 5 floats as bytes
        'broadcast count=12 dtype=1 op=-1 root=1', // rank 1's 3 (rank 2 has none)
        'allReduce count=2 dtype=8 op=0 root=-1',
        'allReduce count=1 dtype=7 op=0 root=-1',
        'reduceScatter count=2 dtype=7 op=0 root=-1',
        'allReduce count=8 dtype=7 op=0 root=-1', // 3 x 8 >= 2 x 8: the all-reduce
        'broadcast count=32 dtype=1 op=-1 root=1', // the one part, from its rank
      ];
      for (let r = 0; r < 3; r++) assert.deepEqual(callsOf(r), want, `rank ${r}`);
      // the bytes each rank hands NCCL for the two uneven pairs: at most the parts' bytes
      // (gathers) and twice the bucket (reductions), where padding handed 3 x the largest part
      const sent = (l: string): number => {
        const [, op, n, dt] = /^(\w+) count=(\d+) dtype=(\d+)/.exec(l)!;
        const size = { 1: 1, 7: 4, 8: 8 }[Number(dt) as 1 | 7 | 8];
        return Number(n) * size * (op === 'reduceScatter' || op === 'allGather' ? 3 : 1);
      };
      const lopBytes = want.slice(6).reduce((a, l) => a + sent(l), 0);
      assert.equal(lopBytes, 8 * 4 + 8 * 4, 'all-reduce of the bucket + the one part broadcast');
      assert.ok(lopBytes < 2 * 3 * 8 * 4, `less than the padded reduce-scatter + all-gather (${2 * 3 * 8 * 4} bytes)`);
    } finally {
      await closeAll(world);
    }
  });

  it('ZeRO-1 over NCCL steps bit for bit as ZeRO-1 over the CPU backend (uneven shards, small buckets)', async () => {
    const rng = new Rng(seed + 2);
    const results: Float32Array[][] = [];
    const V = (await PolicyModel.random('tiny', { seed: 3 })).info.vocabSize;
    const batches = [0, 1].map(() => {
      const T = 12 + rng.int(8);
      const b: TrainBatch = {
        tokens: Int32Array.from({ length: T }, () => rng.int(V)), seqOffsets: Int32Array.from([0, 5, T]),
        mask: Uint8Array.from({ length: T }, (_, t) => (t === 0 || t === 5 ? 0 : 1)),
        advantages: Float32Array.from({ length: T }, (_, t) => (t < 5 ? 1 : -0.5)),
        oldLogp: Float32Array.from({ length: T }, () => -1 - rng.uniform(0, 3)),
      };
      return b;
    });
    for (const make of [(n: number) => localWorld(n), (n: number) => ncclLocalWorld(n)]) {
      const world: Collective[] = await make(2);
      try {
        const models = await Promise.all(world.map((_, r) => PolicyModel.random('tiny', { seed: 3 + r })));
        const dps = await Promise.all(world.map((c, r) => DistributedPolicy.create(c, new NativePolicy(models[r]!), models[r]!, { bucketBytes: 8192, align: 48 })));
        assert.ok(dps[0]!.buckets.length > 3);
        await Promise.all(models.map((m, r) => m.accumulate(batches[r]!, loss, 0.5)));
        const rs = await Promise.all(dps.map((d) => d.optimizerStep(hyper)));
        assert.ok(rs[0]!.clipCoef < 1);
        results.push(models[0]!.params().map((p) => models[0]!.getParam(p.name)));
        for (const p of models[0]!.params()) assert.deepEqual(models[1]!.getParam(p.name), models[0]!.getParam(p.name));
      } finally {
        await closeAll(world);
      }
    }
    assert.deepEqual(results[1], results[0]);
  });

  it('a rank that never makes the call: the waiting rank is aborted at its deadline with one line; later calls reject', async () => {
    const world = await ncclLocalWorld(2, { timeoutMs: 300 });
    await assert.rejects(world[0]!.allReduce(new Float32Array(4)), (e: Error) => {
      assert.ok(e instanceof CollectiveError);
      assert.match(e.message, /^allReduce #1 on rank 0: NCCL ncclAllReduce did not complete within 300 ms on rank 0 of 2: the communicator was aborted; a peer is missing/);
      assert.doesNotMatch(e.message, /\n/);
      return true;
    });
    await assert.rejects(world[0]!.barrier(), /barrier #2 on rank 0: .*closed or aborted; create a new one/);
    // the peer that comes late finds its world broken
    await assert.rejects(world[1]!.allReduce(new Float32Array(4)), /allReduce #1 on rank 1: NCCL ncclAllReduce failed on rank 1 of 2: .*a peer aborted/);
    await closeAll(world);
  });

  it('ranks that make different calls fail with one line naming both calls; abort() ends a waiting call', async () => {
    const world = await ncclLocalWorld(2);
    const [a, b] = await Promise.allSettled([world[0]!.barrier(), world[1]!.allReduce(new Float32Array(4))]);
    for (const x of [a, b]) {
      assert.equal(x.status, 'rejected');
      assert.match(String((x as PromiseRejectedResult).reason.message), /NCCL (ncclAllReduce) failed on rank \d of 2: .*called allReduce count=\d dtype=7 while another rank called allReduce count=\d/);
    }
    const w2 = await ncclLocalWorld(2, { timeoutMs: 600_000 });
    const waiting = w2[0]!.allGather(new Uint8Array(3), new Uint8Array(6));
    await new Promise<void>((r) => setImmediate(r));
    w2[0]!.abort();
    await assert.rejects(waiting, /aborted/);
    await assert.rejects(w2[0]!.barrier(), /the collective is closed/);
    await closeAll([...world, w2[1]!]);
  });

  it('a rank 0 on the CPU backend hands over no NCCL id: the NCCL rank says to use one distBackend', async () => {
    let listening!: (p: number) => void;
    const port = new Promise<number>((r) => (listening = r));
    const tcp = TcpCollective.create({ rank: 0, worldSize: 2, masterAddr: '127.0.0.1', masterPort: 0, connectTimeoutMs: 500, onListening: listening });
    const nccl = NcclCollective.create({ rank: 1, worldSize: 2, masterAddr: '127.0.0.1', masterPort: await port, device: -1, connectTimeoutMs: 2000 });
    await assert.rejects(nccl, /rank 1: rank 0 handed over 0 bytes instead of an NCCL unique id \(128\); every rank must use the same distBackend/);
    await assert.rejects(tcp, /did not connect within 0.5 s/);
  });

  it('a rank of a --device cuda job joins through NCCL on its local GPU (here: stops at the CPU-only binary, before the rendezvous)', async (t) => {
    if (binaryInfo().cuda) return t.skip('a CUDA binary would go on to the rendezvous; test/gpu covers NCCL on a device');
    const env: NodeJS.ProcessEnv = { RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '1', CUDA_VISIBLE_DEVICES: '2,3' };
    await assert.rejects(joinJob({ ...defaultConfig(), device: 'cuda' }, env), /^CollectiveError: NCCL on CUDA device 0: the loaded native binary is CPU-only \(.*\); build the CUDA one with `npm run build:cuda`$/);
    assert.equal(env.CUDA_VISIBLE_DEVICES, '3');
  });
});
