// test/loader: the TypeScript loader `npm test` runs the test files with (instead of tsx).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import { REPO } from '../exec/helpers.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-ts-loader-'));
const cache = mkdtempSync(join(tmpdir(), 'murphy-ts-loader-cache-'));
after(() => {
  rmSync(work, { recursive: true, force: true });
  rmSync(cache, { recursive: true, force: true });
});

/** Runs `entry` (main.ts) in `work` under the loader, its compile cache under `cache` (TMPDIR). */
// Node's own source maps (the loader's default; npm test turns them off: MURPHY_TEST_SOURCE_MAPS=reporter)
function run(entry = 'main.ts', sourceMaps = 'node'): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, ['--import', join(REPO, 'test', 'loader', 'register.mjs'), join(work, entry)], { cwd: REPO, encoding: 'utf8', env: { ...process.env, TMPDIR: cache, MURPHY_TEST_SOURCE_MAPS: sourceMaps } });
}

describe('test/loader (TypeScript for npm test)', () => {
  it('./x.js is x.ts; types are stripped; class fields, names and enums as tsc builds them; stack traces point into the .ts', () => {
    writeFileSync(join(work, 'dep.ts'), 'export enum Kind { A = 1, B }\nexport interface Shape { n: number }\nexport class Base {\n  static sets = 0;\n  get v(): number { return -1; }\n  set v(_: number) { Base.sets++; }\n}\n');
    writeFileSync(join(work, 'main.ts'), [
      "import { Base, Kind, type Shape } from './dep.js';",
      'class Child extends Base {',
      '  // @ts-expect-error a field over an accessor: define semantics (tsc, target ES2022) make it an own property',
      '  v: number = 7;',
      '}',
      'const s: Shape = { n: Kind.B };',
      'const named = () => 0;',
      'const line = new Error().stack!.split("\\n")[1];',
      'console.log(JSON.stringify({ n: s.n, v: new Child().v, sets: Base.sets, name: named.name, cls: Child.name, line }));',
    ].join('\n'));
    const r = run();
    assert.equal(r.status, 0, r.stderr);
    const o = JSON.parse(r.stdout) as { n: number; v: number; sets: number; name: string; cls: string; line: string };
    assert.equal(o.n, 2);
    assert.deepEqual([o.v, o.sets], [7, 0], 'class fields with assign semantics (a setter ran)');
    assert.equal(o.name, 'named');
    assert.equal(o.cls, 'Child');
    assert.match(o.line, /main\.ts:8:\d+\)?$/);
  });
  it('keeps each compiled file, and compiles again when the source changes', () => {
    writeFileSync(join(work, 'main.ts'), 'const x: number = 1;\nconsole.log(x);\n');
    assert.equal(run().stdout, '1\n');
    const [dir] = readdirSync(cache).filter((d) => d.startsWith('murphy-test-ts-'));
    assert.ok(dir, 'no cache directory');
    // each cached file and when it was written (an entry's bundle is rewritten in place)
    const listing = () => Object.fromEntries(readdirSync(join(cache, dir!)).map((f) => [f, statSync(join(cache, dir!, f)).mtimeMs]));
    const before = listing();
    assert.equal(run().stdout, '1\n');
    assert.deepEqual(listing(), before, 'an unchanged file compiled again');
    writeFileSync(join(work, 'main.ts'), 'const x: number = 2;\nconsole.log(x);\n');
    assert.equal(run().stdout, '2\n', 'a stale compiled file was used');
    assert.notDeepEqual(listing(), before, 'the changed file was not compiled again');
  });
  it('a syntax error names the file and line', () => {
    writeFileSync(join(work, 'main.ts'), 'const x: number = ;\n');
    const r = run();
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /main\.ts:1:\d+: ERROR/);
  });
  it('a *.test.ts file is bundled with its relative imports: each module keeps its import.meta, one instance each, stack traces into each .ts; a changed import rebuilds it', () => {
    mkdirSync(join(work, 'sub'), { recursive: true });
    const dep = (n: number) => [
      'export const meta = { url: import.meta.url, dirname: import.meta.dirname, filename: import.meta.filename };',
      `export const n: number = ${n};`,
      'export const state = { calls: 0 };',
      'export function where(): string { return new Error().stack!.split("\\n")[1]!; }',
    ].join('\n');
    writeFileSync(join(work, 'sub', 'dep.ts'), dep(1));
    writeFileSync(join(work, 'b.test.ts'), [
      "import { meta, n, state, where } from './sub/dep.js';",
      'state.calls++;',
      "const again = await import('./sub/dep.js');",
      'console.log(JSON.stringify({ meta, n, same: again.state.calls, own: import.meta.filename, where: where() }));',
    ].join('\n'));
    const r = run('b.test.ts');
    assert.equal(r.status, 0, r.stderr);
    const depFile = join(work, 'sub', 'dep.ts');
    const o = JSON.parse(r.stdout) as { meta: Record<string, string>; n: number; same: number; own: string; where: string };
    assert.deepEqual(o.meta, { url: pathToFileURL(depFile).href, dirname: join(work, 'sub'), filename: depFile });
    assert.equal(o.own, join(work, 'b.test.ts'));
    assert.equal(o.same, 1, 'the dynamic import() made a second instance of the module');
    assert.ok(o.where.includes(`${depFile}:4:`), o.where);
    writeFileSync(depFile, dep(2));
    assert.equal((JSON.parse(run('b.test.ts').stdout) as { n: number }).n, 2, 'a stale bundle was used after its import changed');
    writeFileSync(depFile, 'export const n: number = ;\n');
    const bad = run('b.test.ts');
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /sub\/dep\.ts:1:\d+: ERROR/);
  });
  it('an entry with a #! line (lib/cli.ts) runs, its lines numbered as in the file', () => {
    writeFileSync(join(work, 'tool.ts'), '#!/usr/bin/env node\nconst f: string = import.meta.filename;\nconsole.log(f, new Error().stack!.split("\\n")[1]);\n');
    const r = run('tool.ts');
    assert.equal(r.status, 0, r.stderr);
    assert.ok(r.stdout.startsWith(`${join(work, 'tool.ts')} `), r.stdout);
    assert.match(r.stdout, /tool\.ts:3:\d+\)?\n$/);
  });
  it('MURPHY_TEST_SOURCE_MAPS=reporter leaves stack traces in the bundle (the reporter maps failures); a bad value is refused', () => {
    writeFileSync(join(work, 'dep.ts'), 'export const where = (): string => new Error().stack!.split("\\n")[1];\n');
    writeFileSync(join(work, 'main.ts'), "import { where } from './dep.js';\nconsole.log(where());\n");
    assert.match(run('main.ts', 'node').stdout, /dep\.ts:1:\d+\)?\n$/);
    // the bundle puts dep.ts first, under main.ts's URL: the frame names main.ts, with the bundle's line
    const off = run('main.ts', 'reporter');
    assert.equal(off.status, 0, off.stderr);
    assert.match(off.stdout, new RegExp(`\\(${pathToFileURL(join(work, 'main.ts')).href.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+\\)\\n$`), off.stdout);
    const bad = run('main.ts', 'on');
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /MURPHY_TEST_SOURCE_MAPS must be "node" .* or "reporter" .*; got "on"/);
  });
  it('prebundle (npm test, test-files.mjs --bundle) caches each entry in one esbuild run as its own process would, and only what changed', () => {
    const pre = join(work, 'pre');
    mkdirSync(pre, { recursive: true });
    writeFileSync(join(pre, 'shared.ts'), 'export const k: number = 3;\n');
    writeFileSync(join(pre, 'one.test.ts'), "import { k } from './shared.js';\nconsole.log('one', k, import.meta.filename);\n");
    writeFileSync(join(pre, 'two.test.ts'), "import { k } from './shared.js';\nconsole.log('two', k * 2);\n");
    const entries = ['one.test.ts', 'two.test.ts'].map((f) => join(pre, f));
    const prebundle = (tmp: string) => {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', `const { prebundle } = await import(${JSON.stringify(pathToFileURL(join(REPO, 'test', 'loader', 'hooks.mjs')).href)}); console.log(await prebundle(${JSON.stringify(entries)}));`], { cwd: REPO, encoding: 'utf8', env: { ...process.env, TMPDIR: tmp } });
      assert.equal(r.status, 0, r.stderr);
      return Number(r.stdout.trim());
    };
    const runIn = (tmp: string, entry: string) => spawnSync(process.execPath, ['--import', join(REPO, 'test', 'loader', 'register.mjs'), entry], { cwd: REPO, encoding: 'utf8', env: { ...process.env, TMPDIR: tmp } });
    const bundles = (tmp: string) => {
      const dir = join(tmp, readdirSync(tmp).find((d) => d.startsWith('murphy-test-ts-'))!);
      return Object.fromEntries(readdirSync(dir).filter((n) => n.endsWith('.json')).map((n) => [n, readFileSync(join(dir, n), 'utf8')]));
    };
    const a = mkdtempSync(join(cache, 'pre-'));
    const b = mkdtempSync(join(cache, 'own-'));
    assert.equal(prebundle(a), 2);
    const before = bundles(a);
    assert.equal(Object.keys(before).length, 2);
    // each process finds its bundle and builds nothing: the cache is as prebundle left it
    assert.equal(runIn(a, entries[0]!).stdout, `one 3 ${entries[0]}\n`);
    assert.equal(runIn(a, entries[1]!).stdout, 'two 6\n');
    assert.deepEqual(bundles(a), before);
    // the same bytes as the processes build for themselves
    for (const e of entries) assert.equal(runIn(b, e).status, 0);
    assert.deepEqual(bundles(b), before);
    assert.equal(prebundle(a), 0, 'nothing changed: nothing built');
    writeFileSync(join(pre, 'shared.ts'), 'export const k: number = 4;\n');
    assert.equal(prebundle(a), 2, 'a shared import changed: both entries built again');
    assert.equal(runIn(a, entries[1]!).stdout, 'two 8\n');
  });
  it('writeRunnable (npm test, test-files.mjs --bundle) writes each entry\'s bundle to run without the loader; only a changed one is written again; an orphan is removed', () => {
    const dir = join(work, 'runnable');
    mkdirSync(join(dir, 'sub'), { recursive: true });
    writeFileSync(join(dir, 'sub', 'dep.ts'), 'export const k: number = 5;\nexport const where = { file: import.meta.filename, url: import.meta.url };\n');
    writeFileSync(join(dir, 'a.test.ts'), "import { k, where } from './sub/dep.js';\nconst own: string = import.meta.filename;\nconsole.log(JSON.stringify({ k, where, own, argv: process.argv[1], loader: process.execArgv }));\n");
    writeFileSync(join(dir, 'broken.test.ts'), 'export const n: number = ;\n');
    const entries = ['a.test.ts', 'broken.test.ts'].map((f) => join(dir, f));
    const tmp = mkdtempSync(join(cache, 'runnable-'));
    const out = join(dir, 'cache'); // as node_modules/.cache/murphy-test is for the repository
    const runnable = pathToFileURL(join(REPO, 'test', 'loader', 'runnable.mjs')).href;
    const write = (): string[] => {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', `const { writeRunnable } = await import(${JSON.stringify(runnable)}); console.log(JSON.stringify(await writeRunnable(${JSON.stringify(entries)}, ${JSON.stringify(out)}, ${JSON.stringify(dir)})));`], { cwd: REPO, encoding: 'utf8', env: { ...process.env, TMPDIR: tmp } });
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout) as string[];
    };
    const plain = (file: string) => spawnSync(process.execPath, [file], { cwd: REPO, encoding: 'utf8', env: { ...process.env, TMPDIR: tmp } });
    const paths = write();
    assert.deepEqual(paths, [join(out, 'a.test.mjs'), join(out, 'broken.test.mjs')]);
    const r = plain(paths[0]!);
    assert.equal(r.status, 0, r.stderr);
    const o = JSON.parse(r.stdout) as { k: number; where: { file: string; url: string }; own: string; argv: string; loader: string[] };
    assert.equal(o.k, 5);
    assert.deepEqual(o.where, { file: join(dir, 'sub', 'dep.ts'), url: pathToFileURL(join(dir, 'sub', 'dep.ts')).href }, 'a bundled module keeps its own import.meta');
    assert.equal(o.own, join(dir, 'a.test.ts'));
    assert.deepEqual([o.argv, o.loader], [paths[0], []], 'not run under the loader');
    const written = statSync(paths[0]!).mtimeMs;
    write();
    assert.equal(statSync(paths[0]!).mtimeMs, written, 'unchanged, yet written again');
    writeFileSync(join(dir, 'sub', 'dep.ts'), 'export const k: number = 6;\nexport const where = {};\n');
    write();
    assert.equal((JSON.parse(plain(paths[0]!).stdout) as { k: number }).k, 6, 'a stale bundle after its import changed');
    // the entry esbuild refuses runs through the loader, which fails naming the error
    const bad = plain(paths[1]!);
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /broken\.test\.ts:1:\d+: ERROR/);
    // a bundle whose test file is gone is removed (and nothing else)
    rmSync(join(dir, 'broken.test.ts'));
    writeFileSync(join(out, 'note.txt'), 'not a bundle\n');
    const removed = spawnSync(process.execPath, ['--input-type=module', '-e', `const { removeOrphans } = await import(${JSON.stringify(runnable)}); console.log(JSON.stringify(removeOrphans(${JSON.stringify(out)}, ${JSON.stringify(dir)})));`], { cwd: REPO, encoding: 'utf8' });
    assert.equal(removed.status, 0, removed.stderr);
    assert.deepEqual(JSON.parse(removed.stdout), [paths[1]]);
    assert.deepEqual(readdirSync(out).sort(), ['a.test.mjs', 'note.txt']);
  });
});
