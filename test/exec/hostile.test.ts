// Hostile programs are contained, scored 0, and leave nothing behind (processes, files).
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jsonlFromRecords, loadSample } from '../../lib/data/index.js';
import { PythonExecutor, type ExecutionResult, type RunOptions } from '../../lib/exec/index.js';
import { descendants, haveBwrap, REPO } from './helpers.js';
import { channelAttacks, forgeries } from './forgery.js';

const SECRET = 'murphy-secret-' + randomBytes(8).toString('hex');
process.env.MURPHY_HOSTILE_TEST_SECRET = SECRET;
const TAG = randomBytes(6).toString('hex');
const OUTSIDE = [join(REPO, `.tmp-pwned-${TAG}`), `/tmp/murphy-pwned-${TAG}`, `/var/tmp/murphy-pwned-${TAG}`, `/root/murphy-pwned-${TAG}`];

const [problem] = jsonlFromRecords([{ id: 'add', prompt: 'add', asserts: ['assert add(1, 2) == 3', 'assert add(2, 5) == 7'] }]);
const GOOD = 'def add(a, b):\n    return a + b\n';

/** name -> program. Each one is scored 0 (most define a correct `add` and then misbehave). */
const HOSTILE: Record<string, string> = {
  'infinite loop (module level)': GOOD + 'while True:\n    pass\n',
  'infinite loop (in the tested function)': 'def add(a, b):\n    while True:\n        pass\n',
  'fork bomb': GOOD + 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n',
  'memory bomb': GOOD + 'blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))\n',
  'huge output': GOOD + 'import sys\nwhile True:\n    sys.stdout.write("x" * 65536)\n    print("y" * 65536, file=sys.stderr)\n',
  'huge output during a test': 'def add(a, b):\n    while True:\n        print("z" * 100000)\n',
  'writing outside the temporary directory':
    'import os\n' +
    `for p in ${JSON.stringify(OUTSIDE)}:\n` +
    '    try:\n        open(p, "w").write("pwned")\n    except OSError:\n        pass\n' +
    'def add(a, b):\n    return None\n',
  "reading the parent's environment":
    'import os\nfound = []\n' +
    'found += [k for k, v in os.environ.items() if "murphy-secret" in v]\n' +
    'for pid in os.listdir("/proc"):\n    if pid.isdigit():\n        try:\n            data = open("/proc/%s/environ" % pid, "rb").read()\n            if b"murphy-secret" in data: found.append(data.decode("latin-1"))\n        except OSError:\n            pass\n' +
    'print("FOUND", found)\n' +
    'def add(a, b):\n    return ("LEAK" + repr(found)) if found else None\n',
  'a daemon that outlives the run':
    GOOD.replace('a + b', 'None') +
    'import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        for _ in range(600):\n            try:\n                open("daemon-alive", "w").write(str(time.time()))\n            except OSError:\n                pass\n            time.sleep(0.05)\n    os._exit(0)\n',
  'killing the parent': GOOD + 'import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\n',
  'sys.exit(0) before the tests run': GOOD + 'import sys\nsys.exit(0)\n',
  'os._exit(0) before the tests run': GOOD + 'import os\nos._exit(0)\n',
  'os._exit(0) inside the tested function': 'import os\ndef add(a, b):\n    os._exit(0)\n',
  "replacing the test harness's functions":
    'import sys, json, builtins\n' +
    'for m in list(sys.modules.values()):\n    for name in ("send", "run_unit", "child_main", "check", "dumps", "write", "_exit", "isinstance"):\n        try:\n            if hasattr(m, name): setattr(m, name, lambda *a, **k: None)\n        except Exception:\n            pass\n' +
    'json.dumps = lambda *a, **k: \'{"m": "E", "passed": true}\'\n' +
    'builtins.AssertionError = type("Nope", (Exception,), {})\n' +
    'def add(a, b):\n    return None\n',
  'printing a fake "all tests passed" line':
    'import sys, os\nprint("2/2 tests passed")\nprint(\'{"m": "D"}\')\nprint(\'{"m": "E", "i": 0, "passed": true}\')\nos.write(1, b"all tests passed\\n")\n' +
    'def add(a, b):\n    print("2/2 tests passed")\n    return 0\n',
  // The verdict must not depend on anything the program can change in its own interpreter.
  'an object that compares equal to anything':
    'class Any:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n' +
    'def add(a, b):\n    return Any()\n',
  'an int subclass whose __eq__ always holds': 'class I(int):\n    __hash__ = int.__hash__\n    def __eq__(self, other):\n        return True\n' + 'def add(a, b):\n    return I(0)\n',
  "patching __eq__ on the returned object's class": 'class R(list):\n    pass\n' + 'def add(a, b):\n    R.__eq__ = lambda self, other: True\n    return R()\n',
  'an always-equal object inside a list': 'class Any:\n    def __eq__(self, other):\n        return True\n' + 'def add(a, b):\n    return [Any()][0]\n',
  "replacing the tests' comparison helper (through the caller's frame)":
    'import sys\ndef add(a, b):\n    g = sys._getframe(1).f_globals\n    for k in list(g):\n        if k.startswith("__murphy"):\n            g[k] = lambda *a, **k: True\n    return 0\n',
  'replacing the comparison the tests use (operator.eq, builtins)':
    'import operator, builtins\noperator.eq = lambda a, b: True\nbuiltins.abs = lambda x: 0\nbuiltins.isinstance = lambda *a: True\n' + GOOD,
  'patched assert helpers (math.isclose, pytest.approx, unittest)':
    'import math, pytest, unittest\nmath.isclose = lambda *a, **k: True\npytest.approx = lambda *a, **k: None\n' +
    'unittest.TestCase.assertEqual = lambda *a, **k: None\n' + GOOD,
  // Correct answers, but a watched module changed during the tests: the tamper check after the tests fails them all.
  'patching a standard module during a test': 'import math\ndef add(a, b):\n    math.isclose = lambda *a, **k: True\n    return a + b\n',
  'patched sys.exit and os._exit': 'import sys, os\nsys.exit = lambda *a: None\nos._exit = lambda *a: None\n' + GOOD,
  'patching a standard class the tests rely on (Fraction.__eq__)': 'import fractions\nfractions.Fraction.__eq__ = lambda s, o: True\n' + GOOD,
  // The tamper check skips a watched dict whose version tag did not change (checks.py): these
  // change a watched name by the other ways into a module's dict.
  'replacing a watched name through the module dict (vars(math).update)': 'import math\nvars(math).update(isclose=lambda *a, **k: True)\n' + GOOD,
  "overriding ctypes' value getter, then patching a module": 'import ctypes, math\nfor c in (ctypes.c_uint64, ctypes.c_ulonglong, ctypes.c_ulong):\n    c.value = property(id)\nmath.isclose = lambda *a, **k: True\n' + GOOD,
  'deleting a builtin and defining it again': 'import builtins\ndel builtins.abs\nbuiltins.abs = lambda x: 0\n' + GOOD,
  'walking the heap with gc': 'import gc\n' + GOOD + 'try:\n    gc.get_objects()\nexcept Exception:\n    pass\n',
  'catching the timeout': 'def add(a, b):\n    while True:\n        try:\n            while True:\n                pass\n        except BaseException:\n            pass\n',
};

