// One error style for every command (issue 10 item 8), flags checked before any work (item 9),
// unwritable outputs refused up front (item 4), and `train` exiting 130 after SIGINT (item 3).
// Each case runs the CLI as a user would.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { bareMessage, formatCommandError } from '../../lib/commands/errors.js';
import { checkFlags, UsageError } from '../../lib/commands/flags.js';
import { readText, sampleDataDir, SAMPLE_FILES } from '../../lib/data/index.js';
import { cli } from '../helpers/cli.js';

const run = (...args: string[]) => spawnSync(process.execPath, cli(...args), { encoding: 'utf8' });
const work = mkdtempSync(join(tmpdir(), 'murphy-cli-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** One line on stderr, prefixed once with the command, exit 1, no help text, no stack. */
function oneLine(r: ReturnType<typeof run>, command: string, what: RegExp): void {
  assert.equal(r.status, 1, r.stderr);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0]!, new RegExp(`^murphy-native ${command}: `));
  assert.doesNotMatch(lines[0]!, /^murphy-native [\w-]+: murphy-native/);
  assert.match(lines[0]!, what);
  assert.doesNotMatch(r.stderr, /Options:|--help +Show help|\n\s+at /);
}

describe('one error style', () => {
  it('flags out of range are refused before any work, each in one line', () => {
    oneLine(run('eval', '--dataset', join(sampleDataDir(), SAMPLE_FILES.mbpp), '--limit', 'abc'), 'eval', /--limit must be an integer >= 1, got not a number/);
    oneLine(run('serve', '--model', work, '--max-batch', '0'), 'serve', /--max-batch must be an integer >= 1, got 0/);
  });

  it('the flag table: --limit -1, --workers 0, --max-trees -5 and friends are refused', () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['eval', { limit: -1 }, /--limit must be an integer >= 1, got -1/],
      ['eval', { workers: 0 }, /--workers must be an integer >= 1, got 0/],
      ['eval', { topP: 0 }, /--top-p must be a number > 0 <= 1/],
      ['verify-dataset', { workers: 0 }, /--workers must be/],
      ['verify-dataset', { limit: NaN }, /--limit must be an integer >= 1, got not a number/],
      ['serve', { port: 70000 }, /--port must be an integer >= 0 <= 65535/],
      ['report', { maxTrees: -5 }, /--max-trees must be an integer >= 0, got -5/],
      ['report', { maxTrees: 1.5 }, /--max-trees must be an integer >= 0, got 1\.5/],
    ];
    for (const [cmd, argv, msg] of cases) assert.throws(() => checkFlags(cmd, argv), (e: Error) => e instanceof UsageError && msg.test(e.message), `${cmd} ${JSON.stringify(argv)}`);
    assert.doesNotThrow(() => checkFlags('report', { maxTrees: 0 }));
    assert.doesNotThrow(() => checkFlags('eval', { limit: 3, workers: 2 }));
  });

  it('runtime errors of verify-dataset: one line, no help dump, no stack unless --verbose', () => {
    const missing = join(work, 'missing.jsonl');
    oneLine(run('verify-dataset', missing), 'verify-dataset', /missing\.jsonl: file not found/);
    const v = run('verify-dataset', missing, '--verbose');
    assert.equal(v.status, 1);
    assert.match(v.stderr, /^murphy-native verify-dataset: .*file not found\n[\s\S]*\n\s+at /);
  });

  it('verify-dataset on an empty file fails; a .gz that is not gzip says "not gzip"', async () => {
    const empty = join(work, 'empty.jsonl');
    writeFileSync(empty, '');
    oneLine(run('verify-dataset', empty), 'verify-dataset', /empty\.jsonl is empty: no problem records/);
    const fake = join(work, 'fake.jsonl.gz');
    writeFileSync(fake, '{"task_id": "a", "prompt": "x"}\n');
    await assert.rejects(readText(fake), /fake\.jsonl\.gz: not gzip/);
  });

  it('eval --out DIR is refused before the work starts; so is an output under a file', () => {
    const dir = join(work, 'outdir');
    mkdirSync(dir);
    oneLine(run('eval', '--dataset', join(sampleDataDir(), SAMPLE_FILES.mbpp), '--model', work, '--out', dir), 'eval', /--out .*outdir is a directory/);
    assert.deepEqual(readdirSync(dir), []);
    const file = join(work, 'plain-file');
    writeFileSync(file, '');
    assert.throws(() => checkFlags('verify-dataset', { json: join(file, 'r.json') }), /plain-file is a file, not a directory/);
    assert.throws(() => checkFlags('report', { out: dir }), /--out .*outdir is a directory/);
    assert.throws(() => checkFlags('init-model', { out: join(file, 'model') }), /--out .*plain-file is a file, not a directory/);
    assert.throws(() => checkFlags('train', { out: join(file, 'run') }), /--out .*plain-file is a file, not a directory/);
  });

  it('messages are prefixed once, and usage errors point to --help', () => {
    assert.equal(bareMessage(new Error('murphy-native: murphy-native eval: bad')), 'bad');
    assert.equal(formatCommandError(new Error('murphy-native: no such model'), 'eval', false), 'murphy-native eval: no such model\n');
    assert.equal(formatCommandError(new UsageError('--k must be'), 'eval', false), 'murphy-native eval: --k must be (see murphy-native eval --help)\n');
    assert.throws(() => checkFlags('report', { maxTrees: 1.5 }), /--max-trees must be an integer >= 0, got 1\.5/);
    assert.doesNotThrow(() => checkFlags('report', { maxTrees: 0 }));
  });
});

describe('train and SIGINT', () => {
  it('exits 130 after SIGINT, with a checkpoint to resume from', async () => {
    const out = join(work, 'run-sigint');
    const child = spawn(process.execPath, cli('train', '--sft-steps', '0', '--max-steps', '100000', '--save-steps', '100000', '--eval-problems', '1',
      '--batch-size', '2', '--num-generations', '2', '--max-completion-length', '16', '--verbose', '--out', out), { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    // barrier: the first step line, then SIGINT
    child.stderr.on('data', (d: Buffer) => {
      const before = stderr;
      stderr += d.toString();
      if (!/step +1\//.test(before) && /step +1\//.test(stderr)) child.kill('SIGINT');
    });
    const code = await new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
    assert.equal(code, 130, stderr);
    assert.match(stderr, /SIGINT: finishing the current phase/);
    assert.match(stdout, /stopped after \d+ steps/);
    assert.ok(readdirSync(join(out, 'checkpoints')).some((n) => /^step-\d+$/.test(n)));
    assert.equal(existsSync(join(out, '.lock')), false);
  });
});
