// The server compiles a problem's tests once and keeps them for the next programs of that
// problem (python/murphy_exec/server.py prepare_tests): each program still gets its own verdict,
// and the kept tests are reused, bounded and evicted. Runs the harness in-process (no sandbox:
// what is checked here is the bookkeeping, not the isolation). Also the harness's bytecode,
// which an executor compiles before its servers start (lib/exec/bytecode.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { jsonlFromRecords, loadSample } from '../../lib/data/index.js';
import { harnessDir, probePython } from '../../lib/exec/index.js';
import { compileHarness, staleBytecode } from '../../lib/exec/bytecode.js';
import { HARNESS_MODULES } from '../../lib/exec/sandbox.js';
import { buildRequest } from '../../lib/exec/program.js';
import { DEFAULT_LIMITS } from '../../lib/exec/types.js';
import { tempDir } from './helpers.js';

const run = promisify(execFile);

// Reads requests (one JSON a line) on stdin; prints one line per request: the tests' pass flags,
// their error types and expected/actual values, then the number of compilations.
const DRIVER = `
import json, os, sys
sys.path.insert(0, sys.argv[1])
import server
compiled = []
real = server.compile_tests
def counting(req, pl, units):
    compiled.append(req["id"])
    return real(req, pl, units)
server.compile_tests = counting
server.PREPARED_MAX = 2
srv = server.Server({"workBase": os.path.join(sys.argv[2], "work")})
for line in sys.stdin:
    resp = srv.handle(json.loads(line))
    print(json.dumps({"id": resp["id"], "error": resp.get("error"), "tests": [
        {k: t.get(k) for k in ("passed", "errorType", "expected", "actual")} for t in resp.get("tests") or []]}))
print(json.dumps({"compiled": compiled}))
`;

interface Out {
  id: number;
  error?: string;
  tests: { passed: boolean; errorType?: string; expected?: string; actual?: string }[];
}

