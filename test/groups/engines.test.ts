// Small test files that `npm test` runs together in this one process (the device engine's
// wiring, model parity, paged rollouts).
// test/test-files.mjs leaves them out of its own list; each still runs alone (node --test FILE).
// A test process costs ~0.17 s of CPU before its first test (Node, the loader's thread,
// node:test, lib/): the 33 files then in core.test.ts and
// engines.test.ts took 10.4-10.9 s of CPU as 33 processes and 3.9-4.1 s as these two
// (2026-12-01, every process of the run from a cpuacct cgroup, twice each). A file listed here
// must leave the process as it found it (no process.env writes, setNumThreads, chdir, exit code,
// process listeners or signals, child processes or workers): test/runner/test-files.test.ts
// checks each for those.
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
import '../dist/rendezvous.test.js';
import '../model/gemm-bf16.test.js';
import '../model/gemm-bf16-config.test.js';
