// NCCL for the device tests. On a dry run (MURPHY_GPU_DRYRUN=1) the library is the fake of
// test/helpers/fake-nccl.ts, built into a temporary folder that is removed after the file's tests.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { findNccl, type NcclReport } from '../../lib/gpu/nccl.js';
import { buildFakeNccl } from '../helpers/fake-nccl.js';
import { dryRun, skipReason } from './common.js';

/** On a dry run only: builds the fake in a fresh folder named from `prefix` and points
 * MURPHY_NCCL at it (call before anything searches for NCCL). */
export function fakeNcclOnDryRun(prefix: string): void {
  if (!dryRun || skipReason) return;
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.env.MURPHY_NCCL = buildFakeNccl(join(dir, 'libnccl.so.2'));
  after(() => rmSync(dir, { recursive: true, force: true }));
}

/** NCCL loaded for this process (findNccl with install; the fake on a dry run), unless the GPU
 * tests are skipped here; skip: why the file's tests do not run (false: they do). */
export function deviceNccl(prefix: string): { nccl: NcclReport | undefined; skip: string | false } {
  fakeNcclOnDryRun(prefix);
  const nccl = skipReason ? undefined : findNccl({ install: true });
  return { nccl, skip: skipReason || (nccl && !nccl.found ? `${nccl.reason}` : false) };
}
