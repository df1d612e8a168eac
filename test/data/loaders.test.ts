import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  detectFormat,
  loadDataset,
  loadHumanEval,
  loadKodCode,
  loadLiveCodeBench,
  loadMbpp,
  loadSample,
  mbppSplit,
  problemPrompt,
  SAMPLE_FILES,
  type Problem,
} from '../../lib/data/index.js';
import { DATASETS, tempDir } from '../exec/helpers.js';

function countBy<T>(xs: T[], f: (x: T) => string): Record<string, number> {
  const m: Record<string, number> = {};
  for (const x of xs) m[f(x)] = (m[f(x)] ?? 0) + 1;
  return m;
}

describe('the samples shipped in the package (assets/data)', () => {
  for (const name of Object.keys(SAMPLE_FILES) as (keyof typeof SAMPLE_FILES)[]) {
    it(`loads ${name}`, async () => {
      const ps = await loadSample(name);
      assert.ok(ps.length >= 3, `${name}: ${ps.length} problems`);
      for (const p of ps) {
        assert.ok(p.id && p.prompt.length > 10, p.id);
        assert.ok(p.referenceSolution, `${p.id} has a reference solution`);
        assert.ok(p.visibleTests.length >= 1);
      }
    });
  }
  it('covers every test kind', async () => {
    const kinds = new Set<string>();
    for (const name of Object.keys(SAMPLE_FILES) as (keyof typeof SAMPLE_FILES)[]) for (const p of await loadSample(name)) kinds.add(p.tests.kind);
    assert.deepEqual([...kinds].sort(), ['assert', 'functional', 'humaneval', 'pytest', 'stdio']);
  });
});

