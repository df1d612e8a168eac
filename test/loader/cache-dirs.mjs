// The test run's two caches in the temp folder, and their pruning. Each cache keeps an entry per
// distinct input (a file's or bundle's content hash, a C helper's build key), so entries for
// inputs that no longer exist are never read again: without pruning the folders only grow
// (111 MB and 4,200 files after a few days of development here). `npm test` prunes once a day
// (test/test-files.mjs): every entry not written for `maxAgeDays` goes. A pruned entry that was
// still in use is rebuilt at its next read (esbuild ~10 ms, a C helper 0.1-1.3 s of CPU); the
// readers treat a missing entry as a miss, so pruning while another run reads is safe.
import { mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** esbuild's output for test/loader/hooks.mjs. */
export const TS_CACHE = join(tmpdir(), `murphy-test-ts-${userInfo().uid}`);
/** The compiled C/C++ helpers of test/helpers/compile-cache.ts. */
export const CC_CACHE = join(tmpdir(), `murphy-test-cc-${userInfo().uid}`);

const DAY_MS = 24 * 3600 * 1000;

/**
 * Removes the entries of `dir` (files or folders) last written more than `maxAgeDays` ago, at
 * most once per `everyDays` (a `.pruned` stamp in the folder); returns how many went.
 */
export function pruneCache(dir, { maxAgeDays = 7, everyDays = 1, now = Date.now() } = {}) {
  const stamp = join(dir, '.pruned');
  const last = statSync(stamp, { throwIfNoEntry: false })?.mtimeMs;
  if (last !== undefined && now - last < everyDays * DAY_MS) return 0;
  let removed = 0;
  let names;
  try {
    names = readdirSync(dir);
  } catch {
    return 0; // no cache yet
  }
  for (const name of names) {
    if (name === '.pruned') continue;
    const p = join(dir, name);
    const st = statSync(p, { throwIfNoEntry: false });
    if (st && now - st.mtimeMs > maxAgeDays * DAY_MS) {
      rmSync(p, { recursive: true, force: true });
      removed++;
    }
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(stamp, '');
  utimesSync(stamp, now / 1000, now / 1000);
  return removed;
}
