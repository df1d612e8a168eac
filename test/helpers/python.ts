// Whether a Python interpreter has a module, without importing it: importlib's find_spec costs
// ~20 ms where `import torch` costs ~1.3 s of CPU, paid again by the test's own script.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** `python` exists and finds `module` (a broken install then fails the test that uses it instead of skipping it). */
export function pythonHas(python: string, module: string): boolean {
  if (python.includes('/') && !existsSync(python)) return false;
  const r = spawnSync(python, ['-c', 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)', module], { encoding: 'utf8' });
  return r.status === 0;
}
