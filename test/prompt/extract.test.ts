import { test } from 'node:test';
import assert from 'node:assert/strict';
import { extractCode, findCodeBlocks, stripThinking } from '../../lib/prompt/index.js';

test('fenced python block with prose around it (typical chat answer)', () => {
  const out = `Here is a solution:

\`\`\`python
def add(a, b):
    return a + b
\`\`\`

This runs in O(1).`;
  assert.equal(extractCode(out), 'def add(a, b):\n    return a + b\n');
});

test('py and untagged fences are accepted; other languages are not', () => {
  assert.equal(extractCode('```py\nx = 1\n```'), 'x = 1\n');
  assert.equal(extractCode('```\nx = 2\n```'), 'x = 2\n');
  assert.equal(extractCode('```Python3\nx = 3\n```'), 'x = 3\n');
  assert.equal(extractCode('Run this:\n```bash\npip install numpy\n```'), null);
  assert.equal(extractCode('```bash\npip install numpy\n```\n```python\nimport numpy\n```'), 'import numpy\n');
});

test('last vs longest block', () => {
  const out = `First, a helper:
\`\`\`python
def helper(x):
    return x * 2

def solve(xs):
    return [helper(x) for x in xs]
\`\`\`
Example usage:
\`\`\`python
print(solve([1, 2]))
\`\`\``;
  assert.equal(extractCode(out), 'print(solve([1, 2]))\n');
  assert.match(extractCode(out, { pick: 'longest' })!, /^def helper/);
});

test('unterminated fence (truncated generation) runs to the end', () => {
  const out = 'Sure.\n```python\ndef f(n):\n    total = 0\n    for i in range(n):\n        total += i';
  assert.equal(extractCode(out), 'def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n');
  assert.deepEqual(findCodeBlocks(out).map((b) => b.terminated), [false]);
});

test('closing fence glued to the last line, tildes, longer fences', () => {
  assert.equal(extractCode('```python\nx = 1\nprint(x)```'), 'x = 1\nprint(x)\n');
  assert.equal(extractCode('~~~python\ny = 2\n~~~'), 'y = 2\n');
  assert.equal(extractCode('````python\ns = "```"\n````'), 's = "```"\n');
});

test('thinking sections are removed (Qwen3 style), including unterminated ones', () => {
  const qwen = `<think>
Let me think. Maybe:
\`\`\`python
def wrong(): pass
\`\`\`
No, better to use sorted.
</think>

\`\`\`python
def sort_list(xs):
    return sorted(xs)
\`\`\``;
  assert.equal(extractCode(qwen), 'def sort_list(xs):\n    return sorted(xs)\n');
  // Reasoning cut off by max tokens: no answer at all.
  assert.equal(extractCode('<think>\nI should write\n```python\ndef f(): pass\n```\nhmm'), null);
  // Opening tag was part of the prompt.
  assert.equal(stripThinking('reasoning...\n</think>\n\nanswer'), '\n\nanswer');
  assert.equal(extractCode(qwen, { stripThinking: false }), 'def sort_list(xs):\n    return sorted(xs)\n');
});

test('no code at all', () => {
  assert.equal(extractCode("I'm sorry, I can't help with that."), null);
  assert.equal(extractCode(''), null);
  assert.equal(extractCode('```python\n\n```'), null);
  assert.equal(extractCode('The answer is 42.'), null);
});

test('unfenced code is accepted when it looks like code', () => {
  assert.equal(extractCode('import sys\nprint(sys.argv)\n'), 'import sys\nprint(sys.argv)\n');
  assert.equal(extractCode('def f():\n    return 1', { allowUnfenced: false }), null);
});

test('HumanEval-style continuation gets the prompt prefix', () => {
  const prefix = 'def has_close_elements(numbers, threshold):\n    """Check if any two numbers are closer than threshold."""\n';
  const body = '    for i, a in enumerate(numbers):\n        for b in numbers[i + 1:]:\n            if abs(a - b) < threshold:\n                return True\n    return False\n';
  assert.equal(extractCode(body, { prefix }), prefix + body);
  // Fenced continuation also gets the prefix; a full function does not.
  assert.equal(extractCode('```python\n' + body + '```', { prefix }), prefix + body);
  const full = 'def has_close_elements(numbers, threshold):\n    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n';
  assert.equal(extractCode('```python\n' + full + '```', { prefix }), full);
  assert.equal(extractCode('I cannot', { prefix }), null);
});
