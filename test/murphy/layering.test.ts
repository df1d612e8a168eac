// The MURPHY core depends only on its own interfaces: no module of lib/murphy imports from
// another part of the package (the extractor, sampler, executor and prompts are injected).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

test('lib/murphy imports nothing outside lib/murphy', () => {
  const dir = join(import.meta.dirname, '..', '..', 'lib', 'murphy');
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));
  assert.ok(files.includes('tree.ts'));
  for (const f of files) {
    const src = readFileSync(join(dir, f), 'utf8');
    for (const m of src.matchAll(/\bfrom\s+['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]/g)) {
      const spec = m[1] ?? m[2]!;
      assert.ok(spec.startsWith('./') || spec.startsWith('node:'), `lib/murphy/${f} imports '${spec}'`);
    }
  }
});
