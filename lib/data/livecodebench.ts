// LiveCodeBench: the original code_generation_lite rows and SandboxFusion's packaging.
//
// Private tests in the published files are base64(zlib(pickle(JSON string))). JavaScript
// cannot read a pickle safely, so the loader accepts them only in decoded JSON form; run
// `python3 python/murphy_exec/decode_lcb.py IN.jsonl OUT.jsonl` (on files you trust: it
// unpickles) to produce it. See docs/executor.md.
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { optStr, parseRecords, readText, str } from './io.js';
import { liveCodeBenchPrompt } from './prompts.js';
import type { IOCase, Problem } from './types.js';

export interface LiveCodeBenchOptions {
  /**
   * For SandboxFusion-packaged files: a JSON array [{id, fn_name, inputs, outputs}] of
   * decoded tests. Default: `<name>.tests-decoded.json` beside the file, when present.
   */
  decodedTests?: string;
  /** Load problems whose private tests are still encoded with their public tests only (instead of failing). */
  publicOnly?: boolean;
}

interface RawCase {
  input: string;
  output: string;
  testtype?: string;
}

function isEncodedBlob(s: string): boolean {
  const t = s.trim();
  return t.length > 0 && !t.startsWith('[') && !t.startsWith('{');
}

function parseCases(v: unknown, where: string): RawCase[] {
  const arr: unknown = typeof v === 'string' ? JSON.parse(v) : v;
  if (!Array.isArray(arr)) throw new Error(`${where}: test cases must be a list`);
  return arr.map((c, i) => {
    const o = c as Record<string, unknown>;
    if (!o || typeof o.input !== 'string' || typeof o.output !== 'string') throw new Error(`${where}: case ${i + 1} needs string input and output`);
    return { input: o.input, output: o.output, testtype: typeof o.testtype === 'string' ? o.testtype : undefined };
  });
}

function liveCodeBenchOriginal(r: Record<string, unknown>, where: string, opts: LiveCodeBenchOptions): Problem {
  const pub = parseCases(r.public_test_cases ?? '[]', `${where} public_test_cases`);
  let priv: RawCase[] = [];
  const rawPriv = r.private_test_cases;
  if (typeof rawPriv === 'string' && isEncodedBlob(rawPriv)) {
    if (!opts.publicOnly) {
      throw new Error(
        `${where}: private_test_cases is a compressed pickle; decode it first with ` +
          '`python3 python/murphy_exec/decode_lcb.py IN.jsonl OUT.jsonl` (or pass publicOnly)',
      );
    }
  } else if (rawPriv !== undefined && rawPriv !== null && rawPriv !== '') {
    priv = parseCases(rawPriv, `${where} private_test_cases`);
  }
  let fnName: string | undefined;
  const metaRaw = r.metadata;
  const meta = typeof metaRaw === 'string' && metaRaw.trim() ? (JSON.parse(metaRaw) as Record<string, unknown>) : (metaRaw as Record<string, unknown> | undefined);
  if (meta && typeof meta.func_name === 'string') fnName = meta.func_name;
  const all = [...pub, ...priv];
  const functional = all.some((c) => c.testtype === 'functional') || (fnName !== undefined && all.every((c) => c.testtype !== 'stdin'));
  const cases: IOCase[] = all.map((c) => ({ input: c.input, output: c.output }));
  const starter = optStr(r, 'starter_code');
  const platform = optStr(r, 'platform') ?? 'lcb';
  const qid = optStr(r, 'question_id') ?? '?';
  if (functional && !fnName) throw new Error(`${where}: functional tests but no metadata.func_name`);
  return {
    id: `livecodebench/${platform}/${qid}`,
    source: 'livecodebench',
    prompt: liveCodeBenchPrompt(str(r, 'question_content', where), starter),
    promptStyle: 'instruction',
    entryPoint: functional ? fnName : undefined,
    starterCode: starter || undefined,
    tests: functional ? { kind: 'functional', fnName: fnName as string, cases } : { kind: 'stdio', cases },
    visibleTests: pub.map((_, i) => i),
    difficulty: optStr(r, 'difficulty'),
    // LiveCodeBench has no reference solutions; a `solution` field (our samples carry one) is used when present.
    referenceSolution: optStr(r, 'solution'),
    meta: { title: r.question_title, contestDate: r.contest_date, publicTests: pub.length, privateTests: priv.length },
  };
}

