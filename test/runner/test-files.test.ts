// test/test-files.mjs: the files `npm test` runs, the slowest first, each once, none from test/gpu/.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from '../exec/helpers.js';
import { groupedFiles, SLOWEST, testFiles } from '../test-files.mjs';

/** The files under test/ that `file` imports, directly or through one another (relative imports only; `.js` read as `.ts`). */
function testImports(file: string, seen = new Set<string>()): string[] {
  const src = readFileSync(join(REPO, file), 'utf8');
  for (const m of src.matchAll(/(?:from\s+|import\(\s*)'(\.{1,2}\/[^']+)'/g)) {
    const target = relative(REPO, resolve(dirname(join(REPO, file)), m[1]!.replace(/\.js$/, '.ts')));
    if (!target.startsWith('test/') || seen.has(target) || !existsSync(join(REPO, target))) continue;
    seen.add(target);
    testImports(target, seen);
  }
  return [...seen];
}

/**
 * Imports of node:child_process that could leave a child running after the test that started it:
 * an asynchronous function (spawn, exec, execFile, fork), the whole module, or a dynamic import
 * or require. The synchronous ones (spawnSync, execFileSync, execSync) are allowed in a group.
 */
const CHILD_PROCESS_CHANGES = [
  /import\s*\{[^}]*\b(spawn|exec|execFile|fork)\b[^}]*\}\s*from\s*'node:child_process'/,
  /import\s+(\*|\w)[^;]*from\s*'node:child_process'/,
  /(import|require)\(\s*'node:child_process'/,
];

