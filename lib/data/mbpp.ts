// MBPP (google-research/mbpp): mbpp.jsonl (974 tasks) and sanitized-mbpp.json (427 tasks).
import { optStr, parseRecords, readText, str, strList } from './io.js';
import { mbppPrompt } from './prompts.js';
import type { Problem } from './types.js';

export type MbppSplit = 'prompt' | 'test' | 'validation' | 'train';

/** The standard task-id splits: 1–10 prompt (few-shot), 11–510 test, 511–600 validation, 601–974 train. */
export function mbppSplit(taskId: number): MbppSplit {
  if (taskId <= 10) return 'prompt';
  if (taskId <= 510) return 'test';
  if (taskId <= 600) return 'validation';
  return 'train';
}

/** The name of the function the tests call (from the first assert), if it can be found. */
export function mbppEntryPoint(asserts: string[]): string | undefined {
  const m = /assert\s+(?:not\s+)?\(?\s*(?:set\(|math\.isclose\(|sorted\()?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(/.exec(asserts[0] ?? '');
  return m ? m[1] : undefined;
}

export interface MbppOptions {
  /** Keep only these splits. */
  split?: MbppSplit | MbppSplit[];
}

export function mbppFromRecords(recs: Record<string, unknown>[], path = 'mbpp', opts: MbppOptions = {}): Problem[] {
  const splits = opts.split === undefined ? undefined : new Set(Array.isArray(opts.split) ? opts.split : [opts.split]);
  const out: Problem[] = [];
  recs.forEach((r, i) => {
    const where = `${path}: record ${i + 1}`;
    const taskId = r.task_id;
    if (typeof taskId !== 'number') throw new Error(`${where}: field "task_id" must be a number`);
    const sanitized = typeof r.prompt === 'string' && r.text === undefined;
    const text = sanitized ? str(r, 'prompt', where) : str(r, 'text', where);
    const asserts = strList(r, 'test_list', where);
    const code = str(r, 'code', where).replace(/\r\n/g, '\n');
    const imports = Array.isArray(r.test_imports) ? (r.test_imports as unknown[]).filter((x): x is string => typeof x === 'string').join('\n') : '';
    const setup = (optStr(r, 'test_setup_code') ?? '').replace(/\r\n/g, '\n');
    const split = mbppSplit(taskId);
    if (splits && !splits.has(split)) return;
    out.push({
      id: `mbpp/${taskId}`,
      source: 'mbpp',
      prompt: mbppPrompt(text, asserts[0]),
      promptStyle: 'instruction',
      entryPoint: mbppEntryPoint(asserts),
      tests: { kind: 'assert', asserts, ...(setup.trim() ? { setup } : {}), ...(imports.trim() ? { imports } : {}) },
      visibleTests: asserts.length ? [0] : [],
      referenceSolution: code,
      split,
      meta: { sanitized, ...(Array.isArray(r.challenge_test_list) && r.challenge_test_list.length ? { challengeTests: r.challenge_test_list } : {}) },
    });
  });
  return out;
}

/** Loads mbpp.jsonl or sanitized-mbpp.json (either form is detected from the records). */
export async function loadMbpp(path: string, opts: MbppOptions = {}): Promise<Problem[]> {
  return mbppFromRecords(parseRecords(await readText(path), path), path, opts);
}
