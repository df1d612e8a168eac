// Test files of about 0.4-1.3 s of CPU that `npm test` runs together in this one process: each
// runs child programs synchronously (a compiler, a check program, `node` or `python3` one-offs,
// the CLI), which return before the next test starts.
// test/test-files.mjs leaves them out of its own list; each still runs alone (node --test FILE).
// The 12 files took 7.5-8.5 s of CPU as 12 processes and 7.1-7.3 s as one (2026-12-07, alternated
// three times, each process from its runnable bundle). A file listed here must leave the process
// as it found it (no process.env writes, setNumThreads, chdir, exit code, process listeners or
// signals, children that outlive the call that started them, workers):
// test/runner/test-files.test.ts checks each for those.
import '../bench/gpu-generate.test.js';
import '../data/decode-lcb.test.js';
import '../gpu-engine/device.test.js';
import '../gpu-engine/memory-plan.test.js';
import '../model/huge-pages.test.js';
import '../model/sample-terms.test.js';
import '../native/loader.test.js';
import '../native/simd-copies.test.js';
import '../runner/cli-helper.test.js';
import '../runner/compile-cache.test.js';
import '../runner/test-files.test.js';
import '../train/rundir.test.js';
