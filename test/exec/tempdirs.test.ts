// Every program gets a private, emptied temp dir (TMPDIR and cwd) in every sandbox mode; no
// work directories are left in the host's temp dir after SIGINT or kill -9 (issue 10 items 4, 6).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { jsonlFromRecords } from '../../lib/data/index.js';
import { defaultUidBase, PythonExecutor, sweepStaleWorkDirs, type PythonExecutorOptions } from '../../lib/exec/index.js';
import { descendants, haveBwrap, REPO, tempDir } from './helpers.js';
import { cli } from '../helpers/cli.js';

const TAG = randomBytes(6).toString('hex');
const SCRATCH = ['/tmp', '/var/tmp', '/dev/shm'].map((d) => `${d}/murphy-scratch-${TAG}`);
after(() => {
  for (const p of SCRATCH) rmSync(p, { force: true });
});

/** The process exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return st.slice(st.lastIndexOf(')') + 2, st.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const [problem] = jsonlFromRecords([{ id: 'f', prompt: 'f', asserts: ['assert f() == 1'] }]);
// Leaves files everywhere it may write.
const LITTER =
  'import os\n' +
  'for p in ["left-in-cwd", os.path.join(os.environ["TMPDIR"], "left-in-tmpdir")] + ' + JSON.stringify(SCRATCH) + ':\n' +
  '    try:\n        open(p, "w").write("x")\n    except OSError:\n        pass\n' +
  'def f():\n    return 1\n';
// Passes only in an empty private directory that is both cwd and TMPDIR, with no litter in the scratch dirs.
const CHECK =
  'import os, tempfile\n' +
  'def f():\n' +
  '    assert os.getcwd() == os.environ["TMPDIR"] == tempfile.gettempdir(), (os.getcwd(), os.environ.get("TMPDIR"))\n' +
  '    assert os.listdir(".") == [], os.listdir(".")\n' +
  '    seen = [p for p in ' + JSON.stringify(SCRATCH) + ' if os.path.exists(p)]\n' +
  '    assert seen == [], seen\n' +
  '    return 1\n';

async function modes(): Promise<{ name: string; opts: PythonExecutorOptions; privateTmp: boolean }[]> {
  const out: { name: string; opts: PythonExecutorOptions; privateTmp: boolean }[] = [];
  if (await haveBwrap()) out.push({ name: 'bubblewrap', opts: { useBubblewrap: true }, privateTmp: true });
  out.push({ name: 'process (no bubblewrap)', opts: { useBubblewrap: false }, privateTmp: true });
  out.push({ name: 'process, private /tmp disabled (what a kernel without mount namespaces gives)', opts: { useBubblewrap: false, privateTmp: false }, privateTmp: false });
  return out;
}

for (const mode of await modes()) {
  describe(`temp dirs, ${mode.name}`, () => {
    it('each program starts in an empty private cwd = TMPDIR; the scratch dirs are emptied or the report says they are not', async () => {
      const ex = new PythonExecutor({ ...mode.opts, workers: 1, warn: () => {} });
      try {
        const iso = await ex.isolation();
        const litter = await ex.run(problem, LITTER);
        assert.equal(litter.passed, true, litter.feedback);
        const check = await ex.run(problem, CHECK);
        if (mode.privateTmp) {
          assert.equal(check.passed, true, check.feedback);
          for (const p of SCRATCH) assert.equal(existsSync(p), false, `${p} reached the host`);
          assert.doesNotMatch(iso.unprotected, /\/tmp/);
        } else {
          assert.equal(existsSync(SCRATCH[0]), true, 'without a private /tmp the host /tmp is writable');
          assert.match(iso.unprotected, /write to the host's \/tmp/);
          assert.ok(iso.notes.some((n) => /host's \/tmp/.test(n)));
        }
        if (mode.name !== 'bubblewrap') assert.match(iso.unprotected, /^weaker sandbox \(no bubblewrap\): programs can read the host's files/);
        else assert.equal(iso.unprotected, '');
      } finally {
        await ex.close();
        for (const p of SCRATCH) rmSync(p, { force: true });
      }
    });
  });
}

// Each test has a temp dir of its own and waits only for its own processes: they run at once.
describe('work directories in the host temp dir (no private /tmp)', { concurrency: true }, () => {
  it('the next start removes those of executors that were killed (dead pid), and keeps live ones', async () => {
    const base = tempDir('sweep-');
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => dead.on('exit', r));
    const stale = join(base, `murphy-exec-${dead.pid}-0`);
    const live = join(base, 'murphy-exec-1-0'); // pid 1 is alive
    for (const d of [stale, live]) mkdirSync(join(d, 'run-1-1'), { recursive: true });
    assert.deepEqual(sweepStaleWorkDirs(base), [stale]);
    assert.equal(existsSync(stale), false);
    assert.equal(existsSync(live), true);
  });

  for (const signal of ['SIGKILL', 'SIGINT'] as const) {
    it(`verify-dataset stopped by ${signal} mid-run leaves no murphy-exec-* folder`, async () => {
      const tmp = tempDir('killed-');
      const file = join(tmp, 'slow.jsonl');
      // Two programs that run long enough to be caught in the middle (the signal follows the
      // barrier below within milliseconds; the workers then wait out the sleep before exiting).
      const slow = { prompt: 'f', asserts: ['assert f() == 1'], solution: 'import time\ndef f():\n    time.sleep(1.5)\n    return 1\n' };
      writeFileSync(file, [JSON.stringify({ id: 'a', ...slow }), JSON.stringify({ id: 'b', ...slow })].join('\n') + '\n');
      const work = join(tmp, 'work');
      mkdirSync(work);
      // The barrier: a program's own directory appears (a request is being served).
      const running = (): boolean =>
        readdirSync(work).some((n) => n.startsWith('murphy-exec-') && readdirSync(join(work, n)).some((r) => r.startsWith('run-')));
      const child = spawn(process.execPath, cli('verify-dataset', file, '--no-bwrap', '--workers', '2'), {
        cwd: REPO,
        env: { ...process.env, TMPDIR: work, MURPHY_EXEC_PRIVATE_TMP: '0' },
        stdio: 'ignore',
      });
      for (let i = 0; i < 1200 && !running(); i++) await new Promise((r) => setTimeout(r, 25));
      assert.ok(running(), 'a program started');
      const workers = descendants(child.pid).map((p) => p.pid);
      child.kill(signal);
      await new Promise((r) => child.on('exit', r));
      // Wait for the workers to finish their program and exit (they notice the closed pipe).
      for (let i = 0; i < 600 && workers.some(alive); i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(readdirSync(work).filter((n) => n.startsWith('murphy-exec-')), []);
    });
  }
});

describe('uids of programs (root)', { skip: process.getuid?.() !== 0 && 'not root' }, () => {
  it('two executors never share a uid (nor its process limit)', async () => {
    assert.notEqual(defaultUidBase(4242, 0), defaultUidBase(4242, 1));
    assert.ok(defaultUidBase(4242, 7) >= 200000);
    const [p] = jsonlFromRecords([{ id: 'uid', prompt: 'f', asserts: ['assert f() == -1'] }]);
    const uids: string[] = [];
    for (const opts of [{ useBubblewrap: false }, { useBubblewrap: false }] as PythonExecutorOptions[]) {
      const ex = new PythonExecutor({ ...opts, workers: 1, warn: () => {}, python: existsSync('/usr/bin/python3') ? '/usr/bin/python3' : undefined });
      try {
        const r = await ex.run(p, 'import os\ndef f():\n    return os.getuid()\n');
        uids.push(r.tests[0].actual ?? '?');
      } finally {
        await ex.close();
      }
    }
    assert.notEqual(uids[0], uids[1], uids.join(' '));
  });
});
