#!/usr/bin/env node
// npm's `install` step for murphy-native: use the native addon that is already here (the
// prebuilt binary in prebuilds/, or a local build in build/) when it loads on this machine;
// otherwise compile the CPU-only addon from source with node-gyp, saying why; and when this
// machine cannot compile either, fail with one line that names what is missing.
//
//   npm install murphy-native                      prebuild if it loads, else compile
//   npm install murphy-native --build-from-source  always compile (npm_config_build_from_source)
//   MURPHY_BUILD_FROM_SOURCE=1 npm install ...     the same
//
// npm hides an install script's output unless it fails; `--foreground-scripts` shows it.
// Tests: .ci/pack-install.sh (installs the packed tarball with and without build tools) and
// test/release/install-native.test.ts (the decisions, without compiling).
'use strict';

const { spawnSync } = require('node:child_process');
const { existsSync, readdirSync, statSync } = require('node:fs');
const { delimiter, join, resolve } = require('node:path');

const root = resolve(__dirname, '..');
const say = (line) => process.stderr.write(`murphy-native: ${line}\n`);

/** True when `name` is an executable file in one of PATH's folders (or `name` is a path to one). */
function onPath(name, env) {
  if (name.includes('/')) return isExecutable(name);
  return (env.PATH || '').split(delimiter).filter(Boolean).some((d) => isExecutable(join(d, name)));
}
function isExecutable(p) {
  try {
    return statSync(p).isFile() && (statSync(p).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** The build tools node-gyp needs that this machine lacks (empty when it can compile). */
function missingBuildTools(env) {
  const missing = [];
  const cxx = env.CXX ? [env.CXX.split(' ')[0]] : ['c++', 'g++', 'clang++'];
  if (!cxx.some((c) => onPath(c, env))) missing.push(`a C++17 compiler (${cxx.join(', ')})`);
  if (!onPath('make', env)) missing.push('make');
  // node-gyp runs gyp, a Python 3 program.
  const py = env.PYTHON || env.npm_config_python;
  if (!(py ? onPath(py, env) : onPath('python3', env) || onPath('python', env))) missing.push('python3 (node-gyp runs on it)');
  return missing;
}

function list(dir) {
  try {
    return readdirSync(dir);
  } catch {
    return []; // no prebuilds/ folder: a git clone
  }
}

/** The addon node-gyp-build would load here, and whether it loads; `problem` says why not. */
function existingBinary(env) {
  let path;
  try {
    path = require('node-gyp-build').path(root);
  } catch {
    const shipped = [];
    for (const d of list(join(root, 'prebuilds'))) for (const f of list(join(root, 'prebuilds', d))) shipped.push(`${d}/${f}`);
    const has = shipped.length > 0 ? `prebuilds/ has ${shipped.join(', ')}` : 'prebuilds/ is empty or absent';
    // node-gyp-build's own test for musl (a .glibc. prebuild does not match there).
    const libc = env.LIBC || (process.platform === 'linux' && existsSync('/etc/alpine-release') ? 'musl' : 'glibc');
    return { problem: `no prebuilt binary for ${process.platform}-${process.arch}${libc === 'musl' ? ' with musl' : ''} (${has})` };
  }
  // Load it in a child process: a binary for the wrong machine may crash rather than throw.
  const r = spawnSync(process.execPath, ['-e', `process.stdout.write(JSON.stringify(require(${JSON.stringify(path)}).buildInfo()))`], {
    encoding: 'utf8',
    env,
  });
  const rel = path.startsWith(root) ? path.slice(root.length + 1) : path;
  if (r.status === 0) {
    let info = {};
    try {
      info = JSON.parse(r.stdout);
    } catch {
      /* an old binary without buildInfo still loaded */
    }
    return { path, rel, cuda: info.cuda === true };
  }
  const lines = (r.stderr || '').split('\n').map((l) => l.trim());
  const why = lines.find((l) => /^\w*Error:/.test(l)) || lines.find((l) => /not found|invalid|cannot/i.test(l)) ||
    `loading it exited with ${r.status ?? r.signal}`;
  return { problem: `the binary ${rel} does not load here (${why.replace(/^Error:\s*/, '').replace(`${path}: `, '')})` };
}

/** How to run node-gyp: npm's bundled copy (npm sets npm_config_node_gyp), else one on PATH. */
function nodeGypCommand(env) {
  if (env.npm_config_node_gyp && existsSync(env.npm_config_node_gyp)) return [process.execPath, env.npm_config_node_gyp];
  try {
    return [process.execPath, require.resolve('node-gyp/bin/node-gyp.js')];
  } catch {
    return onPath('node-gyp', env) ? ['node-gyp'] : null;
  }
}

async function main(env) {
  const forced = env.npm_config_build_from_source === 'true' || env.MURPHY_BUILD_FROM_SOURCE === '1';
  let why = 'building from source as asked (--build-from-source or MURPHY_BUILD_FROM_SOURCE=1)';
  if (!forced) {
    const found = existingBinary(env);
    if (found.path) {
      say(`using ${found.rel} (${found.cuda ? 'CUDA-enabled' : 'CPU-only'}); nothing to compile`);
      return 0;
    }
    why = found.problem;
  }
  const missing = missingBuildTools(env);
  if (missing.length > 0) {
    say(
      `cannot install: ${why}, and this machine cannot compile one: missing ${missing.join(', ')}. ` +
        'Install them (Debian/Ubuntu: apt-get install build-essential python3) and run `npm rebuild murphy-native`.',
    );
    return 1;
  }
  const gyp = nodeGypCommand(env);
  if (!gyp) {
    say(`cannot install: ${why}, and node-gyp was not found; run the install through npm (npm rebuild murphy-native)`);
    return 1;
  }
  say(`${why}; compiling the CPU-only addon from source with node-gyp (a minute or two)`);
  // node-gyp's output is shown only if it fails (MURPHY_VERBOSE_BUILD=1 streams it).
  const { runQuietly } = await import('./quiet-install.mjs');
  const verbose = env.MURPHY_VERBOSE_BUILD === '1' || ['verbose', 'silly'].includes(env.npm_config_loglevel || '');
  const r = await runQuietly(gyp[0], [...gyp.slice(1), 'rebuild'], { verbose, cwd: root, env });
  if (r.code !== 0) {
    say(`the source build failed (node-gyp exited with ${r.code}; its output is above)`);
    return 1;
  }
  say('compiled build/Release/murphy_native.node (CPU-only)');
  return 0;
}

if (require.main === module) main(process.env).then((code) => { process.exitCode = code; });

module.exports = { missingBuildTools, existingBinary, main };
