// scripts/test-costs.mjs (`npm run test:costs`): runs the named test processes of `npm test` alone
// and reports each one's wall time and the machine's CPU over it; refuses a file npm test does not
// run as its own process, naming why.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { REPO } from '../helpers/cli.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-test-costs-'));
after(() => rmSync(work, { recursive: true, force: true }));
const costs = (args: string[]) => spawnSync(process.execPath, ['scripts/test-costs.mjs', ...args], { cwd: REPO, encoding: 'utf8', timeout: 120_000 });

describe('npm run test:costs', () => {
  it('runs the named test file alone: a row with its wall time and CPU, in the table and the JSON', () => {
    const json = join(work, 'costs.json');
    const r = costs(['test/murphy/tree.test.ts', '--json', json]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^ +\d+\.\d\d +100\.0% +\d+\.\d\d {2}test\/murphy\/tree\.test\.ts$/m);
    assert.match(r.stdout, /the 1 files, one at a time/);
    const out = JSON.parse(readFileSync(json, 'utf8')) as { cores: number; rows: { file: string; wallMs: number; cpuMs: number; exit: number }[] };
    assert.equal(out.rows.length, 1);
    const [row] = out.rows;
    assert.equal(row!.file, 'test/murphy/tree.test.ts');
    assert.equal(row!.exit, 0);
    assert.ok(row!.wallMs > 0 && row!.cpuMs > 0, JSON.stringify(row));
  });

  it('refuses a file npm test runs inside a group, and --json without a file name, with one line each', () => {
    const grouped = costs(['test/murphy/credit.test.ts']);
    assert.equal(grouped.status, 2);
    assert.match(grouped.stderr, /^test-costs: not among npm test's files: test\/murphy\/credit\.test\.ts \(a grouped file runs in its group: test\/groups\/\)\n$/);
    const noName = costs(['--json']);
    assert.equal(noName.status, 2);
    assert.match(noName.stderr, /--json needs a file name/);
  });
});
