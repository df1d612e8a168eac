// Loading a dataset for training or evaluation: the file exists, has problems, and every
// problem has tests (rewards and pass rates need them). Errors are one-line ConfigErrors.
import { existsSync } from 'node:fs';
import { ConfigError } from '../config/index.js';
import { loadDataset, type DatasetFormat } from './load.js';
import type { Problem } from './types.js';

/** True when the problem has at least one test. */
export function hasTests(p: Problem): boolean {
  const t = p.tests;
  switch (t.kind) {
    case 'humaneval':
      return t.test.trim().length > 0;
    case 'assert':
      return t.asserts.length > 0;
    case 'pytest':
      return /def\s+test/.test(t.testCode);
    case 'stdio':
    case 'functional':
      return t.cases.length > 0;
    default:
      return false;
  }
}

export interface SplitChoice {
  /** Comma-separated split names to keep (e.g. "test", "train,validation"). */
  split?: string;
  /** Split kept when `split` is not given and the dataset has splits (eval: "test"). */
  defaultSplit?: string;
}

/**
 * Keeps the problems of the chosen split(s). A dataset without splits (no problem has one)
 * is returned whole unless a split was asked for explicitly, which is an error.
 */
export function selectSplit(problems: Problem[], path: string, choice: SplitChoice): { problems: Problem[]; split: string | null } {
  const available = [...new Set(problems.map((p) => p.split).filter((s): s is string => typeof s === 'string'))].sort();
  if (available.length === 0) {
    if (choice.split !== undefined) throw new ConfigError(`dataset ${path} has no splits; drop --split ${choice.split}`);
    return { problems, split: null };
  }
  const want = (choice.split ?? choice.defaultSplit)?.split(',').map((s) => s.trim()).filter(Boolean);
  if (!want || want.length === 0) return { problems, split: null };
  const unknown = want.filter((w) => !available.includes(w));
  if (unknown.length) throw new ConfigError(`dataset ${path} has no split ${unknown.map((u) => `"${u}"`).join(', ')} (it has ${available.join(', ')}; --split)`);
  const kept = problems.filter((p) => p.split !== undefined && want.includes(p.split));
  return { problems: kept, split: want.join(',') };
}

/**
 * Loads and checks a dataset: the file exists, has problems, and every problem has tests.
 * With `splits`, keeps the chosen split (before the limit).
 */
export async function loadTrainingProblems(path: string, format: string, limit: number | null, splits?: SplitChoice): Promise<Problem[]> {
  if (!existsSync(path)) throw new ConfigError(`dataset file not found: ${path} (config key "dataset", --dataset)`);
  let problems: Problem[];
  try {
    problems = await loadDataset(path, { format: format as DatasetFormat });
  } catch (e) {
    const msg = (e as Error).message;
    throw new ConfigError(msg.startsWith(path) ? `cannot load dataset ${msg}` : `cannot load dataset ${path}: ${msg}`);
  }
  if (splits) problems = selectSplit(problems, path, splits).problems;
  if (limit !== null) problems = problems.slice(0, limit);
  if (problems.length === 0) throw new ConfigError(`dataset ${path} has no problems${splits ? ' in the chosen split' : ''}`);
  const bad = problems.filter((p) => !hasTests(p));
  if (bad.length > 0) {
    throw new ConfigError(`dataset ${path}: ${bad.length} of ${problems.length} problems have no tests (first: ${bad[0]!.id}); rewards need tests`);
  }
  return problems;
}
