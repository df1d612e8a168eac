// How the tests start `murphy-native` as a user would. The compiled command (`node dist/cli.js`,
// what `npm install`/`npm ci` build) is used when it is at least as new as every source it is
// built from (each lib/**/*.ts older than its dist/**/*.js), so a test never runs a stale build;
// else the sources under the tests' own loader (`node --import test/loader/register.mjs
// lib/cli.ts`: lib/ bundled into one module, kept by content; measured 0.68 s of CPU for
// `doctor --json` from dist/, 0.8 s this way, 1.3 s through tsx). The rank processes of
// `--nproc-per-node` inherit the choice. MURPHY_TEST_CLI=dist, =sources or =tsx forces one
// (dist must then exist).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
const LIB = join(REPO, 'lib');
/** Node's arguments that run TypeScript as the tests do (test/loader: esbuild, kept by content; ~0.2-0.4 s of CPU less a start than `--import tsx`). */
export const TS_LOADER = ['--import', join(REPO, 'test', 'loader', 'register.mjs')];
const DIST = join(REPO, 'dist');

/** Every .ts file under `dir`, recursively. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(p);
    return e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** Whether `dist` was built from the `lib` sources as they are now (by modification time). */
export function distIsFresh(lib = LIB, dist = DIST): boolean {
  try {
    return tsFiles(lib).every((src) => {
      const out = join(dist, relative(lib, src)).replace(/\.ts$/, '.js');
      return existsSync(out) && statSync(out).mtimeMs >= statSync(src).mtimeMs;
    });
  } catch {
    return false;
  }
}

let chosen: string[] | undefined;

/**
 * Node's arguments that start the CLI for a MURPHY_TEST_CLI value (`force`; undefined: dist/cli.js
 * when `fresh()`, else the sources under test/loader); throws on a value it does not know.
 */
export function cliArgsFor(force: string | undefined, fresh: () => boolean = distIsFresh): string[] {
  if (force !== undefined && !['dist', 'sources', 'tsx'].includes(force)) throw new Error(`MURPHY_TEST_CLI must be "dist", "sources" or "tsx", got ${JSON.stringify(force)}`);
  const dist = force === 'dist' || (force === undefined && fresh());
  if (dist && !existsSync(join(DIST, 'cli.js'))) throw new Error('MURPHY_TEST_CLI=dist but dist/cli.js is missing: run `npm run build:ts`');
  if (dist) return [join(DIST, 'cli.js')];
  return [...(force === 'tsx' ? ['--import', 'tsx'] : TS_LOADER), join(LIB, 'cli.ts')];
}

/** Node's arguments that start the CLI (before the command's own): dist/cli.js, or lib/cli.ts under test/loader (or tsx); chosen once a process. */
export function cliArgs(): string[] {
  chosen ??= cliArgsFor(process.env.MURPHY_TEST_CLI);
  return chosen;
}

/** `[...cliArgs(), ...args]`: spawn(process.execPath, cli(...args)) runs `murphy-native ARGS`. */
export function cli(...args: string[]): string[] {
  return [...cliArgs(), ...args];
}