interface DecodedEntry {
  id: number | string;
  task_id?: string;
  fn_name?: string | null;
  inputs: string[];
  outputs: string[];
  difficulty?: string;
}

function liveCodeBenchSandboxFusion(r: Record<string, unknown>, where: string, decoded: Map<string, DecodedEntry> | undefined): Problem {
  let labels: Record<string, unknown> = {};
  if (typeof r.labels === 'string') labels = JSON.parse(r.labels) as Record<string, unknown>;
  else if (r.labels && typeof r.labels === 'object') labels = r.labels as Record<string, unknown>;
  const taskId = typeof labels.task_id === 'string' ? labels.task_id : String(r.id);
  let entry: DecodedEntry | undefined = decoded?.get(String(r.id));
  const test = r.test;
  if (!entry && typeof test === 'string' && !isEncodedBlob(test)) {
    // Already-decoded `test`: {"input_output": "<json>"} or the JSON itself.
    let v = JSON.parse(test) as Record<string, unknown>;
    if (typeof v.input_output === 'string') v = JSON.parse(v.input_output) as Record<string, unknown>;
    entry = { id: String(r.id), fn_name: (v.fn_name as string | null) ?? null, inputs: v.inputs as string[], outputs: v.outputs as string[] };
  }
  if (!entry) {
    throw new Error(
      `${where}: the "test" field is a compressed pickle; provide decoded tests (a <name>.tests-decoded.json beside the ` +
        'file, or run `python3 python/murphy_exec/decode_lcb.py IN.jsonl OUT.jsonl`)',
    );
  }
  const cases: IOCase[] = entry.inputs.map((input, i) => ({ input, output: entry.outputs[i] }));
  const content = str(r, 'content', where);
  const starter = /```python\n(class Solution[\s\S]*?)```/.exec(content)?.[1];
  const fn = entry.fn_name ?? undefined;
  return {
    id: `livecodebench/${taskId}`,
    source: 'livecodebench',
    prompt: content,
    promptStyle: 'instruction',
    entryPoint: fn,
    starterCode: fn ? starter : undefined,
    tests: fn ? { kind: 'functional', fnName: fn, cases } : { kind: 'stdio', cases },
    visibleTests: cases.length ? [0] : [],
    difficulty: typeof labels.difficulty === 'string' ? labels.difficulty : entry.difficulty,
    // SandboxFusion's canonical_solution is a placeholder (`import sys; sys.exit(0)`), not a solution.
    meta: { packaging: 'sandboxfusion', category: labels.category, placeholderSolution: r.canonical_solution },
  };
}

export async function loadDecodedTests(path: string): Promise<Map<string, DecodedEntry>> {
  const recs = parseRecords(await readText(path), path);
  const m = new Map<string, DecodedEntry>();
  for (const r of recs) m.set(String(r.id), r as unknown as DecodedEntry);
  return m;
}

export function liveCodeBenchFromRecords(
  recs: Record<string, unknown>[],
  path = 'livecodebench',
  opts: LiveCodeBenchOptions = {},
  decoded?: Map<string, DecodedEntry>,
): Problem[] {
  return recs.map((r, i) => {
    const where = `${path}: record ${i + 1}`;
    if (typeof r.question_content === 'string') return liveCodeBenchOriginal(r, where, opts);
    if (typeof r.content === 'string') return liveCodeBenchSandboxFusion(r, where, decoded);
    throw new Error(`${where}: neither LiveCodeBench (question_content) nor SandboxFusion (content) fields`);
  });
}

export async function loadLiveCodeBench(path: string, opts: LiveCodeBenchOptions = {}): Promise<Problem[]> {
  const recs = parseRecords(await readText(path), path);
  let decodedPath = opts.decodedTests;
  if (!decodedPath) {
    const guess = join(dirname(path), basename(path).replace(/\.jsonl?$/, '') + '.tests-decoded.json');
    if (existsSync(guess)) decodedPath = guess;
  }
  const decoded = decodedPath ? await loadDecodedTests(decodedPath) : undefined;
  return liveCodeBenchFromRecords(recs, path, opts, decoded);
}
