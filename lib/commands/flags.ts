// Checks of command-line flags that are not configuration keys (those are checked by the
// config schema): numeric ranges and output files, for every command, before its work starts.
import { checkOutputDir, checkOutputFile } from '../train/rundir.js';

/** Bad command-line usage: reported as one line with a pointer to --help. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export interface FlagRule {
  /** Whole numbers only. */
  int?: boolean;
  min?: number;
  max?: number;
  /** Strictly greater than this. */
  above?: number;
}

const count: FlagRule = { int: true, min: 1 };
const seconds: FlagRule = { above: 0 };

/** Range of each numeric flag, per command (flags in camelCase, as yargs gives them). */
export const FLAG_RULES: Record<string, Record<string, FlagRule>> = {
  eval: { limit: count, k: count, n: count, maxTokens: count, workers: count, testTimeout: seconds, temperature: { min: 0 }, topP: { above: 0, max: 1 }, seed: { int: true, min: 0 } },
  'verify-dataset': { limit: count, workers: count, timeout: seconds, programTimeout: seconds },
  serve: { port: { int: true, min: 0, max: 65535 }, maxBatch: count },
  report: { maxTrees: { int: true, min: 0 } },
  train: { nprocPerNode: { int: true, min: 1 } },
  'init-model': { seed: { int: true, min: 0 }, initStd: { above: 0 }, shardMb: { min: 0 }, vocab: count, hidden: count, intermediate: count, layers: count, heads: count, kvHeads: count, headDim: count, maxPositions: count },
};

/** Flags naming a file a command writes: checked to be writable before the work starts. */
export const OUTPUT_FILE_FLAGS: Record<string, string[]> = {
  eval: ['out'],
  'verify-dataset': ['json'],
  report: ['out'],
};

/** Flags naming a directory a command creates or fills: checked the same way. */
export const OUTPUT_DIR_FLAGS: Record<string, string[]> = {
  'init-model': ['out'],
  train: ['out'],
};

const kebab = (k: string): string => k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());

function describe(r: FlagRule): string {
  const parts: string[] = [r.int ? 'an integer' : 'a number'];
  if (r.min !== undefined) parts.push(`>= ${r.min}`);
  if (r.above !== undefined) parts.push(`> ${r.above}`);
  if (r.max !== undefined) parts.push(`<= ${r.max}`);
  return parts.join(' ');
}

/** Throws UsageError for the first flag of `command` outside its range. */
export function checkFlags(command: string, argv: Record<string, unknown>): void {
  for (const [key, rule] of Object.entries(FLAG_RULES[command] ?? {})) {
    const v = argv[key];
    if (v === undefined) continue;
    const n = typeof v === 'number' ? v : NaN;
    const ok = Number.isFinite(n) && (!rule.int || Number.isInteger(n)) && (rule.min === undefined || n >= rule.min) && (rule.above === undefined || n > rule.above) && (rule.max === undefined || n <= rule.max);
    if (!ok) {
      const given = typeof v === 'number' && Number.isNaN(v) ? 'not a number' : JSON.stringify(v);
      throw new UsageError(`--${kebab(key)} must be ${describe(rule)}, got ${given}`);
    }
  }
  for (const key of OUTPUT_FILE_FLAGS[command] ?? []) {
    const v = argv[key];
    if (typeof v === 'string') checkOutputFile(v, `--${key}`);
  }
  for (const key of OUTPUT_DIR_FLAGS[command] ?? []) {
    const v = argv[key];
    if (typeof v === 'string') checkOutputDir(v, `--${key}`);
  }
}
