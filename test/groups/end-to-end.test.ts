// Test files of about 1-1.5 s of CPU that `npm test` runs together in this one process: a training
// run end to end, the run directory's integrity checks, and serving to the official OpenAI client.
// test/test-files.mjs leaves them out of its own list; each still runs alone (node --test FILE).
// A test process costs ~0.17 s of CPU before its first test (2026-12-07: see docs/testing.md,
// "More groups"). A file listed here must leave the process as it found it (no process.env
// writes, setNumThreads, chdir, exit code, process listeners or signals, child processes or
// workers): test/runner/test-files.test.ts checks each for those.
import '../train/e2e.test.js';
import '../train/integrity.test.js';
import '../rollout/serve-openai.test.js';
