// test/helpers/compile-cache.ts: a C helper is compiled once per distinct input, and again when
// its source, a header in an -I folder or a flag changes; the caches are pruned by age.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { compileCached, compileKey } from '../helpers/compile-cache.js';
import { CC_CACHE, pruneCache } from '../loader/cache-dirs.mjs';

const haveCc = spawnSync('cc', ['--version'], { stdio: 'ignore' }).status === 0;
const work = mkdtempSync(join(tmpdir(), 'murphy-cc-cache-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('compiled test helpers are cached by content', { skip: haveCc ? false : 'no C compiler (cc)' }, () => {
  it('the same build is one key; a changed source, header or flag is another; the result runs', () => {
    const inc = join(work, 'inc');
    mkdirSync(inc);
    const src = join(work, 'main.c');
    writeFileSync(join(inc, 'value.h'), `#define VALUE ${process.pid % 100}\n`);
    writeFileSync(src, '#include <stdio.h>\n#include "value.h"\nint main(void) { printf("%d\\n", VALUE + OFFSET); return 0; }\n');
    const o = { compiler: 'cc', flags: [`-I${inc}`, '-DOFFSET=1'], sources: [src] };
    const k = compileKey(o);
    assert.equal(compileKey(o), k);
    const exe = compileCached({ ...o, out: join(work, 'a', 'prog') });
    assert.ok(statSync(exe).mode & 0o100, 'the copy is executable');
    assert.equal(spawnSync(exe, { encoding: 'utf8' }).stdout, `${(process.pid % 100) + 1}\n`);
    assert.notEqual(compileKey({ ...o, flags: [`-I${inc}`, '-DOFFSET=2'] }), k);
    // 100-199: never the first header's value (0-99; the same text would be the same key)
    writeFileSync(join(inc, 'value.h'), `#define VALUE ${(process.pid % 100) + 100}\n`);
    const k2 = compileKey(o);
    assert.notEqual(k2, k, 'a header in an -I folder is part of the key');
    assert.equal(spawnSync(compileCached({ ...o, out: join(work, 'b', 'prog') }), { encoding: 'utf8' }).stdout, `${(process.pid % 100) + 101}\n`, 'a stale build was used');
    writeFileSync(src, '#include <stdio.h>\nint main(void) { puts("changed"); return 0; }\n');
    assert.notEqual(compileKey(o), k2);
    assert.equal(spawnSync(compileCached({ ...o, out: join(work, 'c', 'prog') }), { encoding: 'utf8' }).stdout, 'changed\n');
    assert.deepEqual(readdirSync(join(work, 'c')), ['prog']);
  });
  it('oneUnit: the sources are one translation unit (what one defines, the next sees), with their own key; errors name the source', () => {
    const lib = join(work, 'unit-lib.c'), main = join(work, 'unit-main.c');
    writeFileSync(lib, `#include <stdio.h>\n#define FROM_LIB ${process.pid % 1000}\n`);
    writeFileSync(main, 'int main(void) { printf("%d\\n", FROM_LIB + 1); return 0; }\n');
    const o = { compiler: 'cc', flags: [], sources: [lib, main] };
    assert.throws(() => compileCached({ ...o, out: join(work, 'u0', 'prog') }), /FROM_LIB/, 'apart, main does not see the macro');
    assert.notEqual(compileKey({ ...o, oneUnit: true }), compileKey(o));
    assert.equal(spawnSync(compileCached({ ...o, oneUnit: true, out: join(work, 'u1', 'prog') }), { encoding: 'utf8' }).stdout, `${(process.pid % 1000) + 1}\n`);
    assert.deepEqual(readdirSync(join(CC_CACHE, compileKey({ ...o, oneUnit: true }))), ['prog'], 'the generated unit is removed');
    writeFileSync(main, 'int main(void) { return undeclared_in_unit; }\n');
    assert.throws(() => compileCached({ ...o, oneUnit: true, out: join(work, 'u2', 'prog') }), /unit-main\.c:1:[\s\S]*undeclared_in_unit/);
  });
  it('a compile error throws with the compiler\'s message and caches nothing', () => {
    const src = join(work, 'bad.c');
    writeFileSync(src, 'int main(void) { return undeclared_name; }\n');
    const o = { compiler: 'cc', flags: [], sources: [src], out: join(work, 'bad') };
    assert.throws(() => compileCached(o), /undeclared_name/);
    assert.throws(() => compileCached(o), /undeclared_name/);
  });
});

describe('the test caches are pruned (test/loader/cache-dirs.mjs)', () => {
  it('entries not written for maxAgeDays go, newer ones stay, at most once per everyDays', () => {
    const dir = join(work, 'prune');
    mkdirSync(join(dir, 'old-key'), { recursive: true });
    writeFileSync(join(dir, 'old-key', 'prog'), 'x');
    writeFileSync(join(dir, 'old.mjs'), 'x');
    writeFileSync(join(dir, 'new.mjs'), 'x');
    const day = 24 * 3600 * 1000, now = Date.now();
    const at = (p: string, ms: number) => utimesSync(join(dir, p), ms / 1000, ms / 1000);
    at('old-key', now - 8 * day);
    at('old.mjs', now - 7.5 * day);
    at('new.mjs', now - 6 * day);
    assert.equal(pruneCache(dir, { maxAgeDays: 7, now }), 2);
    assert.deepEqual(readdirSync(dir).sort(), ['.pruned', 'new.mjs']);
    at('new.mjs', now - 30 * day);
    assert.equal(pruneCache(dir, { maxAgeDays: 7, now: now + 0.5 * day }), 0, 'pruned again within a day');
    assert.equal(pruneCache(dir, { maxAgeDays: 7, now: now + 1.5 * day }), 1);
    assert.deepEqual(readdirSync(dir), ['.pruned']);
    assert.equal(pruneCache(join(work, 'no-such-cache')), 0);
  });
  it('a cached helper pruned away is built again', { skip: haveCc ? false : 'no C compiler (cc)' }, () => {
    const src = join(work, 'pruned.c');
    writeFileSync(src, `#include <stdio.h>\nint main(void) { puts("${process.pid}"); return 0; }\n`);
    const o = { compiler: 'cc', flags: [], sources: [src] };
    compileCached({ ...o, out: join(work, 'p1', 'prog') });
    rmSync(join(CC_CACHE, compileKey(o)), { recursive: true, force: true });
    assert.equal(spawnSync(compileCached({ ...o, out: join(work, 'p2', 'prog') }), { encoding: 'utf8' }).stdout, `${process.pid}\n`);
  });
});
