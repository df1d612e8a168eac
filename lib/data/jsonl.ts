// The generic JSONL format for users' own problems (docs/executor.md, "Generic JSONL").
import { optStr, parseRecords, readText, str, strList } from './io.js';
import type { IOCase, Problem, ProblemTests } from './types.js';

function cases(v: unknown, where: string): IOCase[] {
  if (!Array.isArray(v)) throw new Error(`${where}: expected a list of {input, output}`);
  return v.map((c, i) => {
    const o = c as Record<string, unknown>;
    if (!o || typeof o.input !== 'string' || typeof o.output !== 'string') throw new Error(`${where}: case ${i + 1} needs string input and output`);
    return { input: o.input, output: o.output };
  });
}

export function jsonlFromRecords(recs: Record<string, unknown>[], path = 'jsonl'): Problem[] {
  return recs.map((r, i) => {
    const where = `${path}: record ${i + 1}`;
    const id = r.id === undefined ? String(i) : String(r.id);
    const prompt = str(r, 'prompt', where);
    let tests: ProblemTests;
    let entryPoint = optStr(r, 'entry_point');
    let style: 'instruction' | 'completion' = r.prompt_style === 'completion' ? 'completion' : 'instruction';
    if (Array.isArray(r.asserts)) {
      tests = { kind: 'assert', asserts: strList(r, 'asserts', where), setup: optStr(r, 'setup'), imports: optStr(r, 'imports') };
    } else if (typeof r.test_code === 'string') {
      tests = { kind: 'pytest', testCode: r.test_code };
    } else if (r.stdio !== undefined) {
      tests = { kind: 'stdio', cases: cases(r.stdio, `${where} stdio`) };
    } else if (r.functional && typeof r.functional === 'object') {
      const f = r.functional as Record<string, unknown>;
      const fnName = str(f, 'fn_name', `${where} functional`);
      tests = { kind: 'functional', fnName, cases: cases(f.cases, `${where} functional.cases`) };
      entryPoint ??= fnName;
    } else if (typeof r.humaneval_test === 'string') {
      if (!entryPoint) throw new Error(`${where}: humaneval_test needs entry_point`);
      tests = { kind: 'humaneval', prompt, test: r.humaneval_test, entryPoint };
      if (r.prompt_style === undefined) style = 'completion';
    } else {
      throw new Error(`${where}: needs one of asserts, test_code, stdio, functional, humaneval_test`);
    }
    const visible = Array.isArray(r.visible_tests) ? (r.visible_tests as unknown[]).filter((x): x is number => typeof x === 'number') : [0];
    return {
      id,
      source: 'jsonl',
      prompt,
      promptStyle: style,
      entryPoint,
      tests,
      visibleTests: visible,
      difficulty: optStr(r, 'difficulty'),
      referenceSolution: optStr(r, 'solution'),
    } satisfies Problem;
  });
}

export async function loadJsonlProblems(path: string): Promise<Problem[]> {
  return jsonlFromRecords(parseRecords(await readText(path), path), path);
}
