// The test files `npm test` runs, in the order it starts them: the slowest first (by the wall
// time each took alone, measured on the 2-core development VM; see docs/testing.md),
// then every other test/**/*.test.ts alphabetically. Node's runner starts files in the order
// given, cores + 2 at a time (package.json), so the long ones must not be left for last: a 28 s
// file started at the end would leave a core idle for most of its run. The files a group in
// test/groups/ imports run in that group's process instead of their own (see the groups).
// `node test/test-files.mjs` prints one path a line (the GPU suite, test/gpu/, is not among them);
// with --bundle (npm test), the runnable bundle of each instead (test/loader/runnable.mjs:
// node_modules/.cache/murphy-test/test/X.test.mjs).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CC_CACHE, pruneCache, TS_CACHE } from './loader/cache-dirs.mjs';

/**
 * The slowest files, slowest first: each file's wall time alone on the 2-core VM, mostly idle
 * (2026-12-01 04:10 UTC: 13.6 s down to 2.8 s; the next, paged-engine-emulate, 2.4 s; on
 * 2026-12-07 the device group, 4.7-5.2 s, went in after medium and the end-to-end group, 2.3 s,
 * last, in place of train/e2e, which it holds; the children group, 6.5-7.0 s, after medium). Update
 * when a file's cost changes a lot.
 */
export const SLOWEST = [
  'test/exec/benchmarks.test.ts',
  'test/exec/hostile.test.ts',
  'test/exec/protocol.test.ts',
  'test/groups/medium.test.ts',
  'test/groups/children.test.ts',
  'test/groups/device.test.ts',
  'test/exec/tempdirs.test.ts',
  'test/dist/train-2proc-emulate.test.ts',
  'test/dist/train-2proc-wsync.test.ts',
  'test/rollout/weight-sync.test.ts',
  'test/exec/remote.test.ts',
  'test/dist/train-2proc.test.ts',
  'test/model/gemm.test.ts',
  'test/dist/zero-device.test.ts',
  'test/report/report.test.ts',
  'test/exec/mutations.test.ts',
  'test/groups/end-to-end.test.ts',
];

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Every test/**\/*.test.ts outside test/gpu/, relative to the repository, sorted. */
function allTestFiles(dir = join(ROOT, 'test')) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const p = join(dir, e.name);
      if (e.isDirectory()) return relative(ROOT, p) === join('test', 'gpu') ? [] : allTestFiles(p);
      return e.isFile() && e.name.endsWith('.test.ts') ? [relative(ROOT, p)] : [];
    })
    .sort();
}

/** The test files that test/groups/*.test.ts import (`import '../x/y.test.js';`), relative to the repository. */
export function groupedFiles() {
  const dir = join(ROOT, 'test', 'groups');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => n.endsWith('.test.ts'))
    .sort()
    .flatMap((n) => [...readFileSync(join(dir, n), 'utf8').matchAll(/^import '(\.\.\/[^']+\.test)\.js';$/gm)].map((m) => relative(ROOT, join(dir, m[1] + '.ts'))));
}

/** The run order: the SLOWEST that exist, then the rest alphabetically; each file once; grouped files through their group. */
export function testFiles() {
  const grouped = new Set(groupedFiles());
  const all = allTestFiles().filter((f) => !grouped.has(f));
  const first = SLOWEST.filter((f) => all.includes(f));
  return [...first, ...all.filter((f) => !first.includes(f))];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  // `npm test` runs this once before the runner starts: the day's pruning of the test caches,
  // and with --bundle every test file's bundle built in one esbuild run (test/loader/hooks.mjs)
  // and written where the runner starts it from.
  for (const dir of [TS_CACHE, CC_CACHE]) pruneCache(dir);
  const files = testFiles();
  if (process.argv.includes('--bundle')) {
    // npm test: the runner starts each test process from its file's bundle, without the loader
    const { removeOrphans, writeRunnable } = await import('./loader/runnable.mjs');
    removeOrphans();
    const runnable = await writeRunnable(files.map((f) => join(ROOT, f)));
    process.stdout.write(runnable.map((f) => relative(ROOT, f)).join('\n') + '\n');
  } else {
    process.stdout.write(files.join('\n') + '\n');
  }
}
