// Test files of about 1-3 s of CPU that `npm test` runs together in this one process: the device
// engine's paged step, decode kernels and paged rollouts on the CPU harness (PolicyModel device
// 'emulate').
// test/test-files.mjs leaves them out of its own list; each still runs alone (node --test FILE).
// A test process costs ~0.17 s of CPU before its first test, and each of these loads the same
// device-engine code (2026-12-07: see docs/testing.md, "More groups"). A file listed here must
// leave the process as it found it (no process.env writes, setNumThreads, chdir, exit code,
// process listeners or signals, child processes or workers): test/runner/test-files.test.ts
// checks each for those.
import '../gpu-engine/decode-harness.test.js';
import '../gpu-engine/paged-step.test.js';
import '../rollout/paged-engine-emulate.test.js';
