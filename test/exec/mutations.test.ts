// Broken solutions fail with the right per-test results and feedback that names the failing test.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jsonlFromRecords, loadSample, type Problem } from '../../lib/data/index.js';
import { PythonExecutor } from '../../lib/exec/index.js';

let ex: PythonExecutor;
let he: Problem[];
before(async () => {
  ex = new PythonExecutor({ limits: { testTimeout: 1, programTimeout: 6 } });
  he = await loadSample('humaneval');
});
after(async () => {
  await ex.close();
});

function byId(ps: Problem[], id: string): Problem {
  const p = ps.find((x) => x.id === id);
  assert.ok(p, id);
  return p;
}

describe('HumanEval mutations', () => {
  it('canonical passes, reward 1, feedback says so', async () => {
    const p = byId(he, 'HumanEval/0');
    const r = await ex.run(p, p.referenceSolution as string);
    assert.equal(r.passed, true);
    assert.equal(r.reward, 1);
    assert.equal(r.numTests, 7, 'one test per assert of check()');
    assert.equal(r.feedback, '7/7 tests passed.');
  });
  it('a whole function (instruction style) and a bare continuation both work', async () => {
    const p = byId(he, 'HumanEval/2');
    const body = p.referenceSolution?.slice(p.prompt.length) as string;
    assert.equal((await ex.run(p, body)).passed, true, 'continuation');
    const full = 'def truncate_number(number: float) -> float:\n    return number % 1.0\n';
    assert.equal((await ex.run(p, full)).passed, true, 'whole function');
  });
  it('return None: every test fails with expected vs actual', async () => {
    const p = byId(he, 'HumanEval/0');
    const r = await ex.run(p, p.prompt + '    return None\n');
    assert.equal(r.passed, false);
    assert.equal(r.numPassed, 0);
    assert.equal(r.reward, 0);
    const t = r.tests[0];
    assert.equal(t.status, 'failed');
    assert.equal(t.errorType, 'AssertionError');
    assert.equal(t.actual, 'None');
    assert.equal(t.expected, 'True');
    assert.match(r.feedback, /^0\/7 tests passed\./);
    assert.match(r.feedback, /Test 1 failed: assert candidate\(\[1\.0, 2\.0, 3\.9, 4\.0, 5\.0, 2\.2\], 0\.3\) == True/);
    assert.match(r.feedback, /expected: True\n  actual:   None/);
    assert.match(r.feedback, /\.\.\. and 4 more failing tests\./);
  });
  it('off-by-one: partial reward, the failing asserts named', async () => {
    const p = byId(he, 'HumanEval/0');
    // `<=` instead of `<` and a range that skips the last element.
    const bad = p.prompt + '    for i in range(len(numbers) - 1):\n        for j in range(i + 1, len(numbers) - 1):\n            if abs(numbers[i] - numbers[j]) < threshold:\n                return True\n    return False\n';
    const r = await ex.run(p, bad);
    assert.equal(r.passed, false);
    assert.ok(r.numPassed > 0 && r.numPassed < r.numTests, `${r.numPassed}/${r.numTests}`);
    assert.ok(Math.abs(r.reward - r.numPassed / r.numTests) < 1e-12);
    const failing = r.tests.filter((t) => !t.passed);
    for (const t of failing) assert.match(r.feedback, new RegExp(`Test ${t.index + 1} failed`));
    assert.match(r.feedback, new RegExp(`^${r.numPassed}/7 tests passed`));
  });
  it('raise: exception type, message and a traceback trimmed to the candidate', async () => {
    const p = byId(he, 'HumanEval/0');
    const r = await ex.run(p, p.prompt + '    raise ValueError("boom")\n');
    const t = r.tests[0];
    assert.equal(t.status, 'error');
    assert.equal(t.errorType, 'ValueError');
    assert.equal(t.message, 'boom');
    assert.match(t.traceback ?? '', /File "solution\.py", line \d+, in has_close_elements\n\s+raise ValueError\("boom"\)/);
    assert.doesNotMatch(t.traceback ?? '', /server\.py|test\.py/);
    assert.match(r.feedback, /ValueError: boom/);
    assert.match(r.feedback, /Traceback \(your code\):/);
  });
  // The endless loop burns a core until its limit: it gets a quarter of a second a test (as
  // test/exec/hostile.test.ts's do), which stops it the same way.
  const LOOP_LIMITS = { testTimeout: 0.25 };
  it('infinite loop: timeout, the group killed, feedback says "timed out after 0.25 s"', async () => {
    const p = byId(he, 'HumanEval/0');
    const t0 = Date.now();
    const r = await ex.run(p, p.prompt + '    while True:\n        pass\n', { limits: LOOP_LIMITS });
    assert.ok(Date.now() - t0 < 5000);
    assert.equal(r.timedOut, true);
    assert.equal(r.tests[0].status, 'timeout');
    assert.equal(r.reward, 0);
    assert.match(r.feedback, /timed out after 0\.25 s/);
    assert.match(r.feedback, /Test 1 timed out after 0\.25 s: assert candidate/);
    assert.match(r.feedback, /6 more tests did not run because an earlier test timed out/);
  });
  it('infinite loop with continueAfterTimeout: each test gets its own timeout', async () => {
    const p = byId(he, 'HumanEval/0');
    // Loops only on the first assert's input.
    const code = p.prompt + '    if threshold == 0.3 and len(numbers) == 6:\n        while True: pass\n    return ' + '__import__("itertools") and any(abs(a-b) < threshold for i, a in enumerate(numbers) for b in numbers[i+1:])\n';
    // (the suite's 1 s a test here: the six tests after the loop must pass within the limit on a loaded machine)
    const r = await ex.run(p, code, { continueAfterTimeout: true });
    assert.equal(r.tests[0].status, 'timeout');
    assert.ok(r.tests.slice(1).every((t) => t.passed), JSON.stringify(r.tests.map((t) => t.status)));
    assert.equal(r.numPassed, 6);
  });
  it('syntax error: reported with its line', async () => {
    const p = byId(he, 'HumanEval/0');
    const r = await ex.run(p, p.prompt + '    return (\n');
    assert.equal(r.reward, 0);
    assert.ok(r.syntaxError);
    assert.equal(r.syntaxError.line, p.prompt.split('\n').length);
    assert.match(r.feedback, /SyntaxError: '\(' was never closed \(line \d+\)\n {4}return \(/);
  });
});

const custom = jsonlFromRecords([
  { id: 'mb', prompt: 'add', asserts: ['assert add(1, 2) == 3', 'assert add(2, 2) == 4', 'assert add(0, 0) == 0'] },
  { id: 'kc', prompt: 'div', test_code: 'import pytest\nfrom solution import div\n\ndef test_ok():\n    assert div(6, 3) == 2\n\ndef test_zero():\n    with pytest.raises(ZeroDivisionError):\n        div(1, 0)\n\n@pytest.mark.parametrize("a,b,c", [(4, 2, 2), (9, 3, 3)])\ndef test_param(a, b, c):\n    assert div(a, b) == c\n' },
  { id: 'io', prompt: 'sum', stdio: [{ input: '1 2\n', output: '3\n' }, { input: '5 5\n', output: '10\n' }] },
  { id: 'fn', prompt: 'f', functional: { fn_name: 'double', cases: [{ input: '2', output: '4' }, { input: '[1, 2]', output: '[1, 2, 1, 2]' }] } },
]);

describe('other test formats', () => {
  it('MBPP asserts: each reported separately', async () => {
    const r = await ex.run(custom[0], 'def add(a, b):\n    return a + b + (1 if a == 2 else 0)\n');
    assert.deepEqual(r.tests.map((t) => t.passed), [true, false, true]);
    assert.equal(r.tests[1].source, 'assert add(2, 2) == 4');
    assert.equal(r.tests[1].actual, '5');
    assert.match(r.feedback, /^2\/3 tests passed\.\n\nTest 2 failed: assert add\(2, 2\) == 4\n  expected: 4\n  actual:   5/);
  });
  it('pytest style: raises, parametrize, each function reported', async () => {
    const good = await ex.run(custom[1], 'def div(a, b):\n    return a // b\n');
    assert.deepEqual(good.tests.map((t) => [t.name, t.passed]), [['test_ok', true], ['test_zero', true], ['test_param', true]]);
    const bad = await ex.run(custom[1], 'def div(a, b):\n    return a // b if b else 0\n');
    assert.deepEqual(bad.tests.map((t) => t.passed), [true, false, true]);
    assert.match(bad.feedback, /Test 2 failed: def test_zero\(\.\.\.\)\n {2}Failed: DID NOT RAISE/);
  });
  it('stdin/stdout: whitespace-normalised comparison, wrong answers shown', async () => {
    assert.equal((await ex.run(custom[2], 'a, b = map(int, input().split())\nprint(a + b, "  ")\nprint()\n')).passed, true);
    const r = await ex.run(custom[2], 'a, b = map(int, input().split())\nprint(a * b)\n');
    assert.deepEqual(r.tests.map((t) => t.passed), [false, false]);
    assert.match(r.feedback, /expected: 3\n  actual:   2/);
    const ex2 = await ex.run(custom[2], 'import sys\nsys.exit(0)\n');
    assert.equal(ex2.reward, 0);
    assert.match(ex2.feedback, /actual: {3}\(no output\)/);
  });
  it('functional: JSON arguments, results compared by value', async () => {
    assert.equal((await ex.run(custom[3], 'class Solution:\n    def double(self, x):\n        return x * 2\n')).passed, true);
    const r = await ex.run(custom[3], 'class Solution:\n    def double(self, x):\n        return x + x if isinstance(x, int) else x\n');
    assert.deepEqual(r.tests.map((t) => t.passed), [true, false]);
    assert.equal(r.tests[1].errorType, 'WrongAnswer');
    assert.match(r.feedback, /double\(\[1, 2\]\)/);
  });
});

describe('reward and feedback options', () => {
  it('binary reward', async () => {
    const r = await ex.run(custom[0], 'def add(a, b):\n    return 3\n', { binaryReward: true });
    assert.equal(r.numPassed, 1);
    assert.equal(r.reward, 0);
  });
  it('visible scope: feedback from the visible test only, reward from all', async () => {
    const p = { ...custom[0], visibleTests: [1] };
    const r = await ex.run(p, 'def add(a, b):\n    return 4\n', { feedback: { scope: 'visible' } });
    assert.ok(Math.abs(r.reward - 1 / 3) < 1e-12);
    assert.equal(r.feedback, '1/1 visible tests passed.');
    const r2 = await ex.run({ ...custom[0], visibleTests: [0] }, 'def add(a, b):\n    return 4\n', { feedback: { scope: 'visible' } });
    assert.match(r2.feedback, /^0\/1 visible tests passed\.\n\nTest 1 failed: assert add\(1, 2\) == 3/);
    assert.doesNotMatch(r2.feedback, /add\(0, 0\)/, 'hidden tests are not shown');
  });
  it('feedback is truncated to the character budget', async () => {
    const r = await ex.run(custom[0], 'def add(a, b):\n    raise RuntimeError("x" * 5000)\n', { feedback: { maxChars: 400 } });
    assert.ok(r.feedback.length <= 400, String(r.feedback.length));
    assert.match(r.feedback, /\[feedback truncated\]$/);
  });
  it('execute() satisfies the minimal executor interface', async () => {
    const r = await ex.execute(custom[0], 'def add(a, b):\n    return a + b\n');
    assert.equal(r.passed, true);
    assert.equal(typeof r.feedback, 'string');
    assert.ok(r.tests?.every((t) => typeof t.name === 'string' && t.passed));
  });
});
