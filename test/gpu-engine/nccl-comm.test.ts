// The native NCCL communicator (native/gpu/nccl.cc) against a fake libnccl.so.2 compiled here
// (test/helpers/fake-nccl.ts): the non-blocking init and its deadline (a peer that never
// arrives: the communicator is aborted and the call rejects with one line), NCCL errors as one
// line, the collectives' arguments and op order as the library saw them (on host arrays:
// device -1, so CPU-only and CUDA binaries alike), a collective stuck
// on a dead peer, abort from the JS thread while a call waits, and close.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import { NcclCommunicator, ncclUniqueId } from '../../lib/gpu/nccl.js';
import { Rng, testSeed } from '../helpers/random.js';
import { fakeId } from '../helpers/fake-nccl.js';
import { useFakeNccl } from '../dist/helpers.js';

const rng = new Rng(testSeed('gpu-engine/nccl-comm'));
const dir = mkdtempSync(join(tmpdir(), 'murphy-nccl-comm-'));
const log = join(dir, 'calls.log');
const calls = (): string[] => readFileSync(log, 'utf8').trim().split('\n').filter((l) => l !== '');
useFakeNccl(dir, () => rmSync(dir, { recursive: true, force: true }), { log });
beforeEach(() => writeFileSync(log, ''));

describe('NCCL communicator (fake library)', () => {
  it('world size 1: init non-blocking, the four collectives in f32 and bf16 move the data, in the order called; close finalizes then destroys', async () => {
    const id = ncclUniqueId();
    assert.equal(id.length, 128);
    const c = await NcclCommunicator.init({ id, worldSize: 1, rank: 0, device: -1, timeoutMs: 10_000 });
    assert.deepEqual([c.rank, c.worldSize], [0, 1]);
    const n = 100 + rng.int(100);
    const x = rng.normals(n, 1);
    const y = new Float32Array(n);
    await c.allReduce(x, y, n, 'f32', 'sum');
    assert.deepEqual(y, x);
    const b = new Uint16Array(n).map(() => rng.int(65536));
    const bo = new Uint16Array(n);
    await c.reduceScatter(b, bo, n, 'bf16', 'avg');
    assert.deepEqual(bo, b);
    const g = new Float32Array(n);
    await c.allGather(x, g, n, 'f32');
    assert.deepEqual(g, x);
    const bb = new Uint16Array(n);
    await c.broadcast(b, bb, n, 'bf16', 0);
    assert.deepEqual(bb, b);
    await c.close();
    assert.deepEqual(calls(), [
      'getUniqueId',
      'init nranks=1 rank=0 id=fake-nccl:1 size=48 magic=cafebeef version=21700 blocking=0',
      `allReduce count=${n} dtype=7 op=0`,
      `reduceScatter recvcount=${n} dtype=9 op=4`,
      `allGather sendcount=${n} dtype=7`,
      `broadcast count=${n} dtype=9 root=0`,
      'finalize rank=0',
      'destroy rank=0',
    ]);
    await assert.rejects(c.allReduce(x, y, n, 'f32'), /the communicator was closed or aborted; create a new one/);
  });

  it('an init that completes after some polls succeeds; rank arguments and buffer sizes are checked before any call', async () => {
    const c = await NcclCommunicator.init({ id: fakeId('slow-init'), worldSize: 4, rank: 3, device: -1, timeoutMs: 10_000 });
    assert.deepEqual([c.rank, c.worldSize], [3, 4]);
    await assert.rejects(c.reduceScatter(new Float32Array(7), new Float32Array(2), 2, 'f32'), /'send' has 7 elements; the call needs 8/);
    await assert.rejects(c.allGather(new Float32Array(2), new Float32Array(7), 2, 'f32'), /'recv' has 7 elements; the call needs 8/);
    await assert.rejects(c.broadcast(null, new Uint16Array(4), 4, 'bf16', 3), /the root needs a send buffer/);
    await assert.rejects(c.allReduce(new Uint16Array(4), new Uint16Array(4), 4, 'f32'), /'send' must be a Float32Array/);
    await assert.rejects(NcclCommunicator.init({ id: fakeId('x'), worldSize: 2, rank: 2, device: -1 }), /rank/);
    c.abort();
    assert.deepEqual(calls(), ['init nranks=4 rank=3 id=slow-init size=48 magic=cafebeef version=21700 blocking=0', 'abort rank=3']);
  });

  it('a peer that never arrives: the init is aborted at its deadline and rejects with one line, while the JS thread stays free', async () => {
    let settled = false;
    const p = NcclCommunicator.init({ id: fakeId('hang-init'), worldSize: 2, rank: 0, device: -1, timeoutMs: 300 }).finally(() => { settled = true; });
    // the event loop runs while the init waits on a worker thread
    await new Promise<void>((r) => setImmediate(r));
    assert.equal(settled, false);
    await assert.rejects(p, (e: Error) => {
      assert.match(e.message, /^NCCL init \(ncclCommInitRankConfig\) did not complete within 300 ms on rank 0 of 2: the communicator was aborted; a peer is missing/);
      assert.doesNotMatch(e.message, /\n/);
      return true;
    });
    assert.deepEqual(calls(), ['init nranks=2 rank=0 id=hang-init size=48 magic=cafebeef version=21700 blocking=0', 'abort rank=0']);
  });

  it('an NCCL error is one line with the library\'s own words', async () => {
    await assert.rejects(NcclCommunicator.init({ id: fakeId('fail-init'), worldSize: 2, rank: 1, device: -1, timeoutMs: 1000 }),
      (e: Error) => (assert.equal(e.message, 'NCCL ncclCommInitRankConfig failed on rank 1 of 2: fake error 3 (status 3); NCCL says: fake: init failed second line'), true));
  });

  it('a collective stuck on a dead peer is aborted at its deadline; abort() from the JS thread ends a waiting call', async () => {
    const c = await NcclCommunicator.init({ id: fakeId('hang-ops'), worldSize: 2, rank: 0, device: -1, timeoutMs: 10_000 });
    const buf = new Float32Array(8);
    await assert.rejects(c.broadcast(buf, buf, 8, 'f32', 0, 200), (e: Error) => /^NCCL ncclBroadcast did not complete within 200 ms on rank 0 of 2: the communicator was aborted/.test(e.message));
    await assert.rejects(c.allReduce(buf, buf, 8, 'f32'), /closed or aborted/);
    const d = await NcclCommunicator.init({ id: fakeId('hang-ops'), worldSize: 2, rank: 1, device: -1, timeoutMs: 10_000 });
    const waiting = d.allReduce(buf, buf, 8, 'f32', 'sum', 600_000);
    await new Promise<void>((r) => setImmediate(r));
    d.abort();
    await assert.rejects(waiting, /aborted/);
    const lines = calls();
    assert.deepEqual(lines.filter((l) => l.startsWith('abort')), ['abort rank=0', 'abort rank=1'], lines.join('\n'));
    assert.equal(lines.indexOf('abort rank=0'), lines.indexOf('broadcast count=8 dtype=7 root=0') + 1);
  });

  it('f64 travels as the bytes of a Float64Array (NCCL double); any dtype may come as whole elements of bytes; arrays must live where the communicator works', async () => {
    const c = await NcclCommunicator.init({ id: ncclUniqueId(), worldSize: 1, rank: 0, device: -1, timeoutMs: 10_000 });
    const x = Float64Array.from({ length: 5 }, () => rng.normal());
    const y = new Float64Array(5);
    const bytes = (a: Float64Array | Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    await c.allReduce(bytes(x), bytes(y), 5, 'f64', 'max');
    assert.deepEqual(y, x);
    const f = rng.normals(6, 1), g = new Float32Array(6);
    await c.allGather(bytes(f), bytes(g), 6, 'f32');
    assert.deepEqual(g, f);
    await assert.rejects(c.allReduce(x as never, y as never, 5, 'f64'), /'send': dtype 'f64' takes the bytes of its array/);
    await assert.rejects(c.allReduce(new Uint8Array(10), new Uint8Array(16), 2, 'f32'), /'send' holds 10 bytes, not a whole number of f32 elements \(4 bytes each\)/);
    await assert.rejects(c.allReduce(bytes(x), bytes(y), 6, 'f64'), /'send' has 5 elements; the call needs 6/);
    await c.close();
    // a communicator on a device (index 0; this binary may have no CUDA: the check comes first) refuses host arrays
    const d = await NcclCommunicator.init({ id: ncclUniqueId(), worldSize: 1, rank: 0, device: 0, timeoutMs: 10_000 }).catch((e: Error) => e);
    if (d instanceof NcclCommunicator) {
      // f64 as bytes (the form the binding takes) still lives on the host: refused for where it lives, not for its form
      await assert.rejects(d.allReduce(bytes(x), bytes(y), 5, 'f64'), /'send' is a host array, but this communicator is on CUDA device 0; pass device arrays \(DeviceArray\)/);
      await assert.rejects(d.allReduce(rng.normals(3, 1), new Float32Array(3), 3, 'f32'), /'send' is a host array, but this communicator is on CUDA device 0; pass device arrays \(DeviceArray\)/);
      d.abort();
    }
    assert.deepEqual(calls().filter((l) => l.startsWith('allReduce') || l.startsWith('allGather')), ['allReduce count=5 dtype=8 op=2', 'allGather sendcount=6 dtype=7']);
  });
});
