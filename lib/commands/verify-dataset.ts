// `murphy-native verify-dataset PATH`: run every problem's reference solution through the
// executor and report how many pass (run it on your data before training on it).
import { writeFile } from 'node:fs/promises';
import type { CommandModule } from 'yargs';
import type { LoadOptions, MbppSplit } from '../data/index.js';
import { DATASET_FORMATS, type DatasetFormat, type Problem } from '../data/types.js';
import type { ExecutionResult, IsolationReport } from '../exec/index.js';

export interface VerifyFailure {
  id: string;
  reward: number;
  passedTests: number;
  totalTests: number;
  /** Short reason: the first failing test's error, or "no reference solution". */
  reason: string;
  feedback: string;
}

export interface VerifyReport {
  path: string;
  format: string;
  /** Problems in the file (after split/limit). */
  total: number;
  /** Problems with a reference solution that ran. */
  checked: number;
  passed: number;
  failures: VerifyFailure[];
  /** Ids of problems without a reference solution (not counted as failures). */
  noReference: string[];
  isolation: IsolationReport;
  seconds: number;
}

export interface VerifyOptions extends LoadOptions {
  python?: string;
  workers?: number;
  testTimeout?: number;
  programTimeout?: number;
  useBubblewrap?: boolean;
  onProgress?: (done: number, total: number) => void;
}

function reasonOf(r: ExecutionResult): string {
  if (r.syntaxError) return `SyntaxError: ${r.syntaxError.message}${r.syntaxError.line ? ` (line ${r.syntaxError.line})` : ''}`;
  if (r.setupError) return `${r.setupError.errorType}: ${r.setupError.message}`.slice(0, 300);
  if (r.errors.length && r.tests.length === 1 && r.tests[0].errorType === 'SandboxError') return `executor error: ${r.errors[0]}`;
  const t = r.tests.find((x) => !x.passed);
  if (!t) return 'no tests';
  const what = t.status === 'timeout' ? 'timed out' : [t.errorType, t.message].filter(Boolean).join(': ') || 'failed';
  return `${t.name}: ${what}`.slice(0, 300);
}

/** Verifies a dataset file; the executor is created and closed here. */
export async function verifyDataset(path: string, o: VerifyOptions = {}): Promise<VerifyReport> {
  const t0 = performance.now();
  // loaded here, not with the CLI's command list
  const [{ loadDataset }, { PythonExecutor }] = await Promise.all([import('../data/index.js'), import('../exec/index.js')]);
  const problems: Problem[] = await loadDataset(path, o);
  const ex = new PythonExecutor({
    python: o.python,
    workers: o.workers,
    useBubblewrap: o.useBubblewrap,
    limits: { testTimeout: o.testTimeout ?? 10, programTimeout: o.programTimeout ?? 60 },
    feedback: { maxFailures: 3, maxChars: 1500 },
  });
  try {
    const isolation = await ex.isolation();
    const withRef = problems.filter((p) => p.referenceSolution !== undefined);
    let done = 0;
    const results = await Promise.all(
      withRef.map(async (p) => {
        const r = await ex.run(p, p.referenceSolution as string);
        o.onProgress?.(++done, withRef.length);
        return r;
      }),
    );
    const failures: VerifyFailure[] = [];
    results.forEach((r, i) => {
      if (!r.passed) {
        failures.push({ id: withRef[i].id, reward: r.reward, passedTests: r.numPassed, totalTests: r.numTests, reason: reasonOf(r), feedback: r.feedback });
      }
    });
    return {
      path,
      format: problems[0]?.source ?? (o.format ?? 'auto'),
      total: problems.length,
      checked: withRef.length,
      passed: withRef.length - failures.length,
      failures,
      noReference: problems.filter((p) => p.referenceSolution === undefined).map((p) => p.id),
      isolation,
      seconds: (performance.now() - t0) / 1000,
    };
  } finally {
    await ex.close();
  }
}

export function formatVerify(r: VerifyReport): string {
  const lines: string[] = [];
  // One short line: the weaker sandbox's limits were said once when the executor started.
  lines.push(
    `${r.path} (${r.format}): ${r.passed}/${r.checked} reference solutions pass` +
      (r.noReference.length ? `; ${r.noReference.length} of ${r.total} problems have no reference solution` : '') +
      ` [${r.seconds.toFixed(1)} s, ${r.isolation.bubblewrap ? 'bubblewrap' : 'weaker sandbox'}]`,
  );
  for (const f of r.failures) {
    lines.push('');
    lines.push(`FAIL ${f.id} (${f.passedTests}/${f.totalTests} tests): ${f.reason}`);
    lines.push(f.feedback.split('\n').map((l) => '    ' + l).join('\n'));
  }
  return lines.join('\n');
}

interface Args {
  path: string;
  format: DatasetFormat;
  split?: string;
  limit?: number;
  json?: string;
  python?: string;
  workers?: number;
  timeout: number;
  'program-timeout': number;
  'decoded-tests'?: string;
  'public-only': boolean;
  bwrap?: boolean;
}

export const verifyDatasetCommand: CommandModule<object, Args> = {
  command: 'verify-dataset <path>',
  describe: "Run every problem's reference solution through the sandboxed executor and list failures",
  builder: (y) =>
    y
      .positional('path', { type: 'string', demandOption: true, describe: 'dataset file (HumanEval .jsonl[.gz], MBPP, KodCode, LiveCodeBench, generic JSONL)' })
      .option('format', { choices: DATASET_FORMATS as DatasetFormat[], default: 'auto' as DatasetFormat, describe: 'file format (auto-detected by default)' })
      .option('split', { type: 'string', describe: 'MBPP split(s), comma-separated: prompt,test,validation,train' })
      .option('limit', { type: 'number', describe: 'check only the first N problems' })
      .option('json', { type: 'string', describe: 'also write the report as JSON to this file' })
      .option('python', { type: 'string', describe: 'Python interpreter (default $MURPHY_PYTHON or python3)' })
      .option('workers', { type: 'number', describe: 'programs run at once (default: cores)' })
      .option('timeout', { type: 'number', default: 10, describe: 'seconds per test' })
      .option('program-timeout', { type: 'number', default: 60, describe: 'seconds per program' })
      .option('decoded-tests', { type: 'string', describe: 'LiveCodeBench (SandboxFusion packaging): decoded tests JSON' })
      .option('public-only', { type: 'boolean', default: false, describe: 'LiveCodeBench: load problems whose private tests are still encoded with public tests only' })
      .option('bwrap', { type: 'boolean', describe: '--bwrap requires bubblewrap, --no-bwrap disables it (default: use it when usable)' }) as never,
  handler: async (a) => {
    const report = await verifyDataset(a.path, {
      format: a.format,
      split: a.split ? (a.split.split(',').map((s) => s.trim()) as MbppSplit[]) : undefined,
      limit: a.limit,
      python: a.python,
      workers: a.workers,
      testTimeout: a.timeout,
      programTimeout: a['program-timeout'],
      decodedTests: a['decoded-tests'],
      publicOnly: a['public-only'],
      useBubblewrap: a.bwrap,
      onProgress: process.stderr.isTTY ? (d, t) => process.stderr.write(`\r${d}/${t}`) : undefined,
    });
    if (process.stderr.isTTY) process.stderr.write('\r');
    process.stdout.write(formatVerify(report) + '\n');
    if (a.json) {
      const { isolation, ...rest } = report;
      await writeFile(a.json, JSON.stringify({ ...rest, isolation }, null, 2) + '\n');
    }
    if (report.failures.length) process.exitCode = 1;
  },
};

export default verifyDatasetCommand;
