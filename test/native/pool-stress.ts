// The thread pool's stress program (test/native/thread_pool_stress.cc with native/cpu/threads.cc),
// built with the system C++ compiler and the given flags (test/helpers/compile-cache.ts: once per
// distinct source and flags; a compile error throws with the compiler's message), then run once
// for each [threads, spin in us] with a time limit (a deadlock shows as a timeout). Shared by
// test/native/thread_pool.test.ts (the plain build, npm test) and
// test/sanitize/thread_pool.tsan.ts (ThreadSanitizer, npm run test:sanitize).
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileCached } from '../helpers/compile-cache.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface PoolStressRun {
  cxx: string;
  /** Compiler flags besides the include folder (native/cpu). */
  flags: string[];
  /** [MURPHY_NUM_THREADS, MURPHY_POOL_SPIN_US] of each run. */
  runs: [string, string][];
  timeoutMs: number;
  /** More environment for each run (TSAN_OPTIONS). */
  env?: Record<string, string>;
  /** More checks on each run's result. */
  check?: (r: SpawnSyncReturns<string>) => void;
}

export function runPoolStress(o: PoolStressRun): void {
  const dir = mkdtempSync(join(tmpdir(), 'murphy-pool-'));
  try {
    const exe = join(dir, 'stress');
    compileCached({ compiler: o.cxx, flags: [...o.flags, `-I${join(root, 'native/cpu')}`], sources: [join(root, 'test/native/thread_pool_stress.cc'), join(root, 'native/cpu/threads.cc')], out: exe, oneUnit: true });
    for (const [threads, spin] of o.runs) {
      const r = spawnSync(exe, [], { encoding: 'utf8', timeout: o.timeoutMs, env: { ...process.env, MURPHY_NUM_THREADS: threads, MURPHY_POOL_SPIN_US: spin, ...o.env } });
      assert.equal(r.signal, null, `timed out or killed with ${threads} threads, spin ${spin} us (deadlock?)`);
      o.check?.(r);
      assert.equal(r.status, 0, r.stdout + r.stderr.slice(0, 4000));
      assert.match(r.stdout, new RegExp(`ok 40000 calls, ${threads} threads`));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
