// The test processes of `npm test` start from plain modules, without the loader: for each test
// file test/X.test.ts, `node test/test-files.mjs --bundle` writes its bundle (test/loader/hooks.mjs:
// the same code the loader would serve for it) to node_modules/.cache/murphy-test/test/X.test.mjs,
// and the runner is given those. A process under the loader pays for the loader's own thread
// (Node 20 runs module hooks off the main thread) and a round trip to it for every package it
// imports: ~55 ms of CPU a test process, ~65 processes a run. Inside the repository the bundle
// resolves packages as its test file would; every relative import of the file and of what it
// imports is inside the bundle, and each bundled module's import.meta is its own file's (written
// in by the bundle), so paths made from import.meta.url name the sources. Child processes that
// run TypeScript still use the loader (TS_LOADER, test/helpers/cli.ts).
// test/skip-summary-reporter.mjs names the .ts file, not its bundle, and maps positions back.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cachedBundle, memoHashes, prebundle, writeAtomic } from './hooks.mjs';

/** The repository the test files are in. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Where the runnable bundles go: a cache folder of the repository's node_modules. */
export const RUNNABLE_DIR = join(ROOT, 'node_modules', '.cache', 'murphy-test');

/** Where the runnable bundle of the entry `file` (an absolute path to a .ts file in the repository) goes. */
export function runnablePath(file, dir = RUNNABLE_DIR, root = ROOT) {
  const rel = relative(root, file);
  if (rel.startsWith('..') || !rel.endsWith('.ts')) throw new Error(`runnablePath: ${file} is not a .ts file under ${root}`);
  return join(dir, rel.slice(0, -3) + '.mjs');
}

/** The entry whose runnable bundle is at `path`; undefined for any other file. */
export function entryOf(path, dir = RUNNABLE_DIR, root = ROOT) {
  if (typeof path !== 'string' || !path.startsWith(dir + sep) || !path.endsWith('.mjs')) return undefined;
  return join(root, relative(dir, path).slice(0, -4) + '.ts');
}

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
export async function writeRunnable(files, dir = RUNNABLE_DIR, root = ROOT) {
  // one read and hash of each source for both checks (the sources do not change in between)
  const hashOf = memoHashes();
  try {
    await prebundle(files, hashOf);
  } catch {
    // an entry esbuild cannot build: it runs through the loader (throughLoader), which reports it
  }
  return files.map((file) => {
    const code = cachedBundle(file, hashOf) ?? throughLoader(file);
    const out = runnablePath(file, dir, root);
    if (!existsSync(out) || readFileSync(out, 'utf8') !== code) writeAtomic(out, code);
    return out;
  });
}

/** Removes the runnable bundles in `dir` whose test file is gone (renamed or deleted); returns their paths. */
export function removeOrphans(dir = RUNNABLE_DIR, root = ROOT, at = dir) {
  const gone = [];
  if (!existsSync(at)) return gone;
  for (const e of readdirSync(at, { withFileTypes: true })) {
    const p = join(at, e.name);
    if (e.isDirectory()) gone.push(...removeOrphans(dir, root, p));
    else if (e.isFile()) {
      const entry = entryOf(p, dir, root); // (a writer's temporary file is not a bundle: left alone)
      if (entry !== undefined && !existsSync(entry)) rmSync(p, { force: true }), gone.push(p);
    }
  }
  return gone;
}
