// test/skip-summary-reporter.mjs: `npm test` lists what was skipped and why, and the seeds of the
// test processes with failures, just before Node's summary.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from '../exec/helpers.js';
import { writeRunnable } from '../loader/runnable.mjs';

type Mode = 'bundle' | 'loader';

/**
 * The runner with this reporter on `file`, as package.json's test script starts it ('bundle': the
 * file's runnable bundle, written first, no loader; MURPHY_TEST_SOURCE_MAPS=reporter) or as one
 * runs a single file ('loader': the .ts under the tests' TypeScript loader).
 */
async function run(file: string, mode: Mode = 'bundle', sourceMaps = 'reporter'): Promise<{ out: string; status: number | null }> {
  const env: NodeJS.ProcessEnv = { ...process.env, MURPHY_TEST_SOURCE_MAPS: sourceMaps };
  delete env.NODE_TEST_CONTEXT; // else the inner runner reports to this one instead of printing
  const target = mode === 'bundle' ? relative(REPO, (await writeRunnable([join(REPO, file)]))[0]!) : file;
  const loader = mode === 'loader' ? ['--import', './test/loader/register.mjs'] : [];
  const r = spawnSync(process.execPath, [...loader, '--test', '--test-reporter=./test/skip-summary-reporter.mjs', target], { cwd: REPO, env, encoding: 'utf8' });
  return { out: r.stdout, status: r.status };
}

const MODES: Mode[] = ['bundle', 'loader'];

describe('skip summary reporter', () => {
  for (const mode of MODES) {
    it(`lists each skipped test or suite with its file and reason, before the usual summary lines (${mode})`, async () => {
      const { out, status } = await run(join('test', 'fixtures', 'runner', 'skips.fixture.ts'), mode);
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
  }
  it('says "none" when nothing was skipped', async () => {
    const { out } = await run(join('test', 'fixtures', 'runner', 'none.fixture.ts'));
    assert.match(out, /^ℹ skipped: none\nℹ tests 1$/m);
  });
  for (const mode of MODES) {
    it(`a failed test's location is its own file and line, through the bundle it ran in (alone or in a group; ${mode})`, async () => {
      for (const entry of ['fails.fixture.ts', 'group.fixture.ts']) {
        const { out, status } = await run(join('test', 'fixtures', 'runner', entry), mode);
        assert.equal(status, 1, out);
        assert.match(out, /^test at test\/fixtures\/runner\/fails\.fixture\.ts:7:1$/m, `${entry}:\n${out}`);
        assert.ok(!out.includes('murphy-test'), `the bundle is named:\n${out}`);
      }
    });
  }
  it('a failed test\'s stack frames point into the .ts sources, whether Node maps them or (npm test) the reporter does', async () => {
    const frames = (out: string) => out.split('\n').filter((l) => /^\s+at .*\.ts:\d+:\d+\)?$/.test(l)).map((l) => l.trim());
    for (const entry of ['stack-fails.fixture.ts', 'stack-group.fixture.ts']) {
      const file = join('test', 'fixtures', 'runner', entry);
      const byNode = await run(file, 'loader', 'node');
      for (const [mode, sourceMaps] of [['bundle', 'reporter'], ['loader', 'reporter']] as const) {
        const r = await run(file, mode, sourceMaps);
        assert.equal(r.status, 1, r.out);
        const f = frames(r.out);
        // the error is thrown in lib/config/index.ts, reached from the fixture's line 9
        assert.ok(f.some((l) => l.includes(`${join(REPO, 'lib', 'config', 'index.ts')}:`)), `${entry}, ${mode}:\n${r.out}`);
        assert.ok(f.some((l) => l.includes(`${join(REPO, 'test', 'fixtures', 'runner', 'stack-fails.fixture.ts')}:9:`)), `${entry}, ${mode}:\n${r.out}`);
        assert.ok(!r.out.includes('file://'), `an unmapped frame (${mode}):\n${r.out}`);
        assert.deepEqual(f, frames(byNode.out), `${entry}, ${mode}: not the frames Node's source maps give`);
      }
    }
  });
  for (const mode of MODES) {
    it(`lists last the seeds that a test process with a failure drew, under the failed file, alone or in a group; nothing when none failed (${mode})`, async () => {
      const head = 'ℹ seeds drawn by the test processes with failures (replay one: MURPHY_SEED=N node --import ./test/loader/register.mjs --test FILE):';
      const printed = (out: string, name: string) => /^# (\S+): seed (\d+) /m.exec(out.split('\n').find((l) => l.includes(`# ${name}: seed `)) ?? '')?.[2];
      const alone = await run(join('test', 'fixtures', 'runner', 'seeded-fails.fixture.ts'), mode);
      assert.equal(alone.status, 1, alone.out);
      const lines = alone.out.split('\n');
      const at = lines.indexOf(head);
      assert.ok(at >= 0, alone.out);
      assert.equal(lines[at + 1], `ℹ   test/fixtures/runner/seeded-fails.fixture.ts: fixture/seeded seed ${printed(alone.out, 'fixture/seeded')}`);
      assert.ok(at > lines.findIndex((l) => /failing tests:/.test(l)), 'after the failing tests\' list');
      assert.deepEqual(lines.slice(at + 2), [''], 'last');

      const group = await run(join('test', 'fixtures', 'runner', 'seeded-group.fixture.ts'), mode);
      assert.equal(group.status, 1, group.out);
      const g = group.out.split('\n');
      const gi = g.indexOf(head);
      assert.ok(gi >= 0, group.out);
      assert.equal(g[gi + 1], `ℹ   test/fixtures/runner/seeded-fails.fixture.ts (run in test/fixtures/runner/seeded-group.fixture.ts): fixture/seeded seed ${printed(group.out, 'fixture/seeded')}, fixture/passes seed ${printed(group.out, 'fixture/passes')}`);

      const passing = await run(join('test', 'fixtures', 'runner', 'seeded-passes.fixture.ts'), mode);
      assert.equal(passing.status, 0, passing.out);
      assert.ok(!passing.out.includes('seeds drawn'), passing.out);
    });
  }
});
