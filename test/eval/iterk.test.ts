// Iter-k pass@1 on scripted conversations (hand-checkable numbers), and `murphy-native eval`
// on shipped sample data with a tiny model through the real executor.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import yargs from 'yargs';
import { evalCommand, runEval, type EvalArgs } from '../../lib/commands/eval.js';
import { loadDataset, sampleDataDir, selectSplit, SAMPLE_FILES } from '../../lib/data/index.js';
import { evaluateIterK, formatIterKTable } from '../../lib/eval/iterk.js';
import { noRoomCompletions } from '../../lib/rollout/params.js';
import type { Completion, ExecResult, FollowUpContext, PromptBuilder, SampleParams, Sampler } from '../../lib/murphy/index.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

interface P {
  id: string;
  /** The attempt (1-based) that succeeds, by conversation; 0 = never. */
  passAt: number[];
  difficulty: string;
}

const FEEDBACK = 99;

/** Turn-1 prompt = [problem index]; each feedback turn appends FEEDBACK. */
class Prompts implements PromptBuilder<P> {
  constructor(private readonly problems: P[]) {}
  initial(p: P): number[] {
    return [this.problems.indexOf(p)];
  }
  followUp(ctx: FollowUpContext<P>): number[] {
    return [...ctx.promptIds, ...ctx.node.completionIds, FEEDBACK];
  }
}

/** Answers "ok" at the scripted attempt of each conversation (conversation = sample index at turn 1). */
class Script implements Sampler {
  calls: SampleParams[] = [];
  constructor(private readonly problems: P[]) {}
  async generate(ids: number[], n: number, params: SampleParams): Promise<Completion[]> {
    this.calls.push(params);
    const p = this.problems[ids[0]!]!;
    const turn = ids.filter((x) => x === FEEDBACK).length + 1;
    // the conversation index is carried in the first completion token of turn 1
    const conv = turn === 1 ? -1 : ids[1]!;
    return Array.from({ length: n }, (_, j) => {
      const c = conv < 0 ? j : conv;
      const ok = p.passAt[c] === turn;
      return { tokenIds: [c, 7], text: ok ? 'ok' : 'wrong', finishReason: 'stop' };
    });
  }
}

const exec = { execute: async (_p: P, code: string): Promise<ExecResult> => (code === 'ok' ? { reward: 1, passed: true, feedback: 'passed' } : { reward: 0.5, passed: false, feedback: 'f(1) = 2, expected 3' }) };
const extract = (c: Completion) => c.text;

