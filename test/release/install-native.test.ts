// The package's install step (scripts/install-native.cjs), run as npm runs it, on a copy of
// the package in a temp dir: it uses a prebuild that loads, compiles (here: a stand-in
// node-gyp) when the prebuild is missing, does not load, or a source build is asked for, and
// fails with one line naming the missing tools when it cannot compile. The real compile and
// the real tarball are .ci/pack-install.sh's job.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const work = mkdtempSync(join(tmpdir(), 'murphy-install-'));
after(() => rmSync(work, { recursive: true, force: true }));

// The CPU addon this checkout built (npm ci / node-gyp), standing in for a prebuild that loads.
const cpuAddon = join(repo, 'build', 'Release', 'murphy_native.node');

let n = 0;
/** A package copy with the given prebuild: 'loads', 'garbage' (does not load) or none. */
function pkg(prebuild: 'loads' | 'garbage' | null): string {
  const dir = join(work, `pkg${n++}`);
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  for (const f of ['install-native.cjs', 'quiet-install.mjs']) copyFileSync(join(repo, 'scripts', f), join(dir, 'scripts', f));
  writeFileSync(join(dir, 'package.json'), '{ "name": "murphy-native", "version": "0.0.0" }\n');
  symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'));
  if (prebuild) {
    mkdirSync(join(dir, 'prebuilds', 'linux-x64'), { recursive: true });
    const file = join(dir, 'prebuilds', 'linux-x64', 'murphy-native.napi.glibc.node');
    if (prebuild === 'loads') copyFileSync(cpuAddon, file);
    else writeFileSync(file, 'not an ELF file\n');
  }
  return dir;
}

/** A PATH folder holding node and, when asked, stand-ins for the build tools. */
function pathWith(tools: string[]): string {
  const dir = join(work, `bin${n++}`);
  mkdirSync(dir);
  symlinkSync(process.execPath, join(dir, 'node'));
  for (const t of tools) {
    writeFileSync(join(dir, t), '#!/bin/sh\nexit 0\n');
    chmodSync(join(dir, t), 0o755);
  }
  return dir;
}

/** A stand-in for npm's node-gyp: records its arguments and folder, exits with `code`. */
function fakeNodeGyp(code: number): { script: string; record: string } {
  const record = join(work, `gyp${n++}.json`);
  const script = join(work, `gyp${n++}.cjs`);
  writeFileSync(script, `require('fs').writeFileSync(${JSON.stringify(record)}, JSON.stringify({ args: process.argv.slice(2), cwd: process.cwd() })); process.exit(${code});\n`);
  return { script, record };
}

function install(dir: string, path: string, env: Record<string, string> = {}) {
  const base: Record<string, string> = {};
  for (const k of ['HOME', 'TMPDIR']) if (process.env[k]) base[k] = process.env[k]!;
  return spawnSync(process.execPath, [join(dir, 'scripts', 'install-native.cjs')], {
    cwd: dir, encoding: 'utf8', env: { ...base, PATH: path, ...env },
  });
}

const lines = (s: string) => s.split('\n').filter((l) => l.length > 0);
const tools = ['c++', 'make', 'python3'];

describe('install step (scripts/install-native.cjs)', { skip: existsSync(cpuAddon) ? false : `no CPU addon at ${cpuAddon} (npm run build:native)` }, () => {
  it('uses a prebuild that loads, and compiles nothing', () => {
    const gyp = fakeNodeGyp(0);
    const r = install(pkg('loads'), pathWith(tools), { npm_config_node_gyp: gyp.script });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(lines(r.stderr), ['murphy-native: using prebuilds/linux-x64/murphy-native.napi.glibc.node (CPU-only); nothing to compile']);
    assert.equal(existsSync(gyp.record), false);
  });

  it('a missing prebuild with build tools: says why, then runs node-gyp rebuild in the package', () => {
    const dir = pkg(null);
    const gyp = fakeNodeGyp(0);
    const r = install(dir, pathWith(tools), { npm_config_node_gyp: gyp.script });
    assert.equal(r.status, 0, r.stderr);
    assert.match(lines(r.stderr)[0]!, /^murphy-native: no prebuilt binary for \w+-\w+ \(prebuilds\/ is empty or absent\); compiling the CPU-only addon from source with node-gyp/);
    const rec = JSON.parse(readFileSync(gyp.record, 'utf8')) as { args: string[]; cwd: string };
    assert.deepEqual(rec.args, ['rebuild']);
    assert.equal(rec.cwd, dir);
  });

  it('a prebuild that does not load (mismatched) with build tools: names the load error, then compiles', () => {
    const gyp = fakeNodeGyp(0);
    const r = install(pkg('garbage'), pathWith(tools), { npm_config_node_gyp: gyp.script });
    assert.equal(r.status, 0, r.stderr);
    assert.match(lines(r.stderr)[0]!, /^murphy-native: the binary prebuilds\/linux-x64\/murphy-native\.napi\.glibc\.node does not load here \(.*(invalid ELF header|too short).*\); compiling the CPU-only addon/);
    assert.ok(existsSync(gyp.record));
  });

  it('without build tools: one line naming the problem and every missing tool', () => {
    for (const prebuild of [null, 'garbage'] as const) {
      const r = install(pkg(prebuild), pathWith([]));
      assert.equal(r.status, 1);
      const out = lines(r.stderr);
      assert.equal(out.length, 1, r.stderr);
      assert.match(out[0]!, /^murphy-native: cannot install: (no prebuilt binary|the binary .* does not load here).*, and this machine cannot compile one: missing a C\+\+17 compiler \(c\+\+, g\+\+, clang\+\+\), make, python3 \(node-gyp runs on it\)\. Install them/);
    }
  });

  it('names only the tools that are missing', () => {
    const r = install(pkg(null), pathWith(['g++', 'python3']));
    assert.equal(r.status, 1);
    assert.match(r.stderr, /cannot compile one: missing make\. Install/);
  });

  it('--build-from-source compiles even when the prebuild loads', () => {
    const gyp = fakeNodeGyp(0);
    const r = install(pkg('loads'), pathWith(tools), { npm_config_node_gyp: gyp.script, npm_config_build_from_source: 'true' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /^murphy-native: building from source as asked/);
    assert.ok(existsSync(gyp.record));
  });

  it('a failing source build ends with one line saying so', () => {
    const gyp = fakeNodeGyp(3);
    const r = install(pkg(null), pathWith(tools), { npm_config_node_gyp: gyp.script });
    assert.equal(r.status, 1);
    assert.match(lines(r.stderr).at(-1)!, /^murphy-native: the source build failed \(node-gyp exited with 3; its output is above\)$/);
  });
});
