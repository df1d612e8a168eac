// How the tests start `murphy-native` as a user would. The compiled command (`node dist/cli.js`,
// what `npm install`/`npm ci` build) starts with about 0.4 s less CPU than the sources through
// tsx (`node --import tsx lib/cli.ts`), and the rank processes of `--nproc-per-node` inherit the
// choice. dist/ is used only when it is at least as new as every source it is built from (each
// lib/**/*.ts older than its dist/**/*.js), so a test never runs a stale build: after an edit
// to lib/ without `npm run build:ts` the tests run the sources. MURPHY_TEST_CLI=tsx or =dist
// forces one (dist must then exist).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
const LIB = join(REPO, 'lib');
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

/** Node's arguments that start the CLI (before the command's own): dist/cli.js or tsx + lib/cli.ts. */
export function cliArgs(): string[] {
  if (chosen) return chosen;
  const force = process.env.MURPHY_TEST_CLI;
  if (force !== undefined && force !== 'tsx' && force !== 'dist') throw new Error(`MURPHY_TEST_CLI must be "tsx" or "dist", got ${JSON.stringify(force)}`);
  const dist = force === 'dist' || (force === undefined && distIsFresh());
  if (dist && !existsSync(join(DIST, 'cli.js'))) throw new Error('MURPHY_TEST_CLI=dist but dist/cli.js is missing: run `npm run build:ts`');
  chosen = dist ? [join(DIST, 'cli.js')] : ['--import', 'tsx', join(LIB, 'cli.ts')];
  return chosen;
}

/** `[...cliArgs(), ...args]`: spawn(process.execPath, cli(...args)) runs `murphy-native ARGS`. */
export function cli(...args: string[]): string[] {
  return [...cliArgs(), ...args];
}
