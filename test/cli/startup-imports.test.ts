// What every `murphy-native` command loads before it runs: lib/cli.ts and the command list
// (lib/commands/index.ts) import only the commands' option tables and the code that checks flags;
// a command's own code (training, the engines, the executor, the server, the native addon) loads
// in its handler, through import(). `--help`, `--version` and a refused flag then take ~150 ms of
// CPU instead of ~250 (docs/architecture.md, "Rules the layout keeps"). This test walks the
// static imports from lib/cli.ts (an `import type` or `export type` loads nothing; an import() is
// not followed) and fails when one of them reaches a module that only a command's handler needs.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from '../exec/helpers.js';

const LIB = join(REPO, 'lib');

/** The relative modules `file` loads when it loads: its value imports and re-exports, not type-only ones. */
export function staticImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  // `import ... from '...'`, `export ... from '...'` (possibly over several lines), and `import '...'`
  for (const m of text.matchAll(/^(import|export)\s+(type\s+)?([^;]*?)\s*from\s+'([^']+)';|^import\s+'([^']+)';/gms)) {
    const spec = m[4] ?? m[5]!;
    if (m[2]) continue; // import type / export type
    if (!spec.startsWith('.')) continue; // a package or node: builtin
    out.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
  }
  return out;
}

/** Every relative module `entry` loads, itself included, following static imports only. */
export function loadedAtStart(entry: string): Set<string> {
  const seen = new Set<string>();
  const stack = [entry];
  while (stack.length > 0) {
    const f = stack.pop()!;
    if (seen.has(f)) continue;
    assert.ok(existsSync(f), `${relative(REPO, f)} is imported but does not exist`);
    seen.add(f);
    stack.push(...staticImports(f));
  }
  return seen;
}

describe('the CLI loads only its option tables before a command runs', () => {
  const loaded = loadedAtStart(join(LIB, 'cli.ts'));
  const names = [...loaded].map((f) => relative(LIB, f)).sort();

  it('reaches none of the modules a command\'s handler loads (the addon, the engines, training, the executor, the server, the datasets)', () => {
    const handlerOnly = [
      'native.ts', 'model/index.ts', 'commands/run-training.ts', 'commands/rollout-engine.ts', 'train/loop.ts', 'exec/executor.ts',
      'exec/index.ts', 'exec/create.ts', 'rollout/server.ts', 'rollout/engine.ts', 'rollout/vllm.ts', 'gpu/device.ts', 'gpu/memory-plan.ts',
      'data/load.ts', 'data/index.ts', 'report/html.ts', 'dist/backend.ts', 'dist/launch.ts', 'eval/iterk.ts',
    ];
    for (const m of handlerOnly) assert.ok(existsSync(join(LIB, m)), `lib/${m} no longer exists: update this list`);
    assert.deepEqual(names.filter((n) => handlerOnly.includes(n)), [], `loaded by every command:\n${names.join('\n')}`);
    // the whole set stays small: yargs's ~50 modules are most of what the CLI loads to start
    assert.ok(names.length <= 30, `${names.length} modules at start:\n${names.join('\n')}`);
  });

  it('the walk follows value imports and re-exports, and skips type-only ones (checked on this file\'s own patterns)', () => {
    const direct = staticImports(join(LIB, 'commands', 'index.ts')).map((f) => relative(LIB, f)).sort();
    assert.ok(direct.includes('commands/train.ts') && direct.includes('commands/doctor.ts'), direct.join(', '));
    assert.ok(!direct.some((f) => f.startsWith('..')), direct.join(', '));
    // lib/commands/train.ts imports run-training.ts only through import() in its handler
    assert.ok(!staticImports(join(LIB, 'commands', 'train.ts')).some((f) => f.endsWith('run-training.ts')));
    assert.match(readFileSync(join(LIB, 'commands', 'train.ts'), 'utf8'), /import\('\.\/run-training\.js'\)/);
    // and the type-only imports of lib/commands/doctor.ts (its report's types) are not followed
    assert.ok(!loaded.has(join(LIB, 'exec', 'index.ts')));
    assert.match(readFileSync(join(LIB, 'commands', 'doctor.ts'), 'utf8'), /^import type \{ IsolationReport \} from '\.\.\/exec\/index\.js';$/m);
  });
});