async function harness(reqs: object[]): Promise<{ outs: Out[]; compiled: number[] }> {
  const py = await probePython(process.env.MURPHY_PYTHON ?? 'python3');
  const p = run(py.executable, ['-I', '-B', '-c', DRIVER, harnessDir(), tempDir('prepared-')], { timeout: 60000 });
  p.child.stdin?.end(reqs.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const lines = (await p).stdout.trim().split('\n').map((l) => JSON.parse(l));
  const last = lines.pop() as { compiled: number[] };
  return { outs: lines as Out[], compiled: last.compiled };
}

const LIMITS = { ...DEFAULT_LIMITS, testTimeout: 10, programTimeout: 30 };

describe('tests compiled once per problem', () => {
  it('HumanEval and MBPP: every program gets its own verdict from the kept tests; LRU of 2 problems', async () => {
    const he = (await loadSample('humaneval'))[0];
    const ref = he.referenceSolution as string;
    const [mb, other, third] = jsonlFromRecords([
      // The second assert does not compile: it fails alone, every time.
      { id: 'sq', prompt: 'sq', asserts: ['assert sq(3) == 9', 'assert sq(2) == = 4', 'assert sq(-1) == 1'] },
      { id: 'add', prompt: 'add', asserts: ['assert add(1, 2) == 3'] },
      { id: 'neg', prompt: 'neg', asserts: ['assert neg(1) == -1'] },
    ]);
    const sq = 'def sq(x):\n    return x * x\n';
    const reqs = [
      buildRequest(1, he, ref, LIMITS, false),
      // A wrong completion of the same problem: the entry point returns None.
      buildRequest(2, he, `${he.prompt}    return None\n`, LIMITS, false),
      buildRequest(3, he, ref, LIMITS, false),
      buildRequest(4, mb, sq, LIMITS, false),
      buildRequest(5, mb, 'def sq(x):\n    return x + x\n', LIMITS, false),
      buildRequest(6, mb, sq, LIMITS, false),
      buildRequest(7, other, 'def add(a, b):\n    return a + b\n', LIMITS, false), // evicts HumanEval
      buildRequest(8, third, 'def neg(a):\n    return -a\n', LIMITS, false), // evicts sq
      buildRequest(9, he, ref, LIMITS, false), // compiled again
      buildRequest(10, third, 'def neg(a):\n    return a\n', LIMITS, false), // kept
    ];
    const { outs, compiled } = await harness(reqs);
    const byId = new Map(outs.map((o) => [o.id, o]));
    const passed = (id: number): boolean[] => byId.get(id)!.tests.map((t) => t.passed);
    for (const id of [1, 3, 9]) {
      assert.ok(passed(id).length > 1, `${id}: ${JSON.stringify(byId.get(id))}`);
      assert.ok(passed(id).every(Boolean), `${id}: ${JSON.stringify(byId.get(id))}`);
    }
    assert.ok(passed(2).every((x) => !x), JSON.stringify(byId.get(2)));
    assert.ok(byId.get(2)!.tests.some((t) => t.actual === 'None'), 'the wrong program\'s own values are reported');
    for (const id of [4, 6]) assert.deepEqual(passed(id), [true, false, true]);
    assert.deepEqual(passed(5), [false, false, false]);
    for (const id of [4, 5, 6]) assert.equal(byId.get(id)!.tests[1].errorType, 'SyntaxError');
    assert.deepEqual(byId.get(5)!.tests[0], { passed: false, errorType: 'AssertionError', expected: '9', actual: '6' });
    assert.deepEqual(passed(7), [true]);
    assert.deepEqual(passed(8), [true]);
    assert.deepEqual(passed(10), [false]);
    // Compiled: HumanEval (1), sq (4), add (7), neg (8), HumanEval again after its eviction (9).
    assert.deepEqual(compiled, [1, 4, 7, 8, 9]);
  });

  it('tests that do not compile as a whole are a clear error, not a crash', async () => {
    const [p] = jsonlFromRecords([{ id: 'bad', prompt: 'f', test_code: 'def test_f():\n    return\nreturn 1\n' }]);
    const { outs } = await harness([buildRequest(1, p, 'def f():\n    return 1\n', LIMITS, false)]);
    assert.match(outs[0].error ?? '', /the problem's tests do not parse: 'return' outside function/);
  });

  it('the assert rewriter locates every node it makes as ast.fix_missing_locations would (the walk it no longer needs)', async () => {
    const script = `
import ast, sys
sys.path.insert(0, sys.argv[1])
from checks import _AssertRewriter
def shape(c):
    """Everything compile() made of the tree: bytecode, names, constants, positions."""
    return (c.co_code, c.co_names, c.co_varnames, list(c.co_positions()),
            tuple(shape(k) if type(k) is type(c) else (type(k), k) for k in c.co_consts))
SOURCES = ["assert f(1) == 2", "assert not f(1)", "assert not not (a < b <= c)", "assert f(1) and not g(2) and h == 3",
           "assert not (a and b)", "assert x in [1, 2, 3], 'message'", "assert (f(\\n  1)\\n  == [1,\\n 2])",
           "def t():\\n    for i in range(3):\\n        assert not i < 0\\n    assert f(i) is not None"]
for src in SOURCES:
    r = _AssertRewriter("__cmp_placeholder", "__truth_placeholder")
    fast = compile(ast.Module(body=[r.visit(s) for s in ast.parse(src).body], type_ignores=[]), "t.py", "exec")
    ref = ast.fix_missing_locations(ast.Module(body=[r.visit(s) for s in ast.parse(src).body], type_ignores=[]))
    assert shape(fast) == shape(compile(ref, "t.py", "exec")), src
print("ok", len(SOURCES))
`;
    const py = await probePython(process.env.MURPHY_PYTHON ?? 'python3');
    const { stdout } = await run(py.executable, ['-I', '-B', '-c', script, harnessDir()]);
    assert.equal(stdout.trim(), 'ok 8');
  });
});

describe('the harness bytecode (lib/exec/bytecode.ts)', () => {
  it('an executor start compiles the harness modules once for its interpreter; the server then imports them from the .pyc; a newer source is stale again', async () => {
    const py = await probePython(process.env.MURPHY_PYTHON ?? 'python3');
    if (!py.cacheTag) return;
    const dir = join(tempDir('bytecode-'), 'murphy_exec');
    cpSync(harnessDir(), dir, { recursive: true, filter: (p) => !p.includes('__pycache__') });
    assert.equal(staleBytecode(py.cacheTag, dir).length, HARNESS_MODULES.length - 1, 'every imported module is stale before');
    await compileHarness(py, dir);
    assert.deepEqual(staleBytecode(py.cacheTag, dir), []);
    // -v: the import system says where each module's code came from
    const { stderr } = await run(py.executable, ['-I', '-B', '-v', '-c', 'import sys; sys.path.insert(0, sys.argv[1]); import checks, child, pytest_shim', dir]);
    for (const m of ['checks', 'child', 'pytest_shim']) assert.ok(stderr.includes(`code object from '${join(dir, '__pycache__', `${m}.${py.cacheTag}.pyc`)}'`), `${m} was compiled from source:\n${stderr.slice(-3000)}`);
    const later = new Date(Date.now() + 10_000);
    utimesSync(join(dir, 'checks.py'), later, later);
    assert.deepEqual(staleBytecode(py.cacheTag, dir), [join(dir, '__pycache__', `checks.${py.cacheTag}.pyc`)]);
  });
});
