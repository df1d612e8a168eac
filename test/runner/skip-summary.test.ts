// test/skip-summary-reporter.mjs: `npm test` lists what was skipped and why, just before Node's summary.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from '../exec/helpers.js';

function run(file: string): { out: string; status: number | null } {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // else the inner runner reports to this one instead of printing
  // the runner as package.json's test script starts it: the tests' TypeScript loader, this reporter
  const r = spawnSync(process.execPath, ['--import', './test/loader/register.mjs', '--test', '--test-reporter=./test/skip-summary-reporter.mjs', file], { cwd: REPO, env, encoding: 'utf8' });
  return { out: r.stdout, status: r.status };
}

describe('skip summary reporter', () => {
  it('lists each skipped test or suite with its file and reason, before the usual summary lines', () => {
    const { out, status } = run(join('test', 'fixtures', 'runner', 'skips.fixture.ts'));
    assert.equal(status, 0, out);
    const lines = out.trimEnd().split('\n');
    const head = lines.findIndex((l) => l.startsWith('ℹ skipped 3 (test or suite, and why):'));
    assert.ok(head >= 0, out);
    assert.deepEqual(lines.slice(head + 1, head + 4), [
      'ℹ   test/fixtures/runner/skips.fixture.ts › needs a widget: no widget installed',
      'ℹ   test/fixtures/runner/skips.fixture.ts › needs a gadget: no gadget (apt-get install gadget)',
      'ℹ   test/fixtures/runner/skips.fixture.ts › skips without a reason: no reason given',
    ]);
    // Then Node's own summary, unchanged and last.
    assert.match(lines[head + 4], /^ℹ tests 3$/);
    assert.match(lines.at(-1) ?? '', /^ℹ duration_ms /);
    assert.ok(lines.includes('ℹ pass 1') && lines.includes('ℹ skipped 2'), out);
  });
  it('says "none" when nothing was skipped', () => {
    const { out } = run(join('test', 'fixtures', 'runner', 'none.fixture.ts'));
    assert.match(out, /^ℹ skipped: none\nℹ tests 1$/m);
  });
  it('a failed test\'s location is its own file and line, through the bundle it ran in (alone or in a group)', () => {
    for (const entry of ['fails.fixture.ts', 'group.fixture.ts']) {
      const { out, status } = run(join('test', 'fixtures', 'runner', entry));
      assert.equal(status, 1, out);
      assert.match(out, /^test at test\/fixtures\/runner\/fails\.fixture\.ts:7:1$/m, `${entry}:\n${out}`);
    }
  });
});
