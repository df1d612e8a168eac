// The module hooks of test/loader/register.mjs: TypeScript for the tests without tsx's start-up.
// resolve: a relative `./x.js` that does not exist is `./x.ts` (the NodeNext convention lib/
// and test/ are written in). load: a .ts file is transformed by esbuild (the one tsx ships,
// with tsx's options: the running Node as target, names kept, a source map) and the result is
// kept on disk, keyed by the file's path and content and by this loader's text and esbuild's
// version, so esbuild starts only when a file changed. Type-checking stays `npm run lint:types`.
//
// The .ts file a process starts with (a test file; lib/cli.ts when a test runs the CLI from
// the sources; a test's helper program) is loaded as one module: esbuild bundles it with every
// relative module it imports (its helpers, lib/, bench/; packages and node: builtins stay
// imports), so the process compiles and links one module instead of ~50-150, each a round trip
// to this hooks thread (25 test files, each run alone twice, interleaved with the per-module
// loader: 0.05 s of CPU less per file on average, 0.15-0.4 s for some). Semantics kept: each
// bundled module's import.meta.url, .dirname and .filename are its own file's (written in by
// esbuild's define: code, not strings), the entry keeps its URL (its relative paths and its
// packages resolve as before), one instance of each module per process (relative dynamic
// import()s are bundled too), and the source map points every line back into its own file.
// The bundle is kept with the content hash of every file in it, used while they all match.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire, SourceMap } from 'node:module';
import { dirname, join, resolve as resolvePath } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TS_CACHE as CACHE } from './cache-dirs.mjs';

const requireFromTsx = createRequire(createRequire(import.meta.url).resolve('tsx'));
const ESBUILD_VERSION = JSON.parse(readFileSync(requireFromTsx.resolve('esbuild/package.json'), 'utf8')).version;
const OPTIONS = {
  format: 'esm',
  target: `node${process.versions.node}`,
  sourcemap: 'inline',
  sourcesContent: false,
  keepNames: true,
  // tsconfig.json's target: ES2022 class fields (define semantics), as tsc builds dist/
  tsconfigRaw: { compilerOptions: { target: 'ES2022', useDefineForClassFields: true } },
};
// this file's own text is in the key too: an edit to the loader compiles everything again
const SALT = JSON.stringify([ESBUILD_VERSION, OPTIONS, createHash('sha256').update(readFileSync(fileURLToPath(import.meta.url))).digest('hex')]);
let esbuild;

const sha256 = (...parts) => {
  const h = createHash('sha256').update(SALT);
  for (const p of parts) h.update('\0').update(p);
  return h.digest('hex');
};

