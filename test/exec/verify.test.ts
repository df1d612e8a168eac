// `murphy-native verify-dataset`: counts, failures with reasons, --json.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { verifyDataset } from '../../lib/commands/verify-dataset.js';
import { ASSETS, REPO, tempDir } from './helpers.js';
import { cli } from '../helpers/cli.js';

const run = promisify(execFile);

// Independent runs (their own files and processes): at once.
describe('verify-dataset', { concurrency: true }, () => {
  it('all shipped MBPP samples pass', async () => {
    const r = await verifyDataset(join(ASSETS, 'mbpp-sample.jsonl'));
    assert.equal(r.total, 7);
    assert.equal(r.passed, 7);
    assert.deepEqual(r.failures, []);
  });

  it('lists a broken reference with its reason; --json writes total, passed, failures', async () => {
    const dir = tempDir('verify-');
    const file = join(dir, 'mine.jsonl');
    const recs = [
      { id: 'ok', prompt: 'add', asserts: ['assert add(1, 1) == 2'], solution: 'def add(a, b):\n    return a + b\n' },
      { id: 'wrong', prompt: 'add', asserts: ['assert add(1, 1) == 2', 'assert add(0, 0) == 0'], solution: 'def add(a, b):\n    return a - b\n' },
      { id: 'noref', prompt: 'add', asserts: ['assert add(1, 1) == 2'] },
    ];
    writeFileSync(file, recs.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const out = join(dir, 'report.json');
    let stdout = '';
    let code = 0;
    try {
      ({ stdout } = await run(process.execPath, cli('verify-dataset', file, '--json', out), { cwd: REPO }));
    } catch (e) {
      const err = e as { stdout: string; code: number };
      stdout = err.stdout;
      code = err.code;
    }
    assert.equal(code, 1, 'exit status 1 when a reference fails');
    assert.match(stdout, /1\/2 reference solutions pass; 1 of 3 problems have no reference solution/);
    assert.match(stdout, /FAIL wrong \(1\/2 tests\): test 1: AssertionError/);
    assert.match(stdout, /expected: 2\n\s+actual: {3}0/);
    const j = JSON.parse(readFileSync(out, 'utf8')) as { total: number; passed: number; checked: number; failures: { id: string; reason: string }[]; noReference: string[] };
    assert.equal(j.total, 3);
    assert.equal(j.checked, 2);
    assert.equal(j.passed, 1);
    assert.deepEqual(j.failures.map((f) => f.id), ['wrong']);
    assert.match(j.failures[0].reason, /AssertionError/);
    assert.deepEqual(j.noReference, ['noref']);
  });

  it('without bubblewrap: the weaker-sandbox warning is one line, printed once; the summary stays short', async () => {
    const { stdout, stderr } = await run(process.execPath, cli('verify-dataset', join(ASSETS, 'mbpp-sample.jsonl'), '--no-bwrap', '--workers', '1'), { cwd: REPO });
    const warnings = stderr.split('\n').filter((l) => /weaker sandbox|isolation/i.test(l));
    assert.equal(warnings.length, 1, stderr);
    assert.match(warnings[0], /^murphy-native: weaker sandbox \(no bubblewrap\): programs can read the host's files/);
    const summary = stdout.split('\n')[0];
    assert.match(summary, /7\/7 reference solutions pass \[[\d.]+ s, weaker sandbox\]$/);
    assert.ok(summary.length < 160, summary);
  });
});
