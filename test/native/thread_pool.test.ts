// The native thread pool under stress: compiled with the system C++ compiler and run with a
// time limit (a deadlock shows as a timeout). The earlier pool let a worker that woke late
// touch the next call's counters and hung here within seconds. Run with the idle workers'
// spin on (the default) and off (MURPHY_POOL_SPIN_US=0: they sleep at once), since the two
// reach a posted job by different ways. The same program built with ThreadSanitizer runs in
// `npm run test:sanitize` (test/sanitize/thread_pool.tsan.ts).
import { describe, it } from 'node:test';
import { cxxCompiler } from '../helpers/compile-cache.js';
import { runPoolStress } from './pool-stress.js';

const { cxx, have: haveCxx } = cxxCompiler();

describe('native thread pool', () => {
  it('survives concurrent, nested and throwing parallel_for calls', { skip: haveCxx ? false : `no C++ compiler (${cxx})` }, () => {
    runPoolStress({ cxx, flags: ['-O2', '-std=c++17', '-pthread'], runs: [['2', '100'], ['2', '0'], ['4', '100']], timeoutMs: 60_000 });
  });
});
