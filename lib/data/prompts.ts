// Prompts per dataset, in the style each benchmark uses.
import type { Problem } from './types.js';

/** HumanEval as an instruction (for chat models) rather than a raw continuation. */
export function humanEvalInstruction(prompt: string): string {
  return (
    'Complete the following Python function. Return the whole function (with its imports) in one ' +
    '```python code block.\n\n```python\n' + prompt.trimEnd() + '\n```\n'
  );
}

/** MBPP's prompt (Austin et al. 2021) with one test shown, as the sanitized-MBPP harnesses do. */
export function mbppPrompt(text: string, shownTest: string | undefined): string {
  let p = `You are an expert Python programmer, and here is your task: ${text.trim()}`;
  if (shownTest) p += ` Your code should pass this test:\n\n${shownTest.trim()}\n`;
  return p;
}

/** KodCode: the question, plus the names the tests import from `solution`. */
export function kodCodePrompt(question: string, declarations: string[]): string {
  let p = question.trim();
  if (declarations.length) {
    p += '\n\nYour solution is imported as the module `solution`; it must define:\n' +
      declarations.map((d) => `    ${d.trim()}`).join('\n') + '\n';
  }
  return p;
}

/** LiveCodeBench's code-generation prompt (the lcb_runner style). */
export function liveCodeBenchPrompt(question: string, starterCode: string | undefined): string {
  let p =
    'You will be given a question (problem specification) and will generate a correct Python program ' +
    'that matches the specification and passes all tests.\n\n### Question:\n' + question.trim() + '\n\n';
  if (starterCode && starterCode.trim()) {
    p += '### Format: You will use the following starter code to write the solution to the problem and enclose ' +
      'your code within delimiters.\n```python\n' + starterCode.trim() + '\n```\n\n';
  } else {
    p += '### Format: Read the inputs from stdin solve the problem and write the answer to stdout (do not directly ' +
      'test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python ' +
      'program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.\n```python\n# YOUR CODE HERE\n```\n\n';
  }
  return p + '### Answer: (use the provided format with backticks)\n';
}

/**
 * The prompt text of a problem in the requested style. 'native' keeps the dataset's own
 * style (HumanEval continuation, the others instructions); 'instruction' turns HumanEval
 * into an instruction too.
 */
export function problemPrompt(problem: Problem, style: 'native' | 'instruction' = 'native'): string {
  if (style === 'instruction' && problem.promptStyle === 'completion') return humanEvalInstruction(problem.prompt);
  return problem.prompt;
}
