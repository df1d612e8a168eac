// HumanEval (openai/human-eval): HumanEval.jsonl(.gz).
import { parseRecords, readText, str } from './io.js';
import type { Problem } from './types.js';

export function humanEvalFromRecords(recs: Record<string, unknown>[], path = 'HumanEval'): Problem[] {
  return recs.map((r, i) => {
    const where = `${path}: record ${i + 1}`;
    const prompt = str(r, 'prompt', where);
    const entryPoint = str(r, 'entry_point', where);
    const canonical = typeof r.canonical_solution === 'string' ? r.canonical_solution : undefined;
    return {
      id: str(r, 'task_id', where),
      source: 'humaneval',
      prompt,
      promptStyle: 'completion',
      entryPoint,
      tests: { kind: 'humaneval', prompt, test: str(r, 'test', where), entryPoint },
      visibleTests: [0],
      referenceSolution: canonical === undefined ? undefined : prompt + canonical,
    } satisfies Problem;
  });
}

export async function loadHumanEval(path: string): Promise<Problem[]> {
  return humanEvalFromRecords(parseRecords(await readText(path), path), path);
}
