// The harness modules' bytecode, compiled once by the trusted parent.
//
// The executor starts Python with -B (nothing is written from inside the sandbox, whose view
// of the harness is read-only anyway), so without a __pycache__ next to the harness modules
// every server start compiled them again from source: ~20 ms of CPU of a ~95 ms start on the
// 2-vCPU VM of 2026-12-07 (server.py, the __main__ script, is compiled at every start
// regardless). So an executor's start makes sure python/murphy_exec/__pycache__ holds this
// interpreter's .pyc of each module, newer than its source, and runs `python -I -m compileall`
// on the folder when one is missing or older. Python checks each .pyc against its source's
// mtime and size when it imports it, and compiles from source when they differ: a stale or
// missing file costs time, never a wrong module. Where the folder cannot be written (a
// read-only install) nothing changes.
import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { HARNESS_MODULES, harnessDir, type PythonInfo } from './sandbox.js';

const execFileP = promisify(execFile);

/** The modules the server imports (server.py runs as __main__: Python never caches it). */
const IMPORTED = HARNESS_MODULES.filter((f) => f !== 'server.py');

/** The .pyc files of `dir`'s harness modules for `cacheTag` that are missing or older than their source. */
export function staleBytecode(cacheTag: string, dir = harnessDir()): string[] {
  const stale: string[] = [];
  for (const f of IMPORTED) {
    const pyc = join(dir, '__pycache__', `${f.replace(/\.py$/, '')}.${cacheTag}.pyc`);
    try {
      if (statSync(pyc).mtimeMs >= statSync(join(dir, f)).mtimeMs) continue;
    } catch { /* missing */ }
    stale.push(pyc);
  }
  return stale;
}

const done = new Map<string, Promise<void>>();

/**
 * Compiles the harness modules of `dir` for interpreter `py` when their bytecode is missing or
 * stale (once per interpreter and folder in this process); failures are ignored (the server
 * then compiles them in memory, as before).
 */
export function compileHarness(py: PythonInfo, dir = harnessDir()): Promise<void> {
  if (!py.cacheTag) return Promise.resolve();
  const key = `${py.executable}\0${dir}`;
  let p = done.get(key);
  if (!p) {
    p = (async () => {
      if (staleBytecode(py.cacheTag!, dir).length === 0) return;
      await execFileP(py.executable, ['-I', '-m', 'compileall', '-q', '-l', dir], { timeout: 60000 }).catch(() => {});
    })();
    done.set(key, p);
  }
  return p;
}
