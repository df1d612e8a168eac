// The one Problem type every dataset loader produces and the executor consumes.

/** Where a problem came from. */
export type DatasetSource = 'humaneval' | 'mbpp' | 'kodcode' | 'livecodebench' | 'jsonl';

/** One stdin/stdout or functional test case (LiveCodeBench style). */
export interface IOCase {
  /** stdin text, or (functional) newline-separated JSON values, one per argument. */
  input: string;
  /** expected stdout text, or (functional) one JSON value. */
  output: string;
}

/**
 * How a problem is tested. Each form names the harness that runs it (docs/executor.md):
 * - humaneval: `prompt + completion`, the `test` source (defines `check(candidate)`), then
 *   each top-level statement of check's body that holds an assert is one test;
 * - assert: MBPP style, `imports`, the solution, `setup`, then each assert is one test;
 * - pytest: KodCode style, the solution becomes module `solution`, each `test_*` function is one test;
 * - stdio: the program reads stdin and its stdout is compared line by line;
 * - functional: `Solution().fnName(*args)` (or a top-level `fnName`) compared with the JSON output.
 */
export type ProblemTests =
  | { kind: 'humaneval'; prompt: string; test: string; entryPoint: string }
  | { kind: 'assert'; asserts: string[]; setup?: string; imports?: string }
  | { kind: 'pytest'; testCode: string }
  | { kind: 'stdio'; cases: IOCase[] }
  | { kind: 'functional'; fnName: string; cases: IOCase[] };

export type TestKind = ProblemTests['kind'];

export interface Problem {
  /** Unique id, e.g. "HumanEval/0", "mbpp/11", "kodcode/Prefill_00000007_I", "livecodebench/leetcode/2727". */
  id: string;
  source: DatasetSource;
  /** The task text in the style the benchmark uses (see lib/data/prompts.ts). */
  prompt: string;
  /** 'completion': the model continues `prompt` (HumanEval); 'instruction': it answers with a program. */
  promptStyle: 'completion' | 'instruction';
  /** Function under test, where there is one. */
  entryPoint?: string;
  /** Starter code shown to the model (LiveCodeBench LeetCode problems), if any. */
  starterCode?: string;
  tests: ProblemTests;
  /**
   * Indices of tests the model may see feedback from (with feedback "visible only"); the
   * reward always counts every test. For humaneval the indices count check()'s asserts.
   */
  visibleTests: number[];
  /** easy / medium / hard where the dataset says. */
  difficulty?: string;
  /** A reference solution (a full program), where the dataset has one. */
  referenceSolution?: string;
  /** The dataset split, where known (e.g. MBPP 'test', 'train', 'validation', 'prompt'). */
  split?: string;
  /** Anything else from the record that may be useful (never required). */
  meta?: Record<string, unknown>;
}

export type DatasetFormat = 'auto' | 'humaneval' | 'mbpp' | 'kodcode' | 'livecodebench' | 'jsonl';
/** The --format choices of the dataset commands (auto: detected from the records). */
export const DATASET_FORMATS: readonly DatasetFormat[] = ['auto', 'humaneval', 'mbpp', 'kodcode', 'livecodebench', 'jsonl'];