/**
 * The programs that are stopped by the time limit and by nothing else: they run with a tenth of
 * the suite's limits (0.1 s a test, 0.4 s a program), which stops them the same way in a tenth of
 * the time (each one burns a core until it is killed: 12 such runs a file, 3.4 s of CPU with a
 * quarter of the limits). The memory bomb gets a memory limit of its
 * own, 256 MiB instead of the suite's 1 GiB: it reaches it the same way, after zero-filling a
 * quarter of the pages. The others keep the suite's limits: the memory bomb must reach the memory
 * limit before the time limit, and the daemon must have started before its run is killed.
 */
const TIME_BOUND = new Set(['infinite loop (module level)', 'infinite loop (in the tested function)', 'fork bomb', 'huge output', 'huge output during a test', 'catching the timeout']);
const SHORT_LIMITS = { testTimeout: 0.1, programTimeout: 0.4 };
const OWN_LIMITS: Record<string, RunOptions['limits']> = { 'memory bomb': { memoryBytes: 256 * 1024 ** 2 } };

/** f() until it returns an empty list or `ms` have passed (checked every 5 ms); its last value. */
async function settled<T>(f: () => T[], ms: number): Promise<T[]> {
  const end = performance.now() + ms;
  let v = f();
  while (v.length > 0 && performance.now() < end) {
    await new Promise((res) => setTimeout(res, 5));
    v = f();
  }
  return v;
}

async function modes(): Promise<{ name: string; opts: ConstructorParameters<typeof PythonExecutor>[0]; strong: boolean }[]> {
  const out: { name: string; opts: ConstructorParameters<typeof PythonExecutor>[0]; strong: boolean }[] = [];
  if (await haveBwrap()) out.push({ name: 'bubblewrap', opts: { useBubblewrap: true }, strong: true });
  // Without bubblewrap (weaker, documented): the checks that mode guarantees.
  const py = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : undefined;
  out.push({ name: 'process (no bubblewrap)', opts: { useBubblewrap: false, python: py }, strong: false });
  return out;
}

