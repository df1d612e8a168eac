// Test files of about 0.5-1 s of CPU that `npm test` runs together in this one process (engines,
// the training loop, evaluation, chat).
// test/test-files.mjs leaves them out of its own list; each still runs alone (node --test FILE).
// A test process costs ~0.17 s of CPU before its first test (Node, the loader's thread,
// node:test, lib/): the 12 files it then held took 10.1-10.3 s of CPU
// as 12 processes and 7.8-8.0 s as one (6 s wall on the shared VM)
// (2026-12-01, every process of the run from a cpuacct cgroup, twice each). A file listed here
// must leave the process as it found it (no process.env writes, setNumThreads, chdir, exit code,
// process listeners or signals, child processes or workers): test/runner/test-files.test.ts
// checks each for those.
import '../eval/iterk.test.js';
import '../gpu-engine/attention-harness.test.js';
import '../gpu-engine/engine-emulate.test.js';
import '../gpu-engine/engine-onstep.test.js';
import '../model/engine.test.js';
import '../prompt/chat.test.js';
import '../rollout/paged/block-allocator.test.js';
import '../rollout/paged/pool-property.test.js';
import '../rollout/paged/property.test.js';
import '../rollout/sample-stream.test.js';
import '../rollout/weight-sync-resume.test.js';
import '../train/demo-output.test.js';
import '../train/loop.test.js';
