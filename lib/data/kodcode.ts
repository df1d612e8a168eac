// KodCode: the pipeline's JSON arrays (`test_code`) and KodCode-V1 rows (`test`).
import { optStr, parseRecords, readText, str } from './io.js';
import { kodCodePrompt } from './prompts.js';
import type { Problem } from './types.js';

export function kodCodeFromRecords(recs: Record<string, unknown>[], path = 'kodcode'): Problem[] {
  return recs.map((r, i) => {
    const where = `${path}: record ${i + 1}`;
    const testCode = optStr(r, 'test_code') ?? optStr(r, 'test');
    if (testCode === undefined) throw new Error(`${where}: needs "test_code" (pipeline files) or "test" (KodCode-V1)`);
    const info = Array.isArray(r.test_info) ? (r.test_info as unknown[]) : [];
    const decls: string[] = [];
    let entry: string | undefined;
    for (const t of info) {
      if (t && typeof t === 'object') {
        const o = t as Record<string, unknown>;
        if (typeof o.function_declaration === 'string' && o.function_declaration.trim()) decls.push(o.function_declaration);
        if (!entry && typeof o.function_name === 'string') entry = o.function_name;
      }
    }
    const qid = optStr(r, 'question_id') ?? String(i);
    const difficulty = optStr(r, 'gpt_difficulty');
    return {
      id: `kodcode/${qid}`,
      source: 'kodcode',
      prompt: kodCodePrompt(str(r, 'question', where), decls),
      promptStyle: 'instruction',
      entryPoint: entry,
      tests: { kind: 'pytest', testCode },
      visibleTests: [0],
      difficulty,
      referenceSolution: optStr(r, 'solution'),
      meta: { subset: r.subset, style: r.style },
    } satisfies Problem;
  });
}

export async function loadKodCode(path: string): Promise<Problem[]> {
  return kodCodeFromRecords(parseRecords(await readText(path), path), path);
}
