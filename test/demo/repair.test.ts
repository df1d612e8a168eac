// The demo's synthetic task: grading, feedback, the split, the extractor, and the supervised
// warm-up through the native step.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allRepairSpecs, parseRepairProgram, repairExtract, repairProblem, repairSplit, RepairExecutor, repairSpecOf } from '../../lib/demo/repair.js';
import { builtinTokenizer, createDemoModel, repairPromptBuilder, supervisedWarmup } from '../../lib/demo/setup.js';
import { NativePolicy } from '../../lib/train/policy.js';

describe('repair task', () => {
  const ex = new RepairExecutor();

  it('grades programs; a wrong operator gets feedback with the failing values', () => {
    const p = repairProblem({ name: 'g', op: '*', k: 7 }, 'x');
    assert.equal(p.prompt, 'fill ?: def g(x): return x?7');
    assert.deepEqual(ex.grade(p, 'def g(x): return x*7'), { reward: 1, passed: true, feedback: 'All 4 tests passed.' });
    const wrong = ex.grade(p, 'def g(x): return x+7');
    assert.equal(wrong.passed, false);
    assert.equal(wrong.reward, 0);
    assert.equal(wrong.feedback, 'assert g(1) == 1*7 failed: got 8\nassert g(3) == 3*7 failed: got 10');
    assert.match(ex.grade(p, 'def f(x): return x*7').feedback, /NameError/);
    assert.match(ex.grade(p, 'def g(x) return').feedback, /SyntaxError/);
    // x+2 and x*2 agree only at x = 2, which is not a test input
    assert.equal(ex.grade(repairProblem({ name: 'f', op: '*', k: 2 }, 'z'), 'def f(x): return x+2').reward, 0);
  });

  it('the extractor completes the task from an operator answer', () => {
    const p = repairProblem({ name: 'h', op: '+', k: 3 }, 'x');
    assert.equal(repairExtract('*<|im_end|>', p), 'def h(x): return x*3');
    assert.equal(repairExtract(' + ', p), 'def h(x): return x+3');
    assert.equal(repairExtract('def h(x): return x+3', p), 'def h(x): return x+3');
    assert.equal(repairExtract('  ', p), null);
    assert.deepEqual(parseRepairProgram('def q(x):\n    return x*12'), { name: 'q', op: '*', k: 12 });
    assert.equal(parseRepairProgram('import os\ndef f(x): return x+1'), null);
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
      assert.equal(ex.grade(p, p.referenceSolution!).passed, true);
      assert.equal(ex.grade(p, repairExtract(s.op === '+' ? '*' : '+', p)!).passed, false);
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
