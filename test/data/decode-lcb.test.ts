// python/murphy_exec/decode_lcb.py: decodes LiveCodeBench's pickle blobs into JSON the loader reads.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadDataset } from '../../lib/data/index.js';
import { DATASETS, REPO, tempDir } from '../exec/helpers.js';

const SCRIPT = join(REPO, 'python', 'murphy_exec', 'decode_lcb.py');
const PY = process.env.MURPHY_PYTHON ?? 'python3';

function pyBlob(expr: string): string {
  return execFileSync(PY, ['-c', `import base64, zlib, pickle, json, os\nprint(base64.b64encode(zlib.compress(pickle.dumps(${expr}))).decode())`]).toString().trim();
}

describe('decode_lcb.py', () => {
  it('original LiveCodeBench rows: private tests decoded, then loadable', () => {
    const dir = tempDir('lcbdec-');
    const priv = [{ input: '2\n', output: '4\n', testtype: 'stdin' }, { input: '3\n', output: '6\n', testtype: 'stdin' }];
    const rec = {
      question_title: 'double', question_content: 'Print 2n.', platform: 'atcoder', question_id: 'abc000_a', contest_id: 'abc000',
      contest_date: '2025-01-01T00:00:00', starter_code: '', difficulty: 'easy',
      public_test_cases: JSON.stringify([{ input: '1\n', output: '2\n', testtype: 'stdin' }]),
      private_test_cases: pyBlob(`json.dumps(${JSON.stringify(JSON.stringify(priv))} and json.loads(${JSON.stringify(JSON.stringify(priv))}))`),
      metadata: '{}',
    };
    writeFileSync(join(dir, 'in.jsonl'), JSON.stringify(rec) + '\n');
    execFileSync(PY, [SCRIPT, join(dir, 'in.jsonl'), join(dir, 'out.jsonl')]);
    return loadDataset(join(dir, 'out.jsonl')).then(([p]) => {
      assert.equal(p.tests.kind, 'stdio');
      assert.deepEqual(p.tests.kind === 'stdio' && p.tests.cases, [{ input: '1\n', output: '2\n' }, { input: '2\n', output: '4\n' }, { input: '3\n', output: '6\n' }]);
      assert.deepEqual(p.visibleTests, [0]);
    });
  });
  it('refuses a pickle that would run code', () => {
    const dir = tempDir('lcbdec-');
    const evil = pyBlob('type("E", (), {"__reduce__": lambda self: (os.system, ("echo pwned",))})()');
    const rec = { question_content: 'q', platform: 'x', question_id: 'y', public_test_cases: '[]', private_test_cases: evil, metadata: '{}' };
    writeFileSync(join(dir, 'in.jsonl'), JSON.stringify(rec) + '\n');
    assert.throws(() => execFileSync(PY, [SCRIPT, join(dir, 'in.jsonl'), join(dir, 'out.jsonl')], { stdio: 'pipe' }), /refusing to load posix\.system|refusing to load/);
  });
  it('SandboxFusion packaging: reproduces the shipped decoded file', () => {
    const dir = tempDir('lcbdec-');
    execFileSync(PY, [SCRIPT, join(DATASETS, 'code_eval_live_code_bench_v1.jsonl'), join(dir, 'd.json')]);
    const a = JSON.parse(readFileSync(join(dir, 'd.json'), 'utf8')) as { inputs: string[]; outputs: string[]; fn_name: string | null }[];
    const b = JSON.parse(readFileSync(join(DATASETS, 'code_eval_live_code_bench_v1.tests-decoded.json'), 'utf8')) as typeof a;
    assert.deepEqual(a.map((x) => [x.fn_name, x.inputs, x.outputs]), b.map((x) => [x.fn_name, x.inputs, x.outputs]));
  });
});
