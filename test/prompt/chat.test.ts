import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatPromptBuilder, HfChatTokenizer, loadChatTokenizer, qwen3TokenizerDir, defaultFeedbackMessage, extractFromCompletion } from '../../lib/prompt/index.js';
import { buildTree, type Completion, type Executor, type Sampler } from '../../lib/murphy/index.js';

const tok: HfChatTokenizer = loadChatTokenizer(qwen3TokenizerDir());
const IM_END = tok.tokenId('<|im_end|>')!;
const THINK = tok.tokenId('<think>')!;
const END_THINK = tok.tokenId('</think>')!;

interface Problem { id: string; prompt: string }
const problem: Problem = { id: 'HumanEval/0', prompt: 'Write a function add(a, b) that returns a + b.' };

/** Sampler producing scripted texts, tokenized as a backend would sample them, ending with <|im_end|> unless truncated. */
function textSampler(script: string[][], opts: { truncate?: boolean } = {}): Sampler & { prompts: number[][] } {
  const prompts: number[][] = [];
  return {
    prompts,
    async generate(promptIds, n) {
      const texts = script[prompts.length]!;
      prompts.push(promptIds);
      assert.equal(texts.length, n);
      return texts.map((text): Completion => ({
        tokenIds: opts.truncate ? tok.encode(text) : [...tok.encode(text), IM_END],
        text,
        finishReason: opts.truncate ? 'length' : 'stop',
      }));
    },
  };
}

// Fails every attempt (so every node expands) with a short traceback.
const failing: Executor<Problem> = {
  execute: async (_p, code) => ({ reward: 0, passed: false, feedback: `Traceback (most recent call last):\n  File "main.py", line 3\nAssertionError: add(1, 2) != 3\n# code was ${code.length} chars` }),
};

const attempt = (k: number) => `Here you go:\n\`\`\`python\ndef add(a, b):\n    return a - b  # try ${k}\n\`\`\``;
const script3 = [[attempt(1)], [attempt(2)], [attempt(3)]];

test('the Qwen3 tokenizer files are found and loaded', () => {
  assert.match(qwen3TokenizerDir(), /tokenizer-qwen3[\\/]models$/);
  assert.equal(IM_END, 151645);
  assert.ok(tok.eosTokenIds.includes(IM_END));
  assert.ok(tok.isSpecial(IM_END));
  assert.equal(tok.decode(tok.encode('def f(x):\n    return x')), 'def f(x):\n    return x');
});

test('turn-1 prompt is the rendered template; thinking off appends the empty think block', () => {
  const off = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt });
  const ids = off.initial(problem);
  assert.equal(tok.decode(ids), `<|im_start|>user\n${problem.prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n`);
  assert.deepEqual(ids.slice(-4), [THINK, 271, END_THINK, 271]);
  const on = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, thinking: true, system: 'You are a careful programmer.' });
  assert.equal(tok.decode(on.initial(problem)), `<|im_start|>system\nYou are a careful programmer.<|im_end|>\n<|im_start|>user\n${problem.prompt}<|im_end|>\n<|im_start|>assistant\n`);
});

for (const history of ['full', 'latest'] as const) {
  test(`incremental ids equal a full render (thinking on, ${history} history, S = 3)`, async () => {
    const pb = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, thinking: true, history });
    const sampler = textSampler(script3);
    const t = await buildTree(problem, { sampler, executor: failing, prompts: pb, extractCode: extractFromCompletion }, { groupSize: 1, maxTurns: 3 });
    assert.equal(t.nodes.length, 3);
    for (const g of t.groups) {
      const msgs = pb.conversation(t, g.nodes[0]!, false);
      assert.deepEqual(g.promptIds, tok.encode(pb.render(msgs)), `group ${g.id}`);
    }
    // Earlier completion ids appear verbatim inside later prompts.
    const p3 = t.groups[2]!.promptIds;
    const c2 = t.nodes[1]!.completionIds;
    const at = p3.length - c2.length - pb.feedbackTurnIds(c2, t.nodes[1]!.feedback).length;
    assert.deepEqual(p3.slice(at, at + c2.length), c2);
    if (history === 'latest') assert.ok(!tok.decode(p3).includes('try 1'));
    else assert.ok(tok.decode(p3).includes('try 1'));
  });
}