describe('the full benchmark files (test/datasets)', () => {
  it('HumanEval: 164 problems, continuation prompts, check() tests', async () => {
    const ps = await loadHumanEval(join(DATASETS, 'HumanEval.jsonl.gz'));
    assert.equal(ps.length, 164);
    assert.equal(ps[0].id, 'HumanEval/0');
    assert.equal(ps[0].promptStyle, 'completion');
    assert.equal(ps[0].entryPoint, 'has_close_elements');
    assert.ok(ps[0].referenceSolution?.startsWith(ps[0].prompt));
    assert.equal(ps[0].tests.kind, 'humaneval');
    assert.match(problemPrompt(ps[0], 'instruction'), /```python\nfrom typing import List/);
  });
  it('MBPP full: 974 tasks with the standard splits', async () => {
    const ps = await loadMbpp(join(DATASETS, 'mbpp.jsonl.gz'));
    assert.equal(ps.length, 974);
    assert.deepEqual(countBy(ps, (p) => p.split ?? ''), { prompt: 10, test: 500, validation: 90, train: 374 });
    const t367 = ps.find((p) => p.id === 'mbpp/367') as Problem;
    assert.equal(t367.tests.kind, 'assert');
    assert.ok(t367.tests.kind === 'assert' && t367.tests.setup?.includes('Node'));
    assert.equal(ps[0].tests.kind === 'assert' && ps[0].tests.asserts.length, 3);
    assert.ok(!ps[0].referenceSolution?.includes('\r'));
    // One test shown in the prompt.
    const shown = ps[1].tests.kind === 'assert' ? ps[1].tests.asserts : [];
    assert.ok(ps[1].prompt.includes(shown[0]) && !ps[1].prompt.includes(shown[1]));
    assert.equal((await loadMbpp(join(DATASETS, 'mbpp.jsonl.gz'), { split: 'test' })).length, 500);
  });
  it('MBPP sanitized: 427 tasks, test_imports kept', async () => {
    const ps = await loadDataset(join(DATASETS, 'sanitized-mbpp.json.gz'));
    assert.equal(ps.length, 427);
    assert.deepEqual(countBy(ps, (p) => p.split ?? ''), { prompt: 7, test: 257, validation: 43, train: 120 });
    assert.equal(ps.filter((p) => p.tests.kind === 'assert' && p.tests.imports).length, 13);
  });
  it('KodCode: 232 problems in three files, pytest-style tests', async () => {
    let n = 0;
    for (const f of ['KodCode_algorithm_100_1741212598.json.gz', 'KodCode_leetcode_100_1741214688.json.gz', 'KodCode_prefill_200_1741214325.json.gz']) {
      const ps = await loadKodCode(join(DATASETS, f));
      n += ps.length;
      for (const p of ps) assert.equal(p.tests.kind, 'pytest');
    }
    assert.equal(n, 232);
  });
  it('LiveCodeBench (SandboxFusion packaging) with the decoded tests beside it', async () => {
    const ps = await loadLiveCodeBench(join(DATASETS, 'code_eval_live_code_bench_v1.jsonl'));
    assert.deepEqual(ps.map((p) => p.id), ['livecodebench/codeforces/1873_A', 'livecodebench/leetcode/2727', 'livecodebench/atcoder/abc301_a']);
    assert.deepEqual(ps.map((p) => p.tests.kind), ['stdio', 'functional', 'stdio']);
    assert.deepEqual(ps.map((p) => (p.tests.kind === 'stdio' || p.tests.kind === 'functional' ? p.tests.cases.length : 0)), [5, 14, 15]);
    assert.equal(ps[1].entryPoint, 'countSeniors');
    assert.equal(ps[0].difficulty, 'easy');
    assert.equal(ps[0].referenceSolution, undefined, 'the placeholder canonical_solution is not a solution');
  });
  it('LiveCodeBench without decoded tests fails with instructions', async () => {
    const dir = tempDir('lcb-');
    const { readFileSync } = await import('node:fs');
    writeFileSync(join(dir, 'x.jsonl'), readFileSync(join(DATASETS, 'code_eval_live_code_bench_v1.jsonl')));
    await assert.rejects(loadLiveCodeBench(join(dir, 'x.jsonl')), /compressed pickle.*decode_lcb\.py/s);
  });
});

describe('formats and detection', () => {
  it('mbppSplit follows the task-id ranges', () => {
    assert.deepEqual([1, 10, 11, 510, 511, 600, 601, 974].map(mbppSplit), ['prompt', 'prompt', 'test', 'test', 'validation', 'validation', 'train', 'train']);
  });
  it('KodCode-V1 naming (`test` instead of `test_code`)', async () => {
    const dir = tempDir('kc-');
    const rec = { question_id: 'Q1', question: 'Write f.', solution: 'def f():\n    return 1\n', test: 'from solution import f\n\ndef test_f():\n    assert f() == 1\n', gpt_difficulty: 'easy', test_info: [{ function_name: 'f', function_declaration: 'def f():' }] };
    writeFileSync(join(dir, 'v1.jsonl'), JSON.stringify(rec) + '\n');
    const [p] = await loadDataset(join(dir, 'v1.jsonl'));
    assert.equal(p.source, 'kodcode');
    assert.equal(p.tests.kind, 'pytest');
    assert.equal(p.difficulty, 'easy');
    assert.equal(p.entryPoint, 'f');
    assert.match(p.prompt, /def f\(\):/);
  });
  it('LiveCodeBench original schema: public + private tests, encoded private tests refused', async () => {
    const ps = await loadSample('livecodebench');
    assert.equal(ps.length, 3);
    assert.deepEqual(ps[1].visibleTests, [0]);
    assert.equal(ps[1].tests.kind, 'functional');
    assert.equal(ps[1].starterCode?.includes('class Solution'), true);
    const dir = tempDir('lcb-');
    const rec = { question_content: 'q', platform: 'atcoder', question_id: 'x', starter_code: '', difficulty: 'easy', public_test_cases: JSON.stringify([{ input: '1\n', output: '1\n', testtype: 'stdin' }]), private_test_cases: 'eJzLSM3JyQcABiwCFQ==', metadata: '{}' };
    writeFileSync(join(dir, 'lcb.jsonl'), JSON.stringify(rec) + '\n');
    await assert.rejects(loadDataset(join(dir, 'lcb.jsonl')), /compressed pickle/);
    const pub = await loadDataset(join(dir, 'lcb.jsonl'), { publicOnly: true });
    assert.equal(pub[0].tests.kind === 'stdio' && pub[0].tests.cases.length, 1);
  });
  it('detects each format from its fields', () => {
    assert.equal(detectFormat({ task_id: 'HumanEval/0', entry_point: 'f', canonical_solution: '' }), 'humaneval');
    assert.equal(detectFormat({ task_id: 3, test_list: [] }), 'mbpp');
    assert.equal(detectFormat({ question: 'q', test_code: '' }), 'kodcode');
    assert.equal(detectFormat({ question_content: 'q' }), 'livecodebench');
    assert.equal(detectFormat({ prompt: 'p', asserts: [] }), 'jsonl');
    assert.throws(() => detectFormat({ foo: 1 }), /cannot tell/);
  });
  it('generic JSONL: all test forms', async () => {
    const ps = await loadSample('jsonl');
    assert.deepEqual(ps.map((p) => p.tests.kind), ['assert', 'stdio', 'functional', 'pytest']);
  });
});
