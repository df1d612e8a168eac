// test/test-files.mjs: the files `npm test` runs, the slowest first, each once, none from test/gpu/.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from '../exec/helpers.js';
import { SLOWEST, testFiles } from '../test-files.mjs';

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
    assert.ok(files.includes('test/runner/test-files.test.ts'));
  });
  it('prints the same list, one path a line, when run as a script (what package.json\'s test script uses)', () => {
    const out = execFileSync(process.execPath, ['test/test-files.mjs'], { cwd: REPO, encoding: 'utf8' });
    assert.deepEqual(out.trimEnd().split('\n'), testFiles());
  });
});
