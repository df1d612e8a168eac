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
import { describe, it } from 'node:test';
import { cxxCompiler } from '../helpers/compile-cache.js';
import { runPoolStress } from '../native/pool-stress.js';

const { cxx, have: haveCxx } = cxxCompiler();

describe('native thread pool under ThreadSanitizer', () => {
  const tsanProbe = haveCxx ? spawnSync(cxx, ['-fsanitize=thread', '-x', 'c++', '-', '-o', '/dev/null'], { input: 'int main(){}', stdio: ['pipe', 'ignore', 'ignore'] }).status === 0 : false;
  it('the stress program reports no data race', { skip: tsanProbe ? false : `no ThreadSanitizer with ${cxx} (its libtsan)` }, () => {
    runPoolStress({
      cxx, flags: ['-O1', '-g', '-std=c++17', '-pthread', '-fsanitize=thread'], runs: [['2', '100'], ['2', '0'], ['3', '5']], timeoutMs: 120_000,
      env: { TSAN_OPTIONS: 'halt_on_error=1 exitcode=66' },
      check: (r) => assert.doesNotMatch(r.stderr, /WARNING: ThreadSanitizer/, r.stderr.slice(0, 4000)),
    });
  });
});