test('a truncated completion (no <|im_end|>) is closed by the feedback turn; still equals a full render', async () => {
  const pb = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, thinking: true });
  const sampler = textSampler([['```python\ndef add(a, b):\n    return'], ['x']], { truncate: true });
  const t = await buildTree(problem, { sampler, executor: failing, prompts: pb, extractCode: extractFromCompletion }, { groupSize: 1, maxTurns: 2 });
  const g = t.groups[1]!;
  assert.deepEqual(g.promptIds, tok.encode(pb.render(pb.conversation(t, g.nodes[0]!, false))));
  const text = tok.decode(g.promptIds);
  assert.ok(text.includes('    return<|im_end|>\n<|im_start|>user\nYour code did not pass'));
});

test('documented difference: thinking off keeps the empty think block of earlier turns', async () => {
  const pb = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, thinking: false });
  const t = await buildTree(problem, { sampler: textSampler(script3), executor: failing, prompts: pb, extractCode: extractFromCompletion }, { groupSize: 1, maxTurns: 3 });
  const g = t.groups[2]!;
  const full = pb.render(pb.conversation(t, g.nodes[0]!, false));
  const incremental = tok.decode(g.promptIds);
  assert.notEqual(incremental, full);
  // The template drops "<think>\n\n</think>\n\n" from historical assistant turns; we keep what the model saw.
  const hist = '<|im_start|>assistant\n';
  const patched = full.split(hist).map((s, i, a) => (i > 0 && i < a.length - 1 ? '<think>\n\n</think>\n\n' + s : s)).join(hist);
  assert.equal(incremental, patched);
});

test('documented difference: reasoning of earlier turns stays in the prompt (template strips it)', async () => {
  const pb = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, thinking: true });
  const withThought = `<think>\nadd means plus, but let me try minus\n</think>\n\n${attempt(1)}`;
  const t = await buildTree(problem, { sampler: textSampler([[withThought], ['ok']]), executor: failing, prompts: pb, extractCode: extractFromCompletion }, { groupSize: 1, maxTurns: 2 });
  const g = t.groups[1]!;
  assert.ok(tok.decode(g.promptIds).includes('let me try minus'));
  assert.ok(!pb.render(pb.conversation(t, g.nodes[0]!, false)).includes('let me try minus'));
});

test('sampled ids are reused even when they are not the canonical tokenization', () => {
  const pb = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, thinking: true });
  // "return" spelled one character per token: decodes to the same text, different ids.
  const odd = [...'return'].map((ch) => tok.encode(ch)[0]!);
  assert.equal(tok.decode(odd), 'return');
  assert.notDeepEqual(odd, tok.encode('return'));
  const base = pb.initial(problem);
  const tree = { problemId: 'x', problem, maxTurns: 2, groups: [{ id: 0, turn: 1, parent: null, promptIds: base, nodes: [0], pruned: false }], nodes: [] };
  const node = { id: 0, turn: 1, parent: null, group: 0, index: 0, completionIds: [...odd, IM_END], text: 'return', finishReason: 'stop', code: null, reward: 0, passed: false, feedback: 'fb', childGroup: null, credit: NaN, advantage: NaN, pruned: false };
  const ids = pb.followUp({ problem, tree, node, promptIds: base, feedback: 'fb' });
  assert.deepEqual(ids.slice(base.length, base.length + odd.length + 1), [...odd, IM_END]);
  assert.equal(tok.decode(ids.slice(base.length + odd.length + 1)), `\n<|im_start|>user\n${defaultFeedbackMessage('fb')}<|im_end|>\n<|im_start|>assistant\n`);
});

test('custom feedback message', () => {
  const pb = new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, thinking: true, feedbackMessage: (f) => `Error:\n${f}\nFix it.` });
  assert.equal(pb.feedbackTurnText('boom'), '<|im_end|>\n<|im_start|>user\nError:\nboom\nFix it.<|im_end|>\n<|im_start|>assistant\n');
});
