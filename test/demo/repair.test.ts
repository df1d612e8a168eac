// The demo's synthetic task: grading, feedback, the split, the extractor, and the supervised
// warm-up through the native step.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allRepairSpecs, parseRepairProgram, repairExtract, repairProblem, repairSplit, RepairExecutor, repairSpecOf } from '../../lib/demo/repair.js';
import { builtinTokenizer, createDemoModel, DEMO_INIT_STD, repairPromptBuilder, supervisedWarmup } from '../../lib/demo/setup.js';
import type { TrainBatch } from '../../lib/model/index.js';
import { NativePolicy, type Policy } from '../../lib/train/policy.js';

describe('repair task', () => {
  const ex = new RepairExecutor();

  it('grades programs; a wrong operator gets feedback with the failing values', () => {
    const p = repairProblem({ name: 'g', op: '*', k: 7 }, 'x');
    assert.equal(p.prompt, 'fill ?: def g(x): return x?7');
    assert.deepEqual(ex.grade(p, 'def g(x): return x*7'), { reward: 1, passed: true, feedback: 'All 4 tests passed.' });
    const wrong = ex.grade(p, 'def g(x): return x+7');
    assert.equal(wrong.passed, false);
    assert.equal(wrong.reward, 0);
    // the first failing test only, as a test runner that stops at the first failure prints it
    assert.equal(wrong.feedback, 'assert g(1) == 1*7 failed: got 8');
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

  it('the warm-up trains turn-1 prompts answered with the right operator, and no feedback turn', async () => {
    // A feedback turn answered by the warm-up (at random, as it once was) teaches that the
    // answer ignores the context; it must leave the feedback behaviour to RL.
    const tok = builtinTokenizer();
    const prompts = repairPromptBuilder(tok);
    const { train } = repairSplit(3);
    const imStart = tok.encode('<|im_start|>');
    assert.equal(imStart.length, 1);
    const seen: TrainBatch[] = [];
    const policy = {
      accumulate: async (b: TrainBatch) => (seen.push(b), { loss: 0 }),
      optimizerStep: async () => ({}),
    } as unknown as Policy;
    await supervisedWarmup(policy, train, prompts, tok, { steps: 3, batchSize: 16, lr: 1e-2, seed: 7 });
    assert.equal(seen.length, 3);
    // the right operators of the training problems with each turn-1 prompt (one or both)
    const ops = new Map<string, string[]>();
    for (const p of train) {
      const k = tok.decode(prompts.initial(p));
      ops.set(k, [...(ops.get(k) ?? []), repairSpecOf(p).op]);
    }
    for (const b of seen) {
      assert.equal(b.seqOffsets.length - 1, 16);
      for (let i = 0; i + 1 < b.seqOffsets.length; i++) {
        const seq = Array.from(b.tokens.subarray(b.seqOffsets[i]!, b.seqOffsets[i + 1]!));
        // a turn-1 prompt (user, assistant), then the operator and the end of the turn
        assert.equal(seq.filter((t) => t === imStart[0]).length, 2, tok.decode(seq));
        const prompt = tok.decode(seq.slice(0, -2));
        assert.ok(ops.has(prompt), `not a turn-1 prompt of a training problem: ${prompt}`);
        assert.equal(seq[seq.length - 1], tok.eosTokenIds[0]);
        assert.ok(ops.get(prompt)!.includes(tok.decode([seq[seq.length - 2]!])), `answer ${tok.decode(seq.slice(-2))} to ${prompt}`);
      }
    }
  });

  it('the demo model is initialised at DEMO_INIT_STD', async () => {
    // (the usual 0.02 left the copy circuit a long plateau away: docs/training.md)
    const model = await createDemoModel(5);
    const w = model.getParam(model.params().find((m) => /q_proj/.test(m.name))!.name);
    let ss = 0;
    for (const v of w) ss += v * v;
    const std = Math.sqrt(ss / w.length);
    assert.ok(Math.abs(std - DEMO_INIT_STD) < 0.05 * DEMO_INIT_STD, `std ${std} vs ${DEMO_INIT_STD}`);
    // about 1/sqrt(hidden) for hidden 64; at 0.02 the demo did not learn robustly
    assert.ok(DEMO_INIT_STD >= 0.1, `DEMO_INIT_STD ${DEMO_INIT_STD}`);
  });
});
