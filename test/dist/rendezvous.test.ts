// The TCP rendezvous: a rank that arrives before rank 0 listens (retries, released by a barrier
// on its first failed attempt, no sleeps), a rank that never arrives (short deadline), a wrong
// world size, a duplicate rank; and the torchrun / Slurm environment conventions.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { firstSlurmHost, readDistEnv } from '../../lib/dist/env.js';
import { rendezvous, type RendezvousOptions } from '../../lib/dist/rendezvous.js';

/** A free loopback port (closed again; rank 0 binds it next). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}

const base = (port: number, over: Partial<RendezvousOptions>): RendezvousOptions => ({
  rank: 0, worldSize: 2, masterAddr: '127.0.0.1', masterPort: port, timeoutMs: 20_000, advertisePort: 1000, retryMs: 5, ...over,
});

describe('rendezvous', () => {
  it('a rank that starts before rank 0 retries until rank 0 listens; rank 0 hands out the table and payload', async () => {
    const port = await freePort();
    let firstRetry!: () => void;
    const retried = new Promise<void>((r) => (firstRetry = r));
    const late = rendezvous(base(port, { rank: 2, worldSize: 3, advertisePort: 1002, onRetry: (n) => n === 1 && firstRetry() }));
    await retried; // rank 2 has been refused at least once
    const r1 = rendezvous(base(port, { rank: 1, worldSize: 3, advertisePort: 1001 }));
    const r0 = rendezvous(base(port, { rank: 0, worldSize: 3, advertisePort: 1000, payload: new Uint8Array([7, 8, 9]) }));
    const all = await Promise.all([r0, r1, late]);
    for (const a of all) {
      assert.deepEqual(a.peers.map((p) => p.port), [1000, 1001, 1002]);
      assert.deepEqual([...a.payload], [7, 8, 9]);
    }
  });

  it('a rank that never arrives: rank 0 and the ranks that came fail naming it', async () => {
    const port = await freePort();
    let up!: () => void;
    const listening = new Promise<void>((r) => (up = r));
    const r0 = rendezvous(base(port, { worldSize: 3, timeoutMs: 300, onListening: () => up() }));
    await listening;
    const r1 = rendezvous(base(port, { rank: 1, worldSize: 3, timeoutMs: 20_000 }));
    const [e0, e1] = await Promise.allSettled([r0, r1]);
    assert.equal(e0.status, 'rejected');
    assert.match((e0 as PromiseRejectedResult).reason.message, /^rendezvous at 127\.0\.0\.1:\d+: rank 2 did not arrive within 0\.3 s \(world size 3\)/);
    assert.equal(e1.status, 'rejected');
    assert.match((e1 as PromiseRejectedResult).reason.message, /rank 2 did not arrive/);
  });

  it('rank 0 absent: the other rank fails at its deadline naming rank 0 and the address', async () => {
    const port = await freePort();
    await assert.rejects(rendezvous(base(port, { rank: 1, timeoutMs: 100 })), /^RendezvousError: rank 1: rank 0 did not answer at 127\.0\.0\.1:\d+ within 0\.1 s/);
  });

  it('a wrong world size and a duplicate rank are one line each, on every rank', async () => {
    for (const [bad, re] of [
      [{ rank: 1, worldSize: 3 }, /rank 1 \(from 127\.0\.0\.1\) has world size 3, rank 0 has 2/],
      [{ rank: 1, worldSize: 2 }, /rank 1 joined twice/],
    ] as const) {
      const port = await freePort();
      let up!: () => void;
      const listening = new Promise<void>((r) => (up = r));
      const W = bad.worldSize === 3 ? 2 : 3;
      const r0 = rendezvous(base(port, { worldSize: W, onListening: () => up() }));
      await listening;
      const others = bad.worldSize === 3
        ? [rendezvous(base(port, { ...bad }))]
        : [rendezvous(base(port, { rank: 1, worldSize: 3 })), rendezvous(base(port, { rank: 1, worldSize: 3 }))];
      const res = await Promise.allSettled([r0, ...others]);
      assert.ok(res.every((x) => x.status === 'rejected'), JSON.stringify(res.map((x) => x.status)));
      for (const x of res) assert.match((x as PromiseRejectedResult).reason.message, re);
    }
  });
});

describe('distributed environment', () => {
  it('torchrun variables', () => {
    const d = readDistEnv({ RANK: '3', WORLD_SIZE: '8', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2', MASTER_ADDR: 'node0', MASTER_PORT: '29501' });
    assert.deepEqual(d, { rank: 3, worldSize: 8, localRank: 1, localWorldSize: 2, masterAddr: 'node0', masterPort: 29501, source: 'torchrun' });
    assert.throws(() => readDistEnv({ RANK: '1', WORLD_SIZE: '2' }), /MASTER_ADDR is not set/);
    assert.throws(() => readDistEnv({ RANK: '2', WORLD_SIZE: '2', MASTER_ADDR: 'a' }), /rank 2 is not below the world size 2 \(RANK, WORLD_SIZE\)/);
    assert.throws(() => readDistEnv({ RANK: 'x', WORLD_SIZE: '2', MASTER_ADDR: 'a' }), /RANK="x": expected an integer >= 0/);
  });

  it('Slurm variables (first host of the node list unless MASTER_ADDR is set); none: one process', () => {
    const d = readDistEnv({ SLURM_PROCID: '5', SLURM_NTASKS: '8', SLURM_LOCALID: '1', SLURM_TASKS_PER_NODE: '4(x2)', SLURM_NODELIST: 'gpu[07-08]' });
    assert.deepEqual(d, { rank: 5, worldSize: 8, localRank: 1, localWorldSize: 4, masterAddr: 'gpu07', masterPort: 29500, source: 'slurm' });
    assert.equal(readDistEnv({ SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_NODELIST: 'a,b', MASTER_ADDR: 'head' }).masterAddr, 'head');
    assert.equal(readDistEnv({}).source, 'single');
    assert.equal(firstSlurmHost('node[01-04,07],gpu5'), 'node01');
    assert.equal(firstSlurmHost('a,b'), 'a');
    assert.equal(firstSlurmHost('rack1-[3-5]'), 'rack1-3');
  });
});
