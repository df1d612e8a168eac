// The native thread pool's stress program (test/native/thread_pool_stress.cc) built with
// ThreadSanitizer. Run by `npm run test:sanitize` (scripts/sanitize-check.sh, after the
// AddressSanitizer files, with no sanitizer preloaded into node), not by `npm test`: like the ASan
// and UBSan builds it is a sanitizer build of native code, and it cost `npm test` ~3 s of CPU on a
// clean machine (the instrumented build, then three instrumented runs). `npm test` still runs the
// same stress on the plain build (test/native/thread_pool.test.ts).
//
// The hand-off between the caller and the workers takes no lock while they are awake
// (native/cpu/threads.cc: seq_cst counters); ThreadSanitizer checks that the job's fields, the
// part counters and the error slot are never touched by two threads without an order between
// them (a late worker on the next call's fields would be such a race).
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

describe('native thread pool under ThreadSanitizer', () => {
  const tsanProbe = haveCxx ? spawnSync(cxx, ['-fsanitize=thread', '-x', 'c++', '-', '-o', '/dev/null'], { input: 'int main(){}', stdio: ['pipe', 'ignore', 'ignore'] }).status === 0 : false;
  it('the stress program reports no data race', { skip: tsanProbe ? false : `no ThreadSanitizer with ${cxx} (its libtsan)` }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-pool-tsan-'));
    try {
      const exe = join(dir, 'stress-tsan');
      compileCached({ compiler: cxx, flags: ['-O1', '-g', '-std=c++17', '-pthread', '-fsanitize=thread', `-I${join(root, 'native/cpu')}`], sources: [join(root, 'test/native/thread_pool_stress.cc'), join(root, 'native/cpu/threads.cc')], out: exe });
      for (const [threads, spin] of [['2', '100'], ['2', '0'], ['3', '5']]) {
        const r = spawnSync(exe, [], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, MURPHY_NUM_THREADS: threads, MURPHY_POOL_SPIN_US: spin, TSAN_OPTIONS: 'halt_on_error=1 exitcode=66' } });
        assert.equal(r.signal, null, `timed out or killed with ${threads} threads, spin ${spin} us (deadlock?)`);
        assert.doesNotMatch(r.stderr, /WARNING: ThreadSanitizer/, r.stderr.slice(0, 4000));
        assert.equal(r.status, 0, r.stdout + r.stderr.slice(0, 4000));
        assert.match(r.stdout, new RegExp(`ok 40000 calls, ${threads} threads`));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
