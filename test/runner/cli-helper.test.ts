// test/helpers/cli.ts: the tests run the compiled CLI only when dist/ is as new as every lib/ source.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cli, cliArgsFor, distIsFresh, REPO } from '../helpers/cli.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-cli-helper-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** Writes `rel` under `root` with modification time `t` (seconds). */
function file(root: string, rel: string, t: number): void {
  const p = join(root, rel);
  mkdirSync(join(p, '..'), { recursive: true });
  writeFileSync(p, '');
  utimesSync(p, t, t);
}

describe('tests run dist/cli.js only when it is fresh', () => {
  it('fresh when each lib/**/*.ts has a dist/**/*.js at least as new; stale when one is newer or missing', () => {
    const lib = join(work, 'lib'), dist = join(work, 'dist');
    file(lib, 'a.ts', 1000);
    file(lib, 'sub/b.ts', 1000);
    file(lib, 'types.d.ts', 5000); // declarations compile to nothing
    file(dist, 'a.js', 1000);
    file(dist, 'sub/b.js', 2000);
    assert.equal(distIsFresh(lib, dist), true);
    file(lib, 'sub/b.ts', 3000); // edited after the build
    assert.equal(distIsFresh(lib, dist), false);
    file(dist, 'sub/b.js', 3000); // rebuilt
    assert.equal(distIsFresh(lib, dist), true);
    file(lib, 'sub/c.ts', 1000); // a new source, not built yet
    assert.equal(distIsFresh(lib, dist), false);
    assert.equal(distIsFresh(join(work, 'absent'), dist), false);
  });
  it('the command it gives runs murphy-native (dist or sources)', () => {
    const r = spawnSync(process.execPath, cli('--help'), { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /murphy-native/);
  });
  it('the sources run under the tests\' loader (not tsx) unless MURPHY_TEST_CLI=tsx; a wrong value is named', () => {
    const args = cliArgsFor('sources', () => true);
    assert.deepEqual(args, ['--import', join(REPO, 'test/loader/register.mjs'), join(REPO, 'lib/cli.ts')]);
    const r = spawnSync(process.execPath, [...args, '--help'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /murphy-native/);
    assert.deepEqual(cliArgsFor('tsx', () => true), ['--import', 'tsx', join(REPO, 'lib/cli.ts')]);
    assert.deepEqual(cliArgsFor(undefined, () => false), args, 'a stale dist/: the sources');
    assert.throws(() => cliArgsFor('ts-node'), /MURPHY_TEST_CLI must be "dist", "sources" or "tsx", got "ts-node"/);
  });
});
