// The native thread pool under stress: compiled with the system C++ compiler and run with a
// time limit (a deadlock shows as a timeout). The earlier pool let a worker that woke late
// touch the next call's counters and hung here within seconds. Run with the idle workers'
// spin on (the default) and off (MURPHY_POOL_SPIN_US=0: they sleep at once), since the two
// reach a posted job by different ways. The same program built with ThreadSanitizer runs in
// `npm run test:sanitize` (test/sanitize/thread_pool.tsan.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { compileCached, cxxCompiler } from '../helpers/compile-cache.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { cxx, have: haveCxx } = cxxCompiler();

describe('native thread pool', () => {
  it('survives concurrent, nested and throwing parallel_for calls', { skip: haveCxx ? false : `no C++ compiler (${cxx})` }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-pool-'));
    try {
      const exe = join(dir, 'stress');
      // built once per distinct source (test/helpers/compile-cache.ts); a compile error throws with the compiler's message
      compileCached({ compiler: cxx, flags: ['-O2', '-std=c++17', '-pthread', `-I${join(root, 'native/cpu')}`], sources: [join(root, 'test/native/thread_pool_stress.cc'), join(root, 'native/cpu/threads.cc')], out: exe });
      for (const [threads, spin] of [['2', '100'], ['2', '0'], ['4', '100']]) {
        const r = spawnSync(exe, [], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, MURPHY_NUM_THREADS: threads, MURPHY_POOL_SPIN_US: spin } });
        assert.equal(r.signal, null, `timed out or killed with ${threads} threads, spin ${spin} us (deadlock?)`);
        assert.equal(r.status, 0, r.stdout + r.stderr);
        assert.match(r.stdout, new RegExp(`ok 40000 calls, ${threads} threads`));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
