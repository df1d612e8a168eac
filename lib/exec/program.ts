// Turns a Problem and a candidate program into the harness's request.
import type { Problem } from '../data/types.js';
import type { ExecLimits } from './types.js';

/** What the Python harness receives (python/murphy_exec/server.py). */
export interface HarnessRequest {
  id: number;
  kind: 'humaneval' | 'assert' | 'pytest' | 'stdio' | 'functional';
  solution: string;
  test?: string;
  entryPoint?: string;
  asserts?: string[];
  setup?: string;
  imports?: string;
  testCode?: string;
  cases?: { input: string; output: string }[];
  fnName?: string;
  limits: ExecLimits;
  continueAfterTimeout: boolean;
}

function definesTopLevel(code: string, name: string): boolean {
  return new RegExp(`^(?:async\\s+)?def\\s+${name.replace(/[^A-Za-z0-9_]/g, '')}\\s*\\(`, 'm').test(code);
}

/**
 * The program to run for a HumanEval-style problem. The candidate may be a continuation of
 * the prompt (the benchmark's own protocol), the prompt and its continuation, or a whole
 * function (instruction-tuned models): in the last case the prompt still runs first so that
 * its imports and helper functions exist, and the candidate's definition replaces the stub.
 */
export function humanEvalProgram(prompt: string, entryPoint: string, code: string): string {
  if (code.startsWith(prompt)) return code;
  if (definesTopLevel(code, entryPoint)) return prompt.trimEnd() + '\n\n' + code;
  return prompt + code;
}

/** Normalises line endings and tabs-vs-CRLF noise that would otherwise break Python. */
export function normaliseCode(code: string): string {
  return code.replace(/\r\n?/g, '\n');
}

export function buildRequest(id: number, problem: Problem, code: string, limits: ExecLimits, continueAfterTimeout: boolean): HarnessRequest {
  const src = normaliseCode(code);
  const t = problem.tests;
  const base = { id, limits, continueAfterTimeout };
  switch (t.kind) {
    case 'humaneval':
      return { ...base, kind: 'humaneval', solution: humanEvalProgram(t.prompt, t.entryPoint, src), test: t.test, entryPoint: t.entryPoint };
    case 'assert':
      return { ...base, kind: 'assert', solution: src, asserts: t.asserts, setup: t.setup ?? '', imports: t.imports ?? '' };
    case 'pytest':
      return { ...base, kind: 'pytest', solution: src, testCode: t.testCode };
    case 'stdio':
      return { ...base, kind: 'stdio', solution: src, cases: t.cases };
    case 'functional':
      return { ...base, kind: 'functional', solution: src, cases: t.cases, fnName: t.fnName };
  }
}
