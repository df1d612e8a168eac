// One entry point for every dataset format, with detection from the file's records.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { humanEvalFromRecords } from './humaneval.js';
import { parseRecords, readText } from './io.js';
import { jsonlFromRecords } from './jsonl.js';
import { kodCodeFromRecords } from './kodcode.js';
import { liveCodeBenchFromRecords, loadDecodedTests, type LiveCodeBenchOptions } from './livecodebench.js';
import { mbppFromRecords, type MbppSplit } from './mbpp.js';
import type { Problem } from './types.js';
import { existsSync } from 'node:fs';
import { basename } from 'node:path';

export { DATASET_FORMATS, type DatasetFormat } from './types.js';
import type { DatasetFormat } from './types.js';

export interface LoadOptions extends LiveCodeBenchOptions {
  format?: DatasetFormat;
  /** MBPP only: keep these splits. */
  split?: MbppSplit | MbppSplit[];
  /** Keep at most this many problems (after the split). */
  limit?: number;
}

/** Guesses the format from the first record's fields. */
export function detectFormat(rec: Record<string, unknown>): Exclude<DatasetFormat, 'auto'> {
  if (typeof rec.task_id === 'string' && typeof rec.entry_point === 'string' && typeof rec.canonical_solution === 'string') return 'humaneval';
  if (typeof rec.task_id === 'number' && Array.isArray(rec.test_list)) return 'mbpp';
  if (typeof rec.question === 'string' && (typeof rec.test_code === 'string' || typeof rec.test === 'string')) return 'kodcode';
  if (typeof rec.question_content === 'string' || (typeof rec.content === 'string' && rec.labels !== undefined)) return 'livecodebench';
  if (typeof rec.prompt === 'string') return 'jsonl';
  throw new Error(`cannot tell the dataset format from fields: ${Object.keys(rec).join(', ')} (pass --format)`);
}

export async function loadDataset(path: string, opts: LoadOptions = {}): Promise<Problem[]> {
  const recs = parseRecords(await readText(path), path);
  if (recs.length === 0) throw new Error(`${path} is empty: no problem records`);
  const format = !opts.format || opts.format === 'auto' ? detectFormat(recs[0]) : opts.format;
  let problems: Problem[];
  switch (format) {
    case 'humaneval':
      problems = humanEvalFromRecords(recs, path);
      break;
    case 'mbpp':
      problems = mbppFromRecords(recs, path, { split: opts.split });
      break;
    case 'kodcode':
      problems = kodCodeFromRecords(recs, path);
      break;
    case 'livecodebench': {
      let decodedPath = opts.decodedTests;
      if (!decodedPath) {
        const guess = join(dirname(path), basename(path).replace(/\.jsonl?(\.gz)?$/, '') + '.tests-decoded.json');
        if (existsSync(guess)) decodedPath = guess;
      }
      const decoded = decodedPath ? await loadDecodedTests(decodedPath) : undefined;
      problems = liveCodeBenchFromRecords(recs, path, opts, decoded);
      break;
    }
    case 'jsonl':
      problems = jsonlFromRecords(recs, path);
      break;
    default:
      throw new Error(`unknown format ${String(format)}`);
  }
  return opts.limit !== undefined ? problems.slice(0, opts.limit) : problems;
}

/** The package's own folder of sample problems (assets/data), a few of each format. */
export function sampleDataDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // lib/data (tsx) or dist/data (compiled): assets/ is two levels up either way.
  return join(here, '..', '..', 'assets', 'data');
}

/** The shipped samples, by format: usable anywhere, without ../shared. */
export const SAMPLE_FILES = {
  humaneval: 'humaneval-sample.jsonl',
  mbpp: 'mbpp-sample.jsonl',
  mbppSanitized: 'sanitized-mbpp-sample.json',
  kodcode: 'kodcode-sample.json',
  livecodebench: 'livecodebench-sample.jsonl',
  jsonl: 'custom-sample.jsonl',
} as const;

export async function loadSample(name: keyof typeof SAMPLE_FILES): Promise<Problem[]> {
  return loadDataset(join(sampleDataDir(), SAMPLE_FILES[name]));
}