for (const mode of await modes()) {
  describe(`hostile programs, ${mode.name}`, () => {
    let ex: PythonExecutor;
    let baseline: Set<number>;
    before(async () => {
      ex = new PythonExecutor({ ...mode.opts, workers: 2, warn: () => {}, limits: { testTimeout: 1, programTimeout: 4, memoryBytes: 1024 ** 3, outBytes: 4096, maxProcs: 16 } });
      await ex.start();
      baseline = new Set(descendants().map((p) => p.pid));
    });
    after(async () => {
      await ex.close();
      for (const p of OUTSIDE) if (existsSync(p)) rmSync(p, { force: true });
    });

    for (const [name, code] of Object.entries(HOSTILE)) {
      it(name, async () => {
        const iso = await ex.isolation();
        const r: ExecutionResult = await ex.run(problem, code, { limits: TIME_BOUND.has(name) ? SHORT_LIMITS : OWN_LIMITS[name] });
        assert.equal(r.reward, 0, `${name}: reward ${r.reward}\n${r.feedback}`);
        assert.equal(r.passed, false);
        if (TIME_BOUND.has(name)) assert.ok(r.timedOut || r.tests.some((t) => t.status === 'timeout'), `${name}: not stopped by the time limit\n${r.feedback}`);
        // Output is capped.
        assert.ok(r.stdout.length <= 4096 + 100 && r.stderr.length <= 4096 + 100, 'captured output is capped');
        for (const t of r.tests) assert.ok((t.output ?? '').length <= 4096 + 100);
        // Without bubblewrap the environment of Node's process is hidden only from a dropped uid.
        if (mode.strong || iso.filesystem.includes('programs run as uid')) {
          assert.doesNotMatch(JSON.stringify(r), new RegExp(SECRET), 'the secret never reaches the program');
        }
        // Nothing left behind: the only processes are the warm workers from before. A killed
        // group may take a moment to be reaped: looked at until it is gone, for at most 100 ms
        // (the fixed wait this replaces), so a clean run does not wait at all.
        const extra = await settled(() => descendants().filter((p) => !baseline.has(p.pid)), 100);
        assert.deepEqual(extra, [], `${name}: stray processes`);
        if (mode.strong || iso.filesystem.includes('programs run as uid')) {
          for (const p of OUTSIDE) {
            // Without bubblewrap the host's /tmp is private only where a mount namespace could be made.
            const privateTmp = iso.filesystem.includes('private tmpfs');
            if (!mode.strong && !privateTmp && (p.startsWith('/tmp') || p.startsWith('/var/tmp'))) continue;
            assert.equal(existsSync(p), false, `${name}: wrote ${p}`);
          }
        }
        // The executor still works afterwards (a killed worker is replaced).
        const ok = await ex.run(problem, GOOD);
        assert.equal(ok.passed, true, `after ${name}: ${ok.feedback} ${ok.errors.join(';')}`);
        baseline = new Set(descendants().map((p) => p.pid));
      });
    }

    it('the isolation report describes the mode', async () => {
      const iso = await ex.isolation();
      assert.equal(iso.bubblewrap, mode.strong);
      if (mode.strong) {
        assert.deepEqual(iso.notes, []);
        assert.match(iso.network, /^none/);
      } else {
        assert.ok(iso.notes.some((n) => /bubblewrap not used/.test(n)));
      }
    });
  });
}

describe('hostile HumanEval completions (values judged outside the program)', () => {
  let ex: PythonExecutor;
  before(() => {
    ex = new PythonExecutor({ workers: 2, warn: () => {}, limits: { testTimeout: 2, programTimeout: 8 } });
  });
  after(async () => {
    await ex.close();
  });
  // HumanEval/2's tests: `assert candidate(3.5) == 0.5` and `assert abs(candidate(1.33) - 0.33) < 1e-6`.
  // name -> [program, tests it may pass]
  const CASES: Record<string, [string, number]> = {
    'a float whose subtraction and comparison lie': [
      'class F(float):\n    __hash__ = float.__hash__\n    def __eq__(self, o):\n        return True\n    def __sub__(self, o):\n        return 0.0\n' +
      'def truncate_number(number: float) -> float:\n    return F(0)\n', 0],
    'an object truthy and equal to everything': ['class T:\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n        return True\n    def __sub__(self, o):\n        return 0\n' +
      'def truncate_number(number: float) -> float:\n    return T()\n', 0],
    // 0.5 is right for the first test only; the others call abs().
    'shadowing a builtin the tests call': ['def abs(x):\n    return 0\n' + 'def truncate_number(number: float) -> float:\n    return 0.5\n', 1],
  };
  for (const [name, [code, canPass]] of Object.entries(CASES)) {
    it(name, async () => {
      const p = (await loadSample('humaneval')).find((x) => x.id === 'HumanEval/2');
      assert.ok(p);
      const r = await ex.run(p, code);
      assert.equal(r.passed, false, r.feedback);
      assert.equal(r.numPassed, canPass, `${name}: ${r.numPassed}/${r.numTests} ${r.feedback}`);
    });
  }
});

