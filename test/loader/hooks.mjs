// The module hooks of test/loader/register.mjs: TypeScript for the tests without tsx's start-up.
// resolve: a relative `./x.js` that does not exist is `./x.ts` (the NodeNext convention lib/
// and test/ are written in). load: a .ts file is transformed by esbuild (the one tsx ships,
// with tsx's options: the running Node as target, names kept, a source map) and the result is
// kept on disk, keyed by the file's path and content and by this loader's and esbuild's
// versions, so esbuild starts only when a file changed. Type-checking stays `npm run lint:types`.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const LOADER_VERSION = '1';
const requireFromTsx = createRequire(createRequire(import.meta.url).resolve('tsx'));
const ESBUILD_VERSION = JSON.parse(readFileSync(requireFromTsx.resolve('esbuild/package.json'), 'utf8')).version;
const CACHE = join(tmpdir(), `murphy-test-ts-${userInfo().uid}`);
const OPTIONS = {
  loader: 'ts',
  format: 'esm',
  target: `node${process.versions.node}`,
  sourcemap: 'inline',
  sourcesContent: false,
  keepNames: true,
  // tsconfig.json's target: ES2022 class fields (define semantics), as tsc builds dist/
  tsconfigRaw: { compilerOptions: { target: 'ES2022', useDefineForClassFields: true } },
};
const SALT = JSON.stringify([LOADER_VERSION, ESBUILD_VERSION, OPTIONS]);
let esbuild;

export async function resolve(specifier, context, next) {
  // From a .ts file, a relative ./x.js is ./x.ts when that exists (as tsx resolves it), looked up
  // first: Node's own not-found error for ./x.js costs more than the check (~0.1 s of CPU over
  // the ~140 modules of lib/). Anything else: Node's resolution, then the same .ts fallback.
  const parent = context.parentURL;
  if (parent?.startsWith('file:') && parent.endsWith('.ts') && specifier.endsWith('.js') && /^\.\.?\//.test(specifier)) {
    const ts = new URL(specifier.slice(0, -3) + '.ts', parent);
    if (existsSync(ts)) return { url: ts.href, format: 'module', shortCircuit: true };
  }
  try {
    return await next(specifier, context);
  } catch (e) {
    if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !/^\.\.?\//.test(specifier) || !specifier.endsWith('.js')) throw e;
    return next(specifier.slice(0, -3) + '.ts', context);
  }
}

export async function load(url, context, next) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return next(url, context);
  const file = fileURLToPath(url);
  const source = readFileSync(file, 'utf8');
  const cached = join(CACHE, createHash('sha256').update(SALT).update('\0').update(file).update('\0').update(source).digest('hex') + '.mjs');
  let code;
  try {
    code = readFileSync(cached, 'utf8');
  } catch {
    esbuild ??= requireFromTsx('esbuild');
    code = esbuild.transformSync(source, { ...OPTIONS, sourcefile: file }).code;
    // written whole or not at all: several test processes may compile the same file at once
    mkdirSync(CACHE, { recursive: true });
    const tmp = `${cached}.${process.pid}.tmp`;
    writeFileSync(tmp, code);
    renameSync(tmp, cached);
  }
  return { format: 'module', source: code, shortCircuit: true };
}
