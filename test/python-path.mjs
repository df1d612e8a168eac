// Prints $PATH for `npm test`'s processes: where `python3` on PATH is a pyenv shim, a directory
// holding one link, `python3`, to the interpreter the shim picks now, goes first.
//
// Why: a pyenv shim is a bash script that runs `pyenv exec`, ~30 bash processes and ~85 ms of
// CPU before the interpreter starts (the interpreter itself starts in ~35 ms). The executor
// probes `python3` at each start (lib/exec/sandbox.ts, probePython) and tests start `python3`
// themselves: ~28 shim runs, ~2.4 s of CPU a run on the 2-vCPU VM of 2026-12-07 (docs/testing.md,
// "Process starts"). The link runs the same interpreter (it finds its prefix through the link),
// and nothing else on PATH moves. Without a shim, or without python3, PATH is printed unchanged.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, statSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// (MURPHY_PYTHON_LINK_DIR: elsewhere, for test/runner/test-files.test.ts)
const LINK_DIR = process.env.MURPHY_PYTHON_LINK_DIR || join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', '.cache', 'murphy-python-bin');

const path = process.env.PATH ?? '';

/** The `python3` that PATH finds, or null. */
function onPath() {
  for (const d of path.split(':')) {
    if (!d) continue;
    try {
      if (statSync(join(d, 'python3')).isFile()) return join(d, 'python3');
    } catch { /* not here */ }
  }
  return null;
}

function isShim(file) {
  try {
    const head = readFileSync(file).subarray(0, 512).toString('latin1');
    return head.startsWith('#!') && head.includes('pyenv');
  } catch {
    return false;
  }
}

let out = path;
const found = onPath();
if (found && isShim(found)) {
  try {
    const exe = execFileSync(found, ['-c', 'import os, sys; print(os.path.realpath(sys.executable))'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 60_000 }).trim();
    if (exe.startsWith('/')) {
      mkdirSync(LINK_DIR, { recursive: true });
      const tmp = join(LINK_DIR, `.python3-${process.pid}`);  // made aside, then renamed over: never missing
      symlinkSync(exe, tmp);
      renameSync(tmp, join(LINK_DIR, 'python3'));
      out = `${LINK_DIR}:${path}`;
    }
  } catch { /* leave PATH as it is: the tests then start python3 through the shim */ }
}
process.stdout.write(out);
