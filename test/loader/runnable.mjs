// The test processes of `npm test` start from plain modules, without the loader: for each test
// file X.test.ts, `node test/test-files.mjs --bundle` writes its bundle (test/loader/hooks.mjs:
// the same code the loader would serve for it) to X.test.bundle.mjs beside it (git ignores
// them), and the runner is given those. A process under the loader pays for the loader's own
// thread (Node 20 runs module hooks off the main thread) and a round trip to it for every
// package it imports: ~55 ms of CPU a test process, ~65 processes a run. The bundle beside its
// entry resolves packages and any relative path it computes at run time as the entry would;
// each bundled module's import.meta is its own file's (written in by the bundle). Child
// processes that run TypeScript still use the loader (TS_LOADER, test/helpers/cli.ts).
// test/skip-summary-reporter.mjs names the .ts file, not its bundle, and maps positions back.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cachedBundle, prebundle, writeAtomic } from './hooks.mjs';

const SUFFIX = '.bundle.mjs';

/** Where the runnable bundle of the entry `file` (an absolute X.ts) goes. */
export const runnablePath = (file) => file.replace(/\.ts$/, SUFFIX);

/** The entry whose runnable bundle is at `path`; undefined for any other file. */
export const entryOf = (path) => (typeof path === 'string' && path.endsWith(SUFFIX) ? path.slice(0, -SUFFIX.length) + '.ts' : undefined);

/**
 * What runs in place of an entry that did not bundle (esbuild refused it): the entry itself
 * through the loader, whose own bundling then fails with esbuild's message in that test's output.
 */
function throughLoader(file) {
  const register = new URL('./register.mjs', import.meta.url).href;
  return `// ${file} did not bundle: run through the loader, which says why\nawait import(${JSON.stringify(register)});\nawait import(${JSON.stringify(pathToFileURL(file).href)});\n`;
}

/**
 * Bundles the entries `files` (absolute .ts paths) that have no valid cached bundle, in one
 * esbuild run, then writes each one's runnable copy where it differs from the one there;
 * returns the runnable paths, in order.
 */
export async function writeRunnable(files) {
  try {
    await prebundle(files);
  } catch {
    // an entry esbuild cannot build: it runs through the loader (throughLoader), which reports it
  }
  return files.map((file) => {
    const code = cachedBundle(file) ?? throughLoader(file);
    const out = runnablePath(file);
    if (!existsSync(out) || readFileSync(out, 'utf8') !== code) writeAtomic(out, code);
    return out;
  });
}

/** Removes the runnable bundles under `dir` whose test file is gone (renamed or deleted); returns their paths. */
export function removeOrphans(dir) {
  const gone = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) gone.push(...removeOrphans(p));
    else if (e.isFile() && entryOf(p) !== undefined && !existsSync(entryOf(p))) {
      rmSync(p, { force: true });
      gone.push(p);
    }
  }
  return gone;
}
