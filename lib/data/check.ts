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

/** Loads and checks a dataset: the file exists, has problems, and every problem has tests. */
export async function loadTrainingProblems(path: string, format: string, limit: number | null): Promise<Problem[]> {
  if (!existsSync(path)) throw new ConfigError(`dataset file not found: ${path} (config key "dataset", --dataset)`);
  let problems: Problem[];
  try {
    problems = await loadDataset(path, { format: format as DatasetFormat, limit: limit ?? undefined });
  } catch (e) {
    throw new ConfigError(`cannot load dataset ${path}: ${(e as Error).message}`);
  }
  if (problems.length === 0) throw new ConfigError(`dataset ${path} has no problems`);
  const bad = problems.filter((p) => !hasTests(p));
  if (bad.length > 0) {
    throw new ConfigError(`dataset ${path}: ${bad.length} of ${problems.length} problems have no tests (first: ${bad[0]!.id}); rewards need tests`);
  }
  return problems;
}