describe('npm test file order', () => {
  it('every file named slowest exists (a renamed file must be renamed there too)', () => {
    for (const f of SLOWEST as string[]) assert.ok(existsSync(join(REPO, f)), `${f} is listed in test/test-files.mjs but does not exist`);
  });
  it('the slowest first, in their order, then every other test file once, alphabetically, none under test/gpu/', () => {
    const files = testFiles() as string[];
    assert.deepEqual(files.slice(0, SLOWEST.length), SLOWEST);
    assert.equal(new Set(files).size, files.length, 'a file listed twice');
    const rest = files.slice(SLOWEST.length);
    assert.deepEqual(rest, [...rest].sort());
    assert.ok(files.every((f) => f.endsWith('.test.ts') && !f.startsWith('test/gpu/')));
    assert.ok(files.includes('test/runner/test-files.test.ts') || (groupedFiles() as string[]).includes('test/runner/test-files.test.ts'), 'this file runs, alone or in its group');
  });
  it('prints the same list, one path a line, when run as a script', () => {
    const out = execFileSync(process.execPath, ['test/test-files.mjs'], { cwd: REPO, encoding: 'utf8' });
    assert.deepEqual(out.trimEnd().split('\n'), testFiles());
  });
  it('with --bundle (package.json\'s test script) prints instead each file\'s runnable bundle, written to node_modules/.cache/murphy-test (test/loader/runnable.mjs), and removes one whose test file is gone (renamed or deleted)', () => {
    const orphan = join(REPO, 'node_modules', '.cache', 'murphy-test', 'test', 'runner', 'zz-renamed-away.test.mjs');
    mkdirSync(dirname(orphan), { recursive: true });
    writeFileSync(orphan, '// a bundle left by a test file that no longer exists\n');
    try {
      const out = execFileSync(process.execPath, ['test/test-files.mjs', '--bundle'], { cwd: REPO, encoding: 'utf8' });
      const printed = out.trimEnd().split('\n');
      assert.deepEqual(printed, testFiles().map((f) => join('node_modules', '.cache', 'murphy-test', f.replace(/\.ts$/, '.mjs'))));
      for (const f of printed) assert.ok(existsSync(join(REPO, f)), `${f} was not written`);
      assert.ok(!existsSync(orphan), 'the orphaned bundle is still there');
    } finally {
      rmSync(orphan, { force: true });
    }
  });
  it('a grouped file may run children synchronously, not start ones that outlive the call', () => {
    const refused = (src: string) => CHILD_PROCESS_CHANGES.some((re) => re.test(src));
    const cp = "'node:child_process'"; // (not written out here: this file runs in a group, and is checked too)
    for (const ok of [`import { spawnSync } from ${cp};`, `import { execFileSync, spawnSync, type SpawnSyncReturns } from ${cp};`, `import { execSync } from ${cp};`])
      assert.equal(refused(ok), false, ok);
    for (const bad of [`import { spawn } from ${cp};`, `import { spawnSync, execFile } from ${cp};`, `import {\n  fork,\n  spawnSync,\n} from ${cp};`,
      `import { exec as run } from ${cp};`, `import * as cp from ${cp};`, `import cp from ${cp};`, `const cp = await import(${cp});`, `const cp = require(${cp});`])
      assert.equal(refused(bad), true, bad);
  });
  it('a file that a group imports exists, runs only through its group, and leaves the process as it found it', () => {
    const grouped = groupedFiles() as string[];
    const files = testFiles() as string[];
    assert.ok(grouped.length > 0 && files.includes('test/groups/core.test.ts'));
    assert.equal(new Set(grouped).size, grouped.length, 'a file in two groups');
    // what would change the process for the files after it: environment, native thread count,
    // working directory, exit code, process listeners and signals, child processes that can
    // outlive the call that started them (spawn, exec, execFile, fork, or the whole module:
    // spawnSync, execFileSync and execSync return when the child is gone), workers, the fake NCCL
    const changes = [
      /process\.env(\.\w+|\[[^\]]+\])\s*(=(?!=)|\?\?=|\|\|=)/, /delete\s+process\.env/, /\bsetNumThreads\(/, /process\.chdir\(/, /process\.exitCode/, /process\.exit\(/,
      /process\.(on|once|addListener|prependListener)\(/, /new Worker\(/, /\buseFakeNccl\(/, /\bmock\./, /globalThis\.\w+\s*=(?!=)/, /process\.kill\(/,
      ...CHILD_PROCESS_CHANGES,
    ];
    for (const f of grouped) {
      assert.ok(existsSync(join(REPO, f)), `${f} is imported by a group in test/groups/ but does not exist`);
      assert.ok(!files.includes(f) && !(SLOWEST as string[]).includes(f), `${f} runs in its group and on its own`);
      for (const g of [f, ...testImports(f)]) {
        const src = readFileSync(join(REPO, g), 'utf8');
        const via = g === f ? '' : ` through ${g}`;
        // a helper may clean up at exit (test/exec/helpers.ts's temporary directories): that leaves the next file's process as it was
        const checks = g === f ? changes : changes.map((re) => (re.source.startsWith('process\\.(on|once') ? /process\.(on|once|addListener|prependListener)\((?!\s*'exit')/ : re));
        for (const re of checks) assert.doesNotMatch(src, re, `${f} changes the process${via} (${re}): run it on its own (remove it from its group)`);
      }
    }
  });
});

describe("npm test's PATH (test/python-path.mjs)", () => {
  const py = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : null;
  const run = (path: string, linkDir: string) =>
    execFileSync(process.execPath, ['test/python-path.mjs'], { cwd: REPO, encoding: 'utf8', env: { ...process.env, PATH: path, MURPHY_PYTHON_LINK_DIR: linkDir } });
  it('puts a link to the interpreter a pyenv shim picks first; leaves PATH alone without a shim or a python3', { skip: py ? false : 'no /usr/bin/python3' }, () => {
    const work = mkdtempSync(join(tmpdir(), 'murphy-pypath-'));
    try {
      const shims = join(work, 'shims'), plain = join(work, 'plain'), none = join(work, 'none'), links = join(work, 'links');
      for (const d of [shims, plain, none]) mkdirSync(d);
      // a stand-in for pyenv's shim: a script that names pyenv and execs the interpreter
      writeFileSync(join(shims, 'python3'), `#!/bin/sh\n# pyenv shim (stand-in)\nexec ${py} "$@"\n`, { mode: 0o755 });
      symlinkSync(py!, join(plain, 'python3'));
      const real = realpathSync(py!);
      const viaShim = run(`${shims}:/usr/bin:/bin`, links);
      assert.equal(viaShim, `${links}:${shims}:/usr/bin:/bin`);
      assert.equal(readlinkSync(join(links, 'python3')), real);
      // the link runs the same interpreter, with its own prefix
      assert.equal(execFileSync(join(links, 'python3'), ['-c', 'import os, sys; print(os.path.realpath(sys.executable), sys.prefix)'], { encoding: 'utf8' }).trim(),
        execFileSync(py!, ['-c', 'import os, sys; print(os.path.realpath(sys.executable), sys.prefix)'], { encoding: 'utf8' }).trim());
      assert.equal(run(`${plain}:${shims}:/bin`, join(work, 'links2')), `${plain}:${shims}:/bin`, 'python3 found before the shim: unchanged');
      assert.equal(run(none, join(work, 'links3')), none, 'no python3: unchanged');
      assert.equal(existsSync(join(work, 'links2')) || existsSync(join(work, 'links3')), false);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
