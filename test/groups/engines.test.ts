// Small test files that `npm test` runs together in this one process (the device engine's wiring, model parity, paged rollouts).
// test/test-files.mjs leaves them out of its own list; each still runs alone (node --test FILE).
// A test process costs ~0.17 s of CPU before its first test (Node, the loader's thread,
// node:test, lib/), more than most of these files' tests: 30 such files took 6.5-6.8 s of CPU as
// 30 processes and 1.6-1.7 s as one (2026-12-01, cpuacct cgroup). A file listed here must leave
// the process as it found it (no process.env writes, setNumThreads, chdir, exit code, process
// listeners, child processes or workers): test/runner/test-files.test.ts checks each for those.
import '../gpu-engine/engine-wiring.test.js';
import '../gpu-engine/kernel-harness.test.js';
import '../gpu-engine/library-loader.test.js';
import '../gpu-engine/storage.test.js';
import '../model/parity.test.js';
import '../rollout/paged-engine.test.js';
import '../rollout/paged/device-executor.test.js';
import '../rollout/paged/plan-arrays.test.js';
import '../rollout/paged/prefix-cache.test.js';
import '../rollout/paged/scheduler.test.js';
import '../rollout/paged/tree-workload.test.js';
import '../rollout/vllm-config.test.js';
import '../rollout/vllm-tree.test.js';
