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
 * The runner with this reporter on `files`, one at a time in their order (a runner process costs
 * ~0.1 s of CPU: runs that fit together share one), as package.json's test script starts them
 * ('bundle': each file's runnable bundle, written first, no loader;
 * MURPHY_TEST_SOURCE_MAPS=reporter) or as one runs a single file ('loader': the .ts under the
 * tests' TypeScript loader).
 */
async function run(files: string | string[], mode: Mode = 'bundle', sourceMaps = 'reporter'): Promise<{ out: string; status: number | null }> {
  const list = typeof files === 'string' ? [files] : files;
  const env: NodeJS.ProcessEnv = { ...process.env, MURPHY_TEST_SOURCE_MAPS: sourceMaps };
  delete env.NODE_TEST_CONTEXT; // else the inner runner reports to this one instead of printing
  const targets = mode === 'bundle' ? (await writeRunnable(list.map((f) => join(REPO, f)))).map((b: string) => relative(REPO, b)) : list;
  const loader = mode === 'loader' ? ['--import', './test/loader/register.mjs'] : [];
  const r = spawnSync(process.execPath, [...loader, '--test', '--test-concurrency=1', '--test-reporter=./test/skip-summary-reporter.mjs', ...targets], { cwd: REPO, env, encoding: 'utf8' });
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
  it('says "none" when nothing was skipped, and lists no seeds when nothing failed (one of the files drew one)', async () => {
    const { out, status } = await run(['none.fixture.ts', 'seeded-passes.fixture.ts'].map((f) => join('test', 'fixtures', 'runner', f)));
    assert.equal(status, 0, out);
    assert.match(out, /^ℹ skipped: none\nℹ tests 2$/m);
    assert.match(out, /^# fixture\/passes: seed \d+ /m);
    assert.ok(!out.includes('seeds drawn'), out);
  });
  for (const mode of MODES) {
    it(`a failed test's location is its own file and line, through the bundle it ran in (alone or in a group; ${mode})`, async () => {
      // the file alone and in its group, one runner
      const { out, status } = await run(['fails.fixture.ts', 'group.fixture.ts'].map((f) => join('test', 'fixtures', 'runner', f)), mode);
      assert.equal(status, 1, out);
      assert.equal([...out.matchAll(/^test at test\/fixtures\/runner\/fails\.fixture\.ts:7:1$/gm)].length, 2, `once alone, once in the group:\n${out}`);
      assert.ok(!out.includes('murphy-test'), `the bundle is named:\n${out}`);
    });
  }
  it('a failed test\'s stack frames point into the .ts sources, whether Node maps them or (npm test) the reporter does', async () => {
    const frames = (out: string) => out.split('\n').filter((l) => /^\s+at .*\.ts:\d+:\d+\)?$/.test(l)).map((l) => l.trim());
    // the file alone and in its group, one runner (in that order: the frames of each, one after the other)
    const files = ['stack-fails.fixture.ts', 'stack-group.fixture.ts'].map((f) => join('test', 'fixtures', 'runner', f));
    const byNode = await run(files, 'loader', 'node');
    const at9 = (out: string) => frames(out).filter((l) => l.includes(`${join(REPO, 'test', 'fixtures', 'runner', 'stack-fails.fixture.ts')}:9:`)).length;
    assert.ok(at9(byNode.out) >= 2, `Node's frames of both files' failures:\n${byNode.out}`);
    for (const [mode, sourceMaps] of [['bundle', 'reporter'], ['loader', 'reporter']] as const) {
      const r = await run(files, mode, sourceMaps);
      assert.equal(r.status, 1, r.out);
      const f = frames(r.out);
      // the error is thrown in lib/config/index.ts, reached from the fixture's line 9
      assert.ok(f.some((l) => l.includes(`${join(REPO, 'lib', 'config', 'index.ts')}:`)), `${mode}:\n${r.out}`);
      assert.ok(at9(r.out) >= 2, `${mode}:\n${r.out}`);
      assert.ok(!r.out.includes('file://'), `an unmapped frame (${mode}):\n${r.out}`);
      assert.deepEqual(f, frames(byNode.out), `${mode}: not the frames Node's source maps give`);
    }
  });
  for (const mode of MODES) {
    it(`lists last the seeds that a test process with a failure drew, under the failed file, alone or in a group; nothing when none failed (${mode})`, async () => {
      const head = 'ℹ seeds drawn by the test processes with failures (replay one: MURPHY_SEED=N node --import ./test/loader/register.mjs --test FILE):';
      const printed = (out: string, name: string) => /^# (\S+): seed (\d+) /m.exec(out.split('\n').find((l) => l.includes(`# ${name}: seed `)) ?? '')?.[2];
      // a failing and a passing file, each its own process, in one runner: only the failing one's seed
      const alone = await run(['seeded-fails.fixture.ts', 'seeded-passes.fixture.ts'].map((f) => join('test', 'fixtures', 'runner', f)), mode);
      assert.equal(alone.status, 1, alone.out);
      assert.ok(printed(alone.out, 'fixture/passes'), `the passing file drew a seed:\n${alone.out}`);
      const lines = alone.out.split('\n');
      const at = lines.indexOf(head);
      assert.ok(at >= 0, alone.out);
      assert.equal(lines[at + 1], `ℹ   test/fixtures/runner/seeded-fails.fixture.ts: fixture/seeded seed ${printed(alone.out, 'fixture/seeded')}`);
      assert.ok(at > lines.findIndex((l) => /failing tests:/.test(l)), 'after the failing tests\' list');
      assert.deepEqual(lines.slice(at + 2), [''], 'last, and nothing of the passing process');

      const group = await run(join('test', 'fixtures', 'runner', 'seeded-group.fixture.ts'), mode);
      assert.equal(group.status, 1, group.out);
      const g = group.out.split('\n');
      const gi = g.indexOf(head);
      assert.ok(gi >= 0, group.out);
      assert.equal(g[gi + 1], `ℹ   test/fixtures/runner/seeded-fails.fixture.ts (run in test/fixtures/runner/seeded-group.fixture.ts): fixture/seeded seed ${printed(group.out, 'fixture/seeded')}, fixture/passes seed ${printed(group.out, 'fixture/passes')}`);
    });
  }
});
