// The multi-GPU NCCL check: one process per GPU (test/gpu/nccl-rank.ts), rank 0's unique id
// handed to the others on the command line; each rank checks all-reduce, reduce-scatter,
// all-gather and broadcast of f32 and bf16 buckets against host results. Run on a machine with
// at least 2 GPUs (npm run test:gpu, or alone: node --import tsx --test test/gpu/nccl-multi.test.ts;
// MURPHY_NCCL_RANKS=N uses N of them). Skipped with fewer than 2 devices or without NCCL, saying
// why. It has not yet run: no multi-GPU machine was available to its author.
import './binary.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { findNccl, ncclUniqueId, uniqueIdHex } from '../../lib/gpu/nccl.js';
import { cuda } from '../../lib/native.js';
import { testSeed } from '../helpers/random.js';
import { dryRun, skipReason } from './common.js';

const devices = skipReason || dryRun ? 0 : cuda.status().devices.length;
const nccl = devices >= 2 ? findNccl({ install: true }) : undefined;
const skip = dryRun ? 'dry run: needs real GPUs and NCCL'
  : skipReason || (devices < 2 ? `needs at least 2 CUDA devices, this machine has ${devices}` : nccl && !nccl.found ? nccl.reason! : false);
console.log(`# gpu/nccl-multi: ${skip || `${devices} devices, NCCL ${nccl?.versionText} from ${nccl?.path}`}`);

function rank(idHex: string, world: number, r: number, seed: number): Promise<{ rank: number; ok: boolean; checks?: number; error?: string; stderr: string }> {
  return new Promise((resolve) => {
    // one GPU per process: rank r sees only the r-th visible device, as its device 0
    const visible = process.env.CUDA_VISIBLE_DEVICES?.split(',').map((s) => s.trim()).filter((s) => s !== '');
    const env = { ...process.env, CUDA_VISIBLE_DEVICES: visible ? visible[r] : String(r) };
    const p = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'nccl-rank.ts'), idHex, String(world), String(r), String(seed)], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '', err = '';
    p.stdout.on('data', (d: Buffer) => { out += d; });
    p.stderr.on('data', (d: Buffer) => { err += d; });
    p.on('close', () => {
      try {
        resolve({ ...(JSON.parse(out.trim().split('\n').pop() ?? '') as { rank: number; ok: boolean }), stderr: err });
      } catch {
        resolve({ rank: r, ok: false, error: `no result (stdout: ${out.slice(-500)})`, stderr: err });
      }
    });
  });
}

describe('NCCL across GPUs (one process per GPU)', () => {
  it('every rank gets the host result of each collective, f32 and bf16', { skip, timeout: 600_000 }, async () => {
    const world = Math.min(devices, Number(process.env.MURPHY_NCCL_RANKS ?? devices));
    const id = uniqueIdHex(ncclUniqueId());
    const seed = testSeed('gpu/nccl-multi');
    const results = await Promise.all(Array.from({ length: world }, (_, r) => rank(id, world, r, seed)));
    for (const r of results) assert.equal(r.ok, true, `rank ${r.rank}: ${r.error}\n${r.stderr}`);
    assert.deepEqual(results.map((r) => r.checks), results.map(() => 16));
  });
});
