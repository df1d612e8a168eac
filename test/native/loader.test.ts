// Loading the binary: lazily (importing the library loads nothing), in a documented order
// (useNativeBinary > MURPHY_NATIVE_BINARY > build-cuda/ > build/ > prebuilds/), with the
// reason for the choice.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { binaryInfo } from '../../lib/native.js';
import { chooseBinary, warnChoice } from '../../lib/native/loader.js';
import { TS_LOADER } from '../helpers/cli.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-loader-'));
after(() => rmSync(work, { recursive: true, force: true }));
const libIndex = fileURLToPath(new URL('../../lib/index.ts', import.meta.url));
const libNative = fileURLToPath(new URL('../../lib/native.ts', import.meta.url));

function node(code: string, env: Record<string, string | undefined> = {}) {
  return spawnSync(process.execPath, [...TS_LOADER, '--input-type=module', '-e', code], { encoding: 'utf8', env: { ...process.env, ...env } });
}

function fakeBuild(root: string, rel: string, mtime: number): string {
  const p = join(root, rel, 'Release', 'murphy_native.node');
  mkdirSync(join(root, rel, 'Release'), { recursive: true });
  writeFileSync(p, '');
  utimesSync(p, mtime, mtime);
  return p;
}

describe('loading the native binary', () => {
  it('importing the library loads nothing; the first native call does, and a bad override fails there with ENOLIB', () => {
    const r = node(
      `const lib = await import(${JSON.stringify(libIndex)});
       console.log('imported');
       try { lib.cpuInfo(); } catch (e) { console.log(e.name, e.code, e.message); }`,
      { MURPHY_NATIVE_BINARY: join(work, 'missing.node') },
    );
    assert.equal(r.status, 0, r.stderr);
    const [first, second] = r.stdout.trim().split('\n');
    assert.equal(first, 'imported');
    assert.match(second!, /^MurphyNativeError ENOLIB MURPHY_NATIVE_BINARY is set to .*missing\.node, but .* does not exist; unset MURPHY_NATIVE_BINARY or fix the path/);
  });

  it('useNativeBinary() comes first and binaryInfo() says why', () => {
    const path = binaryInfo().path;
    const r = node(
      `const n = await import(${JSON.stringify(libNative)});
       n.useNativeBinary(${JSON.stringify(path)});
       const b = n.binaryInfo();
       console.log(JSON.stringify({ source: b.source, path: b.path, reason: b.reason }));`,
      { MURPHY_NATIVE_BINARY: join(work, 'ignored.node') },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { source: 'option', path, reason: 'chosen with useNativeBinary()' });
  });

  it('the order: MURPHY_NATIVE_BINARY, then a local CUDA build, then a local CPU build; a newer passed-over build is noted', () => {
    const root = join(work, 'pkg');
    const cpu = fakeBuild(root, 'build', 1_000_000);
    let c = chooseBinary(root, {}, undefined);
    assert.equal(c.source, 'local-build');
    assert.equal(c.path, cpu);
    assert.deepEqual(c.notes, []);
    const gpu = fakeBuild(root, 'build-cuda', 900_000);
    c = chooseBinary(root, {}, undefined);
    assert.equal(c.source, 'cuda-build');
    assert.equal(c.path, gpu);
    assert.match(c.reason, /local CUDA build/);
    assert.equal(c.notes.length, 1);
    assert.match(c.notes[0]!, /build\/Release\/murphy_native\.node is newer than build-cuda\/Release\/murphy_native\.node/);
    // loading such a choice says so on stderr, one line a note
    const said: string[] = [];
    warnChoice(c, (s) => said.push(s));
    assert.deepEqual(said, [`murphy-native: ${c.notes[0]}\n`]);
    warnChoice(chooseBinary(root, { MURPHY_NATIVE_BINARY: cpu }, undefined), (s) => said.push(s));
    assert.equal(said.length, 1, 'nothing to say without notes');
    const env = chooseBinary(root, { MURPHY_NATIVE_BINARY: cpu }, undefined);
    assert.equal(env.source, 'env');
    assert.equal(chooseBinary(root, { MURPHY_NATIVE_BINARY: cpu }, gpu).source, 'option');
  });
});