describe('Iter-k pass@1', () => {
  const problems: P[] = [
    { id: 'a', passAt: [1, 1], difficulty: 'easy' },
    { id: 'b', passAt: [2, 0], difficulty: 'easy' },
    { id: 'c', passAt: [3, 3], difficulty: 'hard' },
    { id: 'd', passAt: [0, 0], difficulty: 'hard' },
  ];

  it('counts a conversation solved from the attempt that first passes', async () => {
    const r = await evaluateIterK(problems, { sampler: new Script(problems), executor: exec, prompts: new Prompts(problems), extractCode: extract }, { k: 4, n: 2, temperature: 1, groupBy: (p) => p.difficulty });
    assert.deepEqual(r.perProblem.map((x) => x.solvedAt), [[1, 1], [2, null], [3, 3], [null, null]]);
    // k=1: a (2/2) ; k=2: + b (1/2) ; k=3: + c (2/2); k=4: same
    assert.deepEqual(r.iterations.map((p) => p.pass1), [0.25, 0.375, 0.625, 0.625]);
    assert.deepEqual(r.iterations.map((p) => p.solved), [1, 1.5, 2.5, 2.5]);
    assert.deepEqual(r.byGroup!.easy!.iterations.map((p) => p.pass1), [0.5, 0.75, 0.75, 0.75]);
    assert.deepEqual(r.byGroup!.hard!.iterations.map((p) => p.pass1), [0, 0, 0.5, 0.5]);
    const table = formatIterKTable({ dataset: 'scripted', model: 'script', ...r });
    assert.match(table, /all \(4\)\s+25\.0%\s+37\.5%\s+62\.5%\s+62\.5%/);
    assert.match(table, /hard \(2\)/);
  });

  it('a problem whose prompt does not fit the context is recorded as failed with the reason; the rest go on', async () => {
    // problem c's turn-1 prompt is 11 tokens; the backend's context is 8 (prompts that fill it
    // get no-room completions, as the embedded and vLLM backends return them)
    class LongC extends Prompts {
      override initial(p: P): number[] {
        const ids = super.initial(p);
        return p.id === 'c' ? [...ids, ...new Array<number>(10).fill(5)] : ids;
      }
    }
    class Limited extends Script {
      constructor(ps: P[], private readonly ctx: number) {
        super(ps);
      }
      override async generate(ids: number[], n: number, params: SampleParams): Promise<Completion[]> {
        if (ids.length >= this.ctx) return noRoomCompletions(n);
        return super.generate(ids, n, params);
      }
    }
    const r = await evaluateIterK(problems, { sampler: new Limited(problems, 8), executor: exec, prompts: new LongC(problems), extractCode: extract }, { k: 4, n: 2, temperature: 1 });
    assert.equal(r.unfit, 1);
    assert.deepEqual(r.perProblem.map((x) => x.id), ['a', 'b', 'c', 'd']);
    assert.deepEqual(r.perProblem.map((x) => x.solvedAt), [[1, 1], [2, null], [null, null], [null, null]]);
    assert.equal(r.perProblem[2]!.failure, "its prompt (11 tokens) does not fit the model's context");
    assert.deepEqual(r.iterations.map((p) => p.pass1), [0.25, 0.375, 0.375, 0.375]);
    assert.match(formatIterKTable({ dataset: 'scripted', model: 'script', ...r }), /1 of 4 problems did not fit the model's context and count as failed \(first: c: its prompt \(11 tokens\)/);
    // a later turn that outgrows the context ends that conversation, unsolved, and is counted
    const tight = await evaluateIterK(problems, { sampler: new Limited(problems, 5), executor: exec, prompts: new Prompts(problems), extractCode: extract }, { k: 4, n: 2, temperature: 1 });
    assert.equal(tight.unfit, 0);
    assert.ok(tight.noRoom > 0);
    assert.match(formatIterKTable({ dataset: 'scripted', model: 'script', ...tight }), new RegExp(`${tight.noRoom} conversations ended at the model's context limit`));
    assert.deepEqual(tight.perProblem.map((x) => x.solvedAt), [[1, 1], [2, null], [null, null], [null, null]]);
  });

  it('greedy uses one conversation per problem and temperature 0', async () => {
    const s = new Script(problems);
    const r = await evaluateIterK(problems, { sampler: s, executor: exec, prompts: new Prompts(problems), extractCode: extract }, { k: 2, n: 8 });
    assert.ok(r.perProblem.every((x) => x.solvedAt.length === 1));
    assert.ok(s.calls.every((c) => c.temperature === 0));
    assert.ok(s.calls.every((c) => c.logprobs === false), 'an evaluation asks for no log-probs');
    assert.deepEqual(r.iterations.map((p) => p.solved), [1, 2]);
  });
});

describe('murphy-native eval', () => {
  const work = mkdtempSync(join(tmpdir(), 'murphy-eval-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  it('writes results JSON for a shipped sample with a tiny model (all unsolved, every field present)', async () => {
    const dir = await writeTinyModel(join(work, 'model'), 1);
    const out = join(work, 'results.json');
    const r = await runEval({
      dataset: join(sampleDataDir(), SAMPLE_FILES.mbpp), format: 'auto', limit: 3, model: dir, k: 2, n: 1, temperature: 0, topP: 1, maxTokens: 8, seed: 0,
      out, workers: 2, testTimeout: 3, feedback: 'visible',
    });
    assert.ok(existsSync(out));
    const j = JSON.parse(readFileSync(out, 'utf8')) as typeof r;
    assert.equal(j.problems, 3);
    assert.deepEqual(j.iterations.map((p) => p.k), [1, 2]);
    assert.ok(j.iterations.every((p) => p.pass1 >= 0 && p.pass1 <= 1 && typeof p.solved === 'number'));
    assert.equal(j.settings.k, 2);
    // MBPP is scored on its test split by default (task ids 11-510)
    assert.equal(j.settings.split, 'test');
    assert.ok(j.perProblem.every((p) => Number(p.id.replace("mbpp/", "")) >= 11 && Number(p.id.replace("mbpp/", "")) <= 510), JSON.stringify(j.perProblem.map((p) => p.id)));
    assert.match(j.dataset, /mbpp-sample/);
    assert.match(j.model, /model$/);
  });

  it('--split picks other splits; an unknown split, or --split on a dataset without splits, is an error', async () => {
    const mbpp = (await loadDataset(join(sampleDataDir(), SAMPLE_FILES.mbpp)));
    const path = 'mbpp.jsonl';
    assert.deepEqual(selectSplit(mbpp, path, { defaultSplit: 'test' }).problems.map((p) => p.split), ['test', 'test', 'test', 'test']);
    assert.deepEqual(selectSplit(mbpp, path, { split: 'train,validation', defaultSplit: 'test' }).problems.map((p) => p.split).sort(), ['train', 'validation']);
    assert.throws(() => selectSplit(mbpp, path, { split: 'dev' }), /mbpp\.jsonl has no split "dev" \(it has prompt, test, train, validation; --split\)/);
    const he = await loadDataset(join(sampleDataDir(), SAMPLE_FILES.humaneval));
    assert.equal(selectSplit(he, 'he', { defaultSplit: 'test' }).problems.length, he.length);
    assert.throws(() => selectSplit(he, 'he', { split: 'test' }), /he has no splits; drop --split test/);
  });

  it('--device cpu and emulate (and --storage, --kv-cache-blocks) choose the embedded engine; the results say which', async () => {
    const dir = await writeTinyModel(join(work, 'model-dev'), 2);
    const base: EvalArgs = { dataset: join(sampleDataDir(), SAMPLE_FILES.mbpp), format: 'auto', limit: 2, model: dir, k: 2, n: 1, temperature: 0, topP: 1, maxTokens: 6, seed: 0, workers: 2, testTimeout: 3, feedback: 'visible' };
    const lines: string[] = [];
    const cpu = await runEval({ ...base, device: 'cpu' }, (l) => lines.push(l));
    assert.equal(cpu.settings.device, 'cpu');
    assert.equal(cpu.settings.storage, undefined);
    assert.ok(lines.includes('device: cpu (--device cpu)'), lines.join('\n'));
    lines.length = 0;
    const emu = await runEval({ ...base, device: 'emulate', storage: 'f32', kvCacheBlocks: 160 }, (l) => lines.push(l));
    assert.deepEqual([emu.settings.device, emu.settings.storage], ['emulate', 'f32']);
    assert.ok(lines.some((l) => l.startsWith("rollouts: paged engine on device 'emulate'") && l.includes('160 blocks')), lines.join('\n'));
    assert.deepEqual(emu.perProblem.map((p) => p.id), cpu.perProblem.map((p) => p.id));
    assert.equal(emu.perProblem.length, 2);
    // train's checks, one line each, before any work
    await assert.rejects(runEval({ ...base, device: 'cpu', storage: 'f32' }), /config key "storage" \(--storage f32\) applies to the device engine, and --device cpu was given/);
    await assert.rejects(runEval({ ...base, device: 'emulate', kvCacheFraction: 2 }), /^ConfigError: config key "kvCacheFraction" \(--kv-cache-fraction\) in eval's flags: must be a number > 0 and <= 1; got 2$/);
    await assert.rejects(runEval({ ...base, device: 'emulate', bf16Generate: true }), /--bf16-generate is for the CPU engine; --device emulate keeps its weights in bf16 already/);
    await assert.rejects(runEval({ ...base, model: undefined, serverUrl: 'http://127.0.0.1:1', tokenizer: dir, device: 'cpu' }), /--device chooses the embedded engine \(--model\); with --server-url the server generates/);
    // the command line: train's option definitions (choices) for the same flags
    const parse = (...args: string[]) => (evalCommand.builder as (y: ReturnType<typeof yargs>) => ReturnType<typeof yargs>)(yargs(args).exitProcess(false).fail((m) => { throw new Error(m); })).parseSync();
    const argv = parse('--dataset', 'x', '--device', 'emulate', '--storage', 'f32', '--kv-cache-blocks', '64');
    assert.deepEqual([argv.device, argv.storage, argv.kvCacheBlocks], ['emulate', 'f32', 64]);
    assert.throws(() => parse('--dataset', 'x', '--device', 'gpu'), /Invalid values:[\s\S]*device[\s\S]*"auto", "cpu", "cuda", "emulate"/);
  });

  it('clear errors for a missing dataset and missing model', async () => {
    const base = { format: 'auto', k: 2, n: 1, temperature: 0, topP: 1, maxTokens: 8, seed: 0, testTimeout: 3, feedback: 'visible' as const };
    await assert.rejects(runEval({ ...base, dataset: join(work, 'nope.jsonl'), model: join(work, 'model') }), /dataset file not found/);
    await assert.rejects(runEval({ ...base, dataset: join(sampleDataDir(), SAMPLE_FILES.mbpp) }), /--model DIR .* or --server-url/);
  });
});