// Programs that reach the harness from their own thread (frames, tracebacks, generators,
// closures, namespaces, a trace function, a gc callback) and forge its messages, or read the
// expected outputs. Each of them scored 1 before the harness kept its key on a thread of its
// own and the expected outputs out of the child (test/exec/forgery.ts); the channel attacks
// target the authenticated channel that replaced the token.
describe('forged verdicts', () => {
  let ex: PythonExecutor;
  before(() => {
    // maxOpenFiles 1024: the channel's descriptor (200..899) can then be replaced with dup2,
    // so the man-in-the-middle attacks always get to run.
    ex = new PythonExecutor({ workers: 2, warn: () => {}, limits: { testTimeout: 2, programTimeout: 8, maxOpenFiles: 1024 } });
  });
  after(async () => {
    await ex.close();
  });
  for (const [name, [problem, code]] of Object.entries({ ...forgeries(), ...channelAttacks() })) {
    it(name, async () => {
      const r = await ex.run(problem, code);
      assert.equal(r.reward, 0, `${name}: reward ${r.reward}\n${r.feedback}`);
      assert.equal(r.passed, false);
      assert.equal(r.numPassed, 0);
    });
  }
  it('the same problems still pass with correct programs', async () => {
    const good: Record<string, string> = {
      add: 'def add(a, b):\n    return a + b\n',
      addp: 'def add(a, b):\n    return a + b\n',
      double: 'print(int(input()) * 2)\n',
      twice: 'def twice(x):\n    return 2 * x\n',
    };
    const seen = new Set<string>();
    for (const [problem] of Object.values({ ...forgeries(), ...channelAttacks() })) {
      if (seen.has(problem.id)) continue;
      seen.add(problem.id);
      const r = await ex.run(problem, good[problem.id]);
      assert.equal(r.passed, true, `${problem.id}: ${r.feedback}`);
    }
  });
});

// The tamper check reads the watched dicts' version tags (checks.py, _dict_version_readers) and
// compares their values only when a tag moved: what a program may change must still pass, and the
// tags must be in use on the interpreters the tests run (else the fast path is untested).
describe('the tamper check and what a program may change', () => {
  let ex: PythonExecutor;
  before(() => {
    ex = new PythonExecutor({ workers: 2, warn: () => {}, limits: { testTimeout: 2, programTimeout: 8 } });
  });
  after(async () => {
    await ex.close();
  });
  it('a program that adds names to watched modules, or replaces one and puts it back, passes', async () => {
    const code = 'import math, builtins\nmath.my_helper = 1\nbuiltins.my_global = 2\n_o = math.sqrt\nmath.sqrt = None\nmath.sqrt = _o\n' +
      'def add(a, b):\n    math.other = 3\n    return a + b\n';
    const r = await ex.run(problem, code);
    assert.equal(r.passed, true, r.feedback);
  });
  it('the version tags are in use on this interpreter and the system one, and see every kind of change', async () => {
    const { execFileSync } = await import('node:child_process');
    const script = [
      'import sys, math, builtins, fractions', `sys.path.insert(0, ${JSON.stringify(join(REPO, 'python', 'murphy_exec'))})`,
      'import checks', 'w = checks.World()', 'assert w.tags is not None, sys.version', 'w.mark()', 'assert w.changed() is None',
      'def moved(what):', '    got = w.changed()', '    assert got == what, (got, what)',
      'o = math.isclose', 'math.isclose = None', 'moved("replaced math.isclose")', 'math.isclose = o', 'moved(None)',
      'a = builtins.abs', 'vars(builtins).update(abs=None)', 'moved("replaced builtins.abs")', 'builtins.abs = a', 'moved(None)',
      'e = fractions.Fraction.__eq__', 'fractions.Fraction.__eq__ = lambda s, o: True', 'moved("replaced Fraction.__eq__")',
      'fractions.Fraction.__eq__ = e', 'moved(None)',
      'sys.modules["math"] = None', 'moved("replaced the module math")', 'sys.modules["math"] = math', 'moved(None)',
    ].join('\n');
    const pythons = [process.env.MURPHY_PYTHON ?? 'python3', ...(existsSync('/usr/bin/python3') ? ['/usr/bin/python3'] : [])];
    for (const py of pythons) execFileSync(py, ['-I', '-B', '-c', script], { stdio: 'pipe' });
  });
});
