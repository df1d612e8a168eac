// test/loader: the TypeScript loader `npm test` runs the test files with (instead of tsx).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { REPO } from '../exec/helpers.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-ts-loader-'));
const cache = mkdtempSync(join(tmpdir(), 'murphy-ts-loader-cache-'));
after(() => {
  rmSync(work, { recursive: true, force: true });
  rmSync(cache, { recursive: true, force: true });
});

/** Runs `main.ts` in `work` under the loader, its compile cache under `cache` (TMPDIR). */
function run(): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, ['--import', join(REPO, 'test', 'loader', 'register.mjs'), join(work, 'main.ts')], { cwd: REPO, encoding: 'utf8', env: { ...process.env, TMPDIR: cache } });
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
    const before = readdirSync(join(cache, dir));
    assert.equal(run().stdout, '1\n');
    assert.deepEqual(readdirSync(join(cache, dir)), before, 'an unchanged file compiled again');
    writeFileSync(join(work, 'main.ts'), 'const x: number = 2;\nconsole.log(x);\n');
    assert.equal(run().stdout, '2\n', 'a stale compiled file was used');
    assert.equal(readdirSync(join(cache, dir)).length, before.length + 1);
  });
  it('a syntax error names the file and line', () => {
    writeFileSync(join(work, 'main.ts'), 'const x: number = ;\n');
    const r = run();
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /main\.ts:1:\d+: ERROR/);
  });
});
