// The demo's synthetic repair task: grading, feedback that carries the fix, the split, and
// the supervised warm-up through the native step.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allRepairSpecs, parseRepairProgram, repairExtract, repairProblem, repairSplit, RepairExecutor, repairSpecOf } from '../../lib/demo/repair.js';
import { builtinTokenizer, createDemoModel, repairPromptBuilder, supervisedWarmup } from '../../lib/demo/setup.js';
import { NativePolicy } from '../../lib/train/policy.js';

describe('repair task', () => {
  const ex = new RepairExecutor();

  it('grades programs, and a wrong constant gets feedback that names the right one', () => {
    const p = repairProblem({ op: '+', bug: 3, fix: 5 }, 'x');
    assert.equal(p.prompt, 'fix: def f(x): return x+3');
    assert.deepEqual(ex.execute(p, 'def f(x): return x+5'), { reward: 1, passed: true, feedback: 'All 4 tests passed.' });
    const wrong = ex.execute(p, 'def f(x): return x+3');
    assert.equal(wrong.passed, false);
    assert.equal(wrong.reward, 0);
    assert.equal(wrong.feedback, 'f(0) failed: got 3, expected 5');
    const q = repairProblem({ op: '*', bug: 2, fix: 4 }, 'y');
    assert.equal(ex.execute(q, 'def f(x): return x*1').feedback, 'f(1) failed: got 1, expected 4');
    // x+2 and x*2 agree at x = 2 only: a partial reward
    assert.equal(ex.execute(repairProblem({ op: '*', bug: 1, fix: 2 }, 'z'), 'def f(x): return x+2').reward, 0.25);
    assert.match(ex.execute(p, 'def f(x) return').feedback, /SyntaxError/);
  });

  it('parses only the one-line grammar', () => {
    assert.deepEqual(parseRepairProgram('def f(x): return x*7'), { op: '*', k: 7 });
    assert.deepEqual(parseRepairProgram('def f(x):\n    return x+12'), { op: '+', k: 12 });
    assert.equal(parseRepairProgram('import os\ndef f(x): return x+1'), null);
    assert.equal(parseRepairProgram('def f(x): return eval("1")'), null);
    assert.equal(repairExtract('def f(x): return x+1<|im_end|>junk'), 'def f(x): return x+1');
    assert.equal(repairExtract('  '), null);
  });

  it('held-out problems are disjoint from training problems; the assert tests match the grader', () => {
    const { train, test } = repairSplit(0);
    assert.equal(train.length + test.length, allRepairSpecs().length);
    const ids = new Set(train.map((p) => p.id));
    assert.ok(test.every((p) => !ids.has(p.id)));
    assert.deepEqual(repairSplit(0).test.map((p) => p.id), test.map((p) => p.id));
    assert.notDeepEqual(repairSplit(1).test.map((p) => p.id), test.map((p) => p.id));
    for (const p of [...train, ...test]) {
      const s = repairSpecOf(p);
      assert.ok(s.bug !== s.fix);
      assert.equal(ex.execute(p, p.referenceSolution!).passed, true);
      assert.equal(p.tests.kind, 'assert');
    }
  });

  it('the supervised warm-up lowers the loss through the native step', async () => {
    const model = await createDemoModel(0);
    const tok = builtinTokenizer();
    const losses = await supervisedWarmup(new NativePolicy(model), repairSplit(0).train, repairPromptBuilder(tok), tok, { steps: 12, batchSize: 8, lr: 1e-2, seed: 0 });
    assert.equal(losses.length, 12);
    assert.ok(losses[11]! < losses[0]! * 0.7, `loss ${losses[0]} -> ${losses[11]}`);
  });
});
