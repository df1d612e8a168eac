// The overlap of ZeRO-1's gradient reductions with the backward pass on GPUs (docs/distributed.md,
// "Overlap"): one process per GPU (test/gpu/zero-overlap-rank.ts), 2 ranks (MURPHY_NCCL_RANKS=N
// for more), the CUDA engine over NCCL. Each rank trains 3 steps with the overlap (and its
// device timeline) and with the reference from the same weights, and checks:
//   - the timeline: on every step the first bucket's reduction started on the NCCL stream
//     before the backward ended on the compute stream (CUDA events, > 0 ms), and several buckets
//     were started from inside the backward;
//   - the overlapped shards and weights equal the reference's (the same NCCL calls on the same
//     gradients; it prints the measured difference and asserts 0);
//   - it prints each step's wall time with and without the overlap (not asserted: the gain
//     depends on the link, NVLink or PCIe, and the bucket size).
// Needs at least 2 CUDA devices and NCCL; skipped otherwise, saying why (one GPU is a world of
// one, where nothing is overlapped). MURPHY_GPU_DRYRUN=1 runs the same checks for 2 ranks in this
// process on the emulated engine over the fake libnccl (test/helpers/fake-nccl.ts), where there
// are no events (the timeline is null) and nothing runs concurrently: it checks the test code,
// not the device. Written without a GPU: it has not yet run on a device.
import './binary.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { NcclCollective } from '../../lib/dist/nccl-collective.js';
import { findNccl } from '../../lib/gpu/nccl.js';
import { cuda } from '../../lib/native.js';
import { testSeed } from '../helpers/random.js';
import { dryRun, skipReason } from './common.js';
import { fakeNcclOnDryRun } from './nccl-setup.js';
import { overlapRank, type OverlapResult } from './zero-overlap-rank.js';

fakeNcclOnDryRun('murphy-gpu-ovl-');
const devices = skipReason || dryRun ? 0 : cuda.status().devices.length;
const nccl = dryRun || devices >= 2 ? findNccl({ install: true }) : undefined;
const skip = dryRun ? (nccl && !nccl.found ? nccl.reason! : false)
  : skipReason || (devices < 2 ? `needs at least 2 CUDA devices (one GPU is a world of one: nothing to overlap), this machine has ${devices}` : nccl && !nccl.found ? nccl.reason! : false);
console.log(`# gpu/zero-overlap: ${dryRun ? 'MURPHY_GPU_DRYRUN=1: 2 emulated ranks over the fake NCCL (no events, no concurrency)' : skip || `${devices} devices, NCCL ${nccl?.versionText} from ${nccl?.path}`}`);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

function rankProcess(port: number, world: number, r: number, seed: number): Promise<OverlapResult & { stderr: string }> {
  return new Promise((resolve) => {
    const visible = process.env.CUDA_VISIBLE_DEVICES?.split(',').map((x) => x.trim()).filter((x) => x !== '');
    const env = { ...process.env, CUDA_VISIBLE_DEVICES: visible ? visible[r] : String(r) };
    const p = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'zero-overlap-rank.ts'), String(port), String(world), String(r), String(seed)], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '', err = '';
    p.stdout.on('data', (d: Buffer) => { out += d; });
    p.stderr.on('data', (d: Buffer) => { err += d; });
    p.on('close', () => {
      try {
        resolve({ ...(JSON.parse(out.trim().split('\n').pop() ?? '') as OverlapResult), stderr: err });
      } catch {
        resolve({ rank: r, ok: false, error: `no result (stdout: ${out.slice(-500)})`, timelineMs: [], startedInBackward: [], buckets: 0, maxDiff: NaN, wallMs: [], stderr: err });
      }
    });
  });
}

async function results(seed: number): Promise<OverlapResult[]> {
  if (dryRun) {
    let listening!: (port: number) => void;
    const port = new Promise<number>((r) => (listening = r));
    const opts = { worldSize: 2, masterAddr: '127.0.0.1', device: -1, connectTimeoutMs: 20_000, timeoutMs: 60_000 };
    const c0 = NcclCollective.create({ ...opts, rank: 0, masterPort: 0, onListening: listening });
    const world = await Promise.all([c0, port.then((p) => NcclCollective.create({ ...opts, rank: 1, masterPort: p }))]);
    try {
      return await Promise.all(world.map((c) => overlapRank(c, 'emulate', seed)));
    } finally {
      await Promise.all(world.map((c) => c.close()));
    }
  }
  const world = Math.min(devices, Number(process.env.MURPHY_NCCL_RANKS ?? 2));
  const port = await freePort();
  const rs = await Promise.all(Array.from({ length: world }, (_, r) => rankProcess(port, world, r, seed)));
  for (const r of rs) assert.equal(r.ok, true, `rank ${r.rank}: ${r.error}\n${r.stderr}`);
  return rs;
}

describe('ZeRO-1: gradient reductions overlapped with the backward pass, on GPUs', () => {
  it('the first bucket\'s reduction starts before the backward ends; the results equal the reference\'s', { skip, timeout: 600_000 }, async () => {
    const rs = await results(testSeed('gpu/zero-overlap'));
    for (const r of rs) {
      console.log(`# rank ${r.rank}: ${r.buckets} buckets; started in the backward per step ${JSON.stringify(r.startedInBackward)}; first start to backward end ${JSON.stringify(r.timelineMs)} ms; step wall ms (overlap, reference) ${JSON.stringify(r.wallMs.map(([a, b]) => [Math.round(a), Math.round(b)]))}; max |overlap - reference| = ${r.maxDiff}`);
      assert.equal(r.maxDiff, 0, `rank ${r.rank}: the overlap changed the numbers`);
      assert.ok(r.startedInBackward.every((n) => n >= 2), `rank ${r.rank}: buckets started from inside the backward ${JSON.stringify(r.startedInBackward)}`);
      if (dryRun) assert.ok(r.timelineMs.every((x) => x === null), 'no events on the emulated engine');
      else assert.ok(r.timelineMs.every((x) => x !== null && x > 0), `rank ${r.rank}: first reduction start to backward end ${JSON.stringify(r.timelineMs)} ms (> 0: it started before the backward ended)`);
    }
  });
});
