// Small test files that `npm test` runs together in this one process (the MURPHY core, config,
// data, prompts, kernels, native options).
// test/test-files.mjs leaves them out of its own list; each still runs alone (node --test FILE).
// A test process costs ~0.17 s of CPU before its first test (Node, the loader's thread,
// node:test, lib/): the 33 files then in core.test.ts and
// engines.test.ts took 10.4-10.9 s of CPU as 33 processes and 3.9-4.1 s as these two
// (2026-12-01, every process of the run from a cpuacct cgroup, twice each). A file listed here
// must leave the process as it found it (no process.env writes, setNumThreads, chdir, exit code,
// process listeners or signals, child processes or workers): test/runner/test-files.test.ts
// checks each for those.
import '../config/docs-table.test.js';
import '../bench/plot-gemm.test.js';
import '../bench/readme-summary.test.js';
import '../cli/help-cache.test.js';
import '../cli/startup-imports.test.js';
import '../data/loaders.test.js';
import '../dist/plans.test.js';
import '../demo/repair.test.js';
import '../doctor/driver.test.js';
import '../kernels/adamw.test.js';
import '../kernels/convert.test.js';
import '../kernels/grpo_loss.test.js';
import '../kernels/logprob.test.js';
import '../murphy/advantage.test.js';
import '../murphy/credit.test.js';
import '../murphy/flatten.test.js';
import '../murphy/layering.test.js';
import '../murphy/method.test.js';
import '../murphy/prune.test.js';
import '../murphy/serialize.test.js';
import '../native/errors.test.js';
import '../native/options.test.js';
import '../prompt/extract.test.js';
import '../rollout/finish.test.js';
import '../train/config.test.js';
import '../train/early-stop.test.js';
import '../train/manifest.test.js';
import '../train/progress.test.js';
