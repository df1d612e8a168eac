#!/usr/bin/env node
// `npm run test:costs`: what each of `npm test`'s processes costs, measured one at a time.
//
// `npm test` keeps both cores of the 2-core VM busy (docs/testing.md, "Process starts"), so its
// wall time is about its CPU time over the cores, and a test file's share of it is the CPU it
// uses. This runs each test process of `npm test` alone, the way the runner starts it (its
// runnable bundle, npm test's environment), and prints per file: the wall time, the CPU time of
// the whole machine over the run (/proc/stat: the sandboxed Python programs that the executor's
// tests run in other process trees count too; so run it on an otherwise idle machine), and that
// CPU's share of the sum. Slowest first, then the sum, which is roughly what one `npm test`
// costs with warm caches (the runner itself and its reporter are not in it).
//   --json FILE   also write the rows ({ file, wallMs, cpuMs, exit }) and the machine to FILE
//   FILES...      only these test files (test/x/y.test.ts or a group), in this order
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { entryOf } from '../test/loader/runnable.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const jsonAt = args.indexOf('--json');
const jsonFile = jsonAt >= 0 ? args[jsonAt + 1] : undefined;
if (jsonAt >= 0 && !jsonFile) {
  console.error('test-costs: --json needs a file name (--json costs.json)');
  process.exit(2);
}
const only = args.filter((_, i) => jsonAt < 0 || (i !== jsonAt && i !== jsonAt + 1));

if (!existsSync('/proc/stat')) {
  console.error('test-costs: needs Linux\'s /proc/stat (the whole machine\'s CPU time); run it on Linux');
  process.exit(2);
}
const HZ = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100; // /proc/stat's unit
/** Busy CPU time of the whole machine so far, in ms (user + nice + system + irq + softirq). */
function busyMs() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return ((f[0] + f[1] + f[2] + f[5] + f[6]) * 1000) / HZ;
}

// npm test's environment (package.json's test script)
const env = { ...process.env, NODE_EXTRA_CA_CERTS: '', MURPHY_TEST_SOURCE_MAPS: 'reporter' };
delete env.NODE_TEST_CONTEXT;
// npm test's PATH too: python3 without its pyenv shim (test/python-path.mjs)
const pathed = spawnSync(process.execPath, ['test/python-path.mjs'], { cwd: ROOT, env, encoding: 'utf8' });
if (pathed.status === 0 && pathed.stdout) env.PATH = pathed.stdout;
const listed = spawnSync(process.execPath, ['test/test-files.mjs', '--bundle'], { cwd: ROOT, env, encoding: 'utf8' });
if (listed.status !== 0) {
  console.error(`test-costs: test/test-files.mjs --bundle failed:\n${listed.stderr}`);
  process.exit(1);
}
const bundles = listed.stdout.trim().split('\n');
// a bundle's test file: node_modules/.cache/murphy-test/test/x.test.mjs -> test/x.test.ts
const sourceOf = (b) => relative(ROOT, entryOf(join(ROOT, b)));
const unknown = only.filter((f) => !bundles.some((b) => sourceOf(b) === f));
if (unknown.length) {
  console.error(`test-costs: not among npm test's files: ${unknown.join(', ')} (a grouped file runs in its group: test/groups/)`);
  process.exit(2);
}
const run = only.length ? only.map((f) => bundles.find((b) => sourceOf(b) === f)) : bundles;

const rows = [];
for (const [i, b] of run.entries()) {
  const file = sourceOf(b);
  if (process.stderr.isTTY) process.stderr.write(`[${i + 1}/${run.length}] ${file}\r`);
  const c0 = busyMs(), t0 = performance.now();
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=dot', b], { cwd: ROOT, env, stdio: 'ignore' });
  rows.push({ file, wallMs: Math.round(performance.now() - t0), cpuMs: Math.round(busyMs() - c0), exit: r.status });
  if (process.stderr.isTTY) process.stderr.write(' '.repeat(80) + '\r');
}
const sum = rows.reduce((s, r) => s + r.cpuMs, 0);
const wall = rows.reduce((s, r) => s + r.wallMs, 0);
console.log('   CPU s  share   wall s  file');
for (const r of [...rows].sort((a, b) => b.cpuMs - a.cpuMs)) {
  const failed = r.exit === 0 ? '' : `  (exit ${r.exit}: failed)`;
  console.log(`${(r.cpuMs / 1000).toFixed(2).padStart(8)} ${((100 * r.cpuMs) / sum).toFixed(1).padStart(5)}% ${(r.wallMs / 1000).toFixed(2).padStart(8)}  ${r.file}${failed}`);
}
console.log(`${(sum / 1000).toFixed(1).padStart(8)}        ${(wall / 1000).toFixed(1).padStart(8)}  the ${rows.length} files, one at a time (${cpus().length} cores: npm test's wall time is about the CPU over the cores)`);
if (jsonFile) {
  const tmp = `${jsonFile}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify({ date: new Date().toISOString(), cpu: cpus()[0]?.model, cores: cpus().length, rows }, null, 2) + '\n');
  renameSync(tmp, jsonFile);
}
if (rows.some((r) => r.exit !== 0)) process.exitCode = 1;