/** Writes `text` to `path` whole or not at all: several test processes may compile the same file at once. */
export function writeAtomic(path, text) {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** The URLs of the .ts files a process (or worker) started with: each is bundled. */
const entries = new Set();

export async function resolve(specifier, context, next) {
  if (context.parentURL === undefined) {
    const r = await next(specifier, context);
    if (r.url.startsWith('file:') && r.url.endsWith('.ts')) entries.add(r.url);
    return r;
  }
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

/** esbuild's transform of `source` (the text of `file`) with `options`, kept by `kind`, path and content. */
function compiled(kind, file, source, options) {
  const cached = join(CACHE, sha256(kind, file, source) + '.mjs');
  try {
    return readFileSync(cached, 'utf8');
  } catch {
    esbuild ??= requireFromTsx('esbuild');
    const { code } = esbuild.transformSync(source, { ...options, sourcefile: file });
    writeAtomic(cached, code);
    return code;
  }
}

/** One .ts file transformed on its own. */
const transformed = (file) => compiled('module', file, readFileSync(file, 'utf8'), { ...OPTIONS, loader: 'ts' });

/** The names import.meta's file-specific fields stand for in a bundled module (esbuild's define). */
const META = { 'import.meta.url': '__murphyImportMetaUrl', 'import.meta.dirname': '__murphyImportMetaDirname', 'import.meta.filename': '__murphyImportMetaFilename' };

/**
 * `source` of `file` with a first-line declaration of what its import.meta fields stand for in
 * the bundle (esbuild's define replaces them in code, not in strings or comments), so a module
 * keeps its own when bundled: the declarations are module-scoped (esbuild renames them apart
 * between modules), dropped where unused, and on the same line as the file's first (or in place
 * of its #! line), so every line keeps its number.
 */
function withOwnImportMeta(source, file) {
  const value = { 'import.meta.url': pathToFileURL(file).href, 'import.meta.dirname': dirname(file), 'import.meta.filename': file };
  const declaration = `const ${Object.entries(META).map(([k, name]) => `${name} = ${JSON.stringify(value[k])}`).join(', ')};`;
  // a #! line (lib/cli.ts) means nothing inside a bundle: the declaration takes its place
  return source.startsWith('#!') ? source.replace(/^#![^\n]*/, declaration) : `${declaration} ${source}`;
}

/** The cache file of the entry `file`'s bundle. */
const bundleCacheFile = (file) => join(CACHE, sha256('bundle', file) + '.json');

/** The content hash of the file at `path`; undefined when there is none. */
const fileHash = (path) => (existsSync(path) ? sha256(readFileSync(path)) : undefined);

/** fileHash, each file read and hashed once per returned function: entries share lib/, so checks of many share it. */
export function memoHashes() {
  const seen = new Map();
  return (f) => {
    if (!seen.has(f)) seen.set(f, fileHash(f));
    return seen.get(f);
  };
}

/**
 * The cached bundle of the entry `file` while every file in it is unchanged, else undefined.
 * `hashOf` (path -> content hash or undefined) may be shared by calls that check many entries.
 */
export function cachedBundle(file, hashOf = fileHash) {
  try {
    const { inputs, code } = JSON.parse(readFileSync(bundleCacheFile(file), 'utf8'));
    if (Object.entries(inputs).every(([f, h]) => hashOf(f) === h)) return code;
  } catch {
    // not cached yet, or unreadable: build it
  }
  return undefined;
}

/**
 * esbuild's options for bundling `entryPoints`, each into the file beside it named
 * `<name>.bundle.mjs` (never written: there, the source map's relative paths resolve from the
 * entry's URL). `hashes` receives the content hash of every file read, by absolute path.
 */
function bundleOptions(entryPoints, hashes) {
  return {
    ...OPTIONS,
    entryPoints,
    bundle: true,
    write: false,
    outbase: '/',
    outdir: '/',
    entryNames: '[dir]/[name].bundle',
    outExtension: { '.js': '.mjs' },
    platform: 'node',
    packages: 'external',
    logLevel: 'silent',
    define: META,
    plugins: [{
      name: 'own-import-meta',
      setup(build) {
        build.onLoad({ filter: /\.[cm]?[jt]s$/ }, (args) => {
          const bytes = readFileSync(args.path);
          hashes[args.path] = sha256(bytes);
          return { contents: withOwnImportMeta(bytes.toString('utf8'), args.path), loader: /\.[cm]?ts$/.test(args.path) ? 'ts' : 'js' };
        });
        build.onLoad({ filter: /.*/ }, (args) => {
          hashes[args.path] = sha256(readFileSync(args.path));
          return undefined;
        });
      },
    }],
  };
}

/** The entry `file` bundled with the relative modules it imports; cached with every input's content hash. */
async function bundled(file) {
  const hit = cachedBundle(file);
  if (hit !== undefined) return hit;
  esbuild ??= requireFromTsx('esbuild');
  const inputs = {};
  const result = await esbuild.build(bundleOptions([file], inputs));
  const code = result.outputFiles[0].text;
  writeAtomic(bundleCacheFile(file), JSON.stringify({ inputs, code }));
  return code;
}

/**
 * Bundles each of the entry `files` that has no valid cached bundle, all in one esbuild run, and
 * caches each as bundled() would (the same options, so the same code); returns how many it
 * built. `npm test` runs it once before the runner starts its ~65 processes (test/test-files.mjs
 * --bundle): on a fresh clone each would otherwise start esbuild and parse lib/ for itself.
 * `hashOf` (memoHashes) may be shared with later checks of the same entries.
 */
export async function prebundle(files, hashOf = memoHashes()) {
  const todo = files.map((f) => resolvePath(f)).filter((f) => cachedBundle(f, hashOf) === undefined);
  if (todo.length === 0) return 0;
  esbuild ??= requireFromTsx('esbuild');
  const hashes = {};
  // the working directory a test process has (the runner's): esbuild names each module in a comment by its path from there
  const cwd = process.cwd();
  const result = await esbuild.build({ ...bundleOptions(todo, hashes), metafile: true, absWorkingDir: cwd });
  const byOutput = new Map(result.outputFiles.map((o) => [o.path, o.text]));
  let built = 0;
  for (const [out, meta] of Object.entries(result.metafile.outputs)) {
    if (!meta.entryPoint) continue;
    const file = resolvePath(cwd, meta.entryPoint);
    const code = byOutput.get(resolvePath(cwd, out));
    // every file the entry reaches through imports, as a build of that entry alone reads them
    const inputs = {};
    const stack = [meta.entryPoint];
    while (stack.length > 0) {
      const rel = stack.pop();
      const abs = resolvePath(cwd, rel);
      if (abs in inputs) continue;
      inputs[abs] = hashes[abs];
      for (const i of result.metafile.inputs[rel]?.imports ?? []) if (!i.external) stack.push(i.path);
    }
    // a file read outside the plugin (none today) would have no hash: leave that entry to its process
    if (code === undefined || Object.values(inputs).some((h) => h === undefined)) continue;
    writeAtomic(bundleCacheFile(file), JSON.stringify({ inputs, code }));
    built++;
  }
  return built;
}

export async function load(url, context, next) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return next(url, context);
  const file = fileURLToPath(url);
  const code = entries.has(url) ? await bundled(file) : transformed(file);
  return { format: 'module', source: code, shortCircuit: true };
}

const maps = new Map();
/**
 * Where line:column (1-based) of the bundle that the entry `file` ran as comes from, as
 * { file, line, column }; undefined when `file` was not bundled (or the position maps nowhere).
 * For the test reporter: node:test takes a test's location from the running code, unmapped, so
 * in a bundle it would name the entry's file with the bundle's line. The bundle is read again
 * whenever its cache file changed (a test process may rebuild it while the run goes on).
 */
export function originalLocation(file, line, column) {
  const cached = bundleCacheFile(file);
  const version = statSync(cached, { throwIfNoEntry: false })?.mtimeMs;
  if (version === undefined) return undefined;
  if (maps.get(file)?.version !== version) {
    let map = null;
    try {
      const { code } = JSON.parse(readFileSync(cached, 'utf8'));
      const inline = /\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/.exec(code);
      if (inline) map = new SourceMap(JSON.parse(Buffer.from(inline[1], 'base64').toString('utf8')));
    } catch {
      // unreadable: the location stays as it is
    }
    maps.set(file, { version, map });
  }
  const e = maps.get(file).map?.findEntry(line - 1, column - 1);
  if (!e?.originalSource) return undefined;
  const source = e.originalSource.startsWith('file:') ? fileURLToPath(e.originalSource) : resolvePath(dirname(file), e.originalSource);
  return { file: source, line: e.originalLine + 1, column: e.originalColumn + 1 };
}
