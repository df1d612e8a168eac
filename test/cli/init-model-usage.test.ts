// `murphy-native init-model`: a missing --out is one line, not the whole help; the help says
// what the presets' contexts hold.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { join } from 'node:path';
import { loadDataset, problemPrompt, type Problem } from '../../lib/data/index.js';
import { builtinTokenizer } from '../../lib/demo/setup.js';
import { ChatPromptBuilder } from '../../lib/prompt/chat.js';
import { DATASETS, REPO } from '../exec/helpers.js';
import { cli } from '../helpers/cli.js';

const initModel = (...args: string[]) => spawnSync(process.execPath, cli('init-model', ...args), { cwd: REPO, encoding: 'utf8' });
// `init-model --help`, run once for the two tests that read it (a CLI start costs ~0.8 s of CPU)
let helpRun: ReturnType<typeof initModel> | undefined;
const help = () => (helpRun ??= initModel('--help'));

describe('init-model usage', () => {
  it('without --out: one line naming --out, exit status 2, nothing on stdout', () => {
    const r = initModel('--preset', 'tiny');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'murphy-native init-model: --out DIR is required (the directory to write the model to)\n');
  });
  it('an --out where no directory can be made (under /proc) fails with one line, never hangs', { skip: process.platform !== 'linux' && 'needs /proc' }, () => {
    // Node 20's recursive mkdir looped forever on /proc's ENOENT; the kill timeout only turns
    // such a hang into a failure.
    const r = spawnSync(process.execPath, cli('init-model', '--preset', 'tiny', '--out', '/proc/murphy-init-model-test'), { cwd: REPO, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.signal, null, 'init-model hung');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^murphy-native init-model: .*\/proc\/.*\n$/);
  });
  it('--help gives the presets\' contexts against the shipped datasets\' prompt lengths', () => {
    const r = help();
    assert.equal(r.status, 0);
    const text = r.stdout.replace(/\s+/g, ' ');
    assert.match(text, /2048 \(tiny\), 4096 \(small\) and 40960 \(qwen3-0\.6b\)/);
    assert.match(text, /1,508 tokens \(HumanEval\)/);
    assert.match(text, /--max-positions 8192/);
  });
  it('the prompt lengths the help quotes are the measured ones (built-in tokenizer, first turn)', async () => {
    const pb = new ChatPromptBuilder<Problem>(builtinTokenizer(), { task: (p) => problemPrompt(p, 'instruction'), history: 'full' });
    const longest = async (...files: string[]): Promise<string> => {
      let m = 0;
      for (const f of files) for (const p of await loadDataset(join(DATASETS, f))) m = Math.max(m, pb.initial(p).length);
      return m.toLocaleString('en-US');
    };
    const text = help().stdout.replace(/\s+/g, ' ');
    assert.ok(text.includes(`${await longest('HumanEval.jsonl.gz')} tokens (HumanEval)`));
    assert.ok(text.includes(`${await longest('mbpp.jsonl.gz')} (MBPP)`));
    assert.ok(text.includes(`${await longest('sanitized-mbpp.json.gz')} (sanitized MBPP)`));
    assert.ok(text.includes(`${await longest('KodCode_algorithm_100_1741212598.json.gz', 'KodCode_leetcode_100_1741214688.json.gz', 'KodCode_prefill_200_1741214325.json.gz')} (KodCode)`));
    assert.ok(text.includes(`${await longest('code_eval_live_code_bench_v1.jsonl')} (LiveCodeBench)`));
  });
});
