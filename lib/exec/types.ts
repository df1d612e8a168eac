// Types of the sandboxed Python executor (docs/executor.md).

/** Resource limits applied to every program (per child process unless said otherwise). */
export interface ExecLimits {
  /** Wall-clock seconds per test (module-level code counts as its own phase with the same limit). Default 3. */
  testTimeout: number;
  /** Wall-clock seconds for the whole program, all tests together. Default 10. */
  programTimeout: number;
  /**
   * 'test' (default): each test (and the module-level code) gets testTimeout, the program
   * programTimeout in all. 'program': only programTimeout counts, for the program as a whole,
   * as in the official HumanEval/MBPP harnesses (docs/executor.md, "Time limits and reward").
   */
  timeoutMode: TimeoutMode;
  /** CPU seconds (RLIMIT_CPU) per child. Default 10. */
  cpuSeconds: number;
  /** Address space (RLIMIT_AS) in bytes. Default 2 GiB. */
  memoryBytes: number;
  /** Largest file the program may write (RLIMIT_FSIZE). Default 16 MiB. */
  fileBytes: number;
  /** Process-count limit (RLIMIT_NPROC) of the program's uid. Default 32. */
  maxProcs: number;
  /** Open-file limit (RLIMIT_NOFILE). Default 256. */
  maxOpenFiles: number;
  /** Captured output kept per test and per stream (program stdout/stderr), in bytes. Default 8 KiB. */
  outBytes: number;
  /** stdout kept for comparison in stdin/stdout tests, in bytes. Default 4 MiB. */
  stdoutBytes: number;
  /** Size of the sandbox's private /tmp (bubblewrap only). Default 64 MiB. */
  tmpBytes: number;
}

export type TimeoutMode = 'test' | 'program';

export type TestStatus = 'passed' | 'failed' | 'error' | 'timeout' | 'skipped';

/** The result of one test. Structurally a lib/murphy TestOutcome ({name, passed, message}). */
export interface TestCaseResult {
  index: number;
  name: string;
  /** The test's source: an assert, `def test_x(...)`, the stdin text or the call. */
  source: string;
  passed: boolean;
  status: TestStatus;
  /** Exception type: AssertionError, TypeError, ..., Timeout, WrongAnswer, Crash, Exit, SyntaxError. */
  errorType?: string;
  message?: string;
  expected?: string;
  actual?: string;
  /** Traceback trimmed to the candidate's own frames (solution.py). */
  traceback?: string;
  /** Output the program printed during this test (capped). */
  output?: string;
  durationMs?: number;
  /** True when the test belongs to the visible subset. */
  visible: boolean;
}

export interface SyntaxErrorInfo {
  message: string;
  line?: number;
  text?: string;
}

/** The full result of running one program. */
export interface ExecutionResult {
  /** Fraction of tests passed (or 0/1 in binary mode). */
  reward: number;
  /** True when every test passed. */
  passed: boolean;
  /** Feedback text for the next turn (docs/executor.md, "Feedback"). */
  feedback: string;
  tests: TestCaseResult[];
  numPassed: number;
  numTests: number;
  timedOut: boolean;
  syntaxError?: SyntaxErrorInfo;
  /** Error in module-level code (before any test ran). */
  setupError?: { errorType: string; message: string; traceback?: string };
  /** Program-level stdout/stderr not attributed to a test (capped). */
  stdout: string;
  stderr: string;
  wallMs: number;
  /** Problems of the executor itself (harness failure, sandbox died); empty normally. */
  errors: string[];
  backend: 'local' | 'sandboxfusion';
}

export type FeedbackScope = 'all' | 'visible';

export interface FeedbackOptions {
  /** Failing tests described at most. Default 3. */
  maxFailures: number;
  /** Character budget of the whole text. Default 2000. */
  maxChars: number;
  /** 'visible': describe only the problem's visible tests (the counts say so); the reward still counts all. */
  scope: FeedbackScope;
  /** Characters of expected/actual/message shown per failure. Default 300. */
  maxValueChars: number;
}

export interface RunOptions {
  limits?: Partial<ExecLimits>;
  feedback?: Partial<FeedbackOptions>;
  /** Reward 1 only when all tests pass, else 0. Default false (fraction passed). */
  binaryReward?: boolean;
  /** After a test times out, still run the remaining tests (each with its own timeout). Default false. */
  continueAfterTimeout?: boolean;
}

export const DEFAULT_LIMITS: ExecLimits = {
  testTimeout: 3,
  programTimeout: 10,
  timeoutMode: 'test',
  cpuSeconds: 10,
  memoryBytes: 2 * 1024 ** 3,
  fileBytes: 16 * 1024 ** 2,
  maxProcs: 32,
  maxOpenFiles: 256,
  outBytes: 8 * 1024,
  stdoutBytes: 4 * 1024 ** 2,
  tmpBytes: 64 * 1024 ** 2,
};

export const DEFAULT_FEEDBACK: FeedbackOptions = {
  maxFailures: 3,
  maxChars: 2000,
  scope: 'all',
  maxValueChars: 300,
};

/**
 * The limits of a timeout mode given one number of seconds (the CLI's --test-timeout):
 * 'test' gives each test that long; 'program' gives the whole program that long.
 */
export function timeoutLimits(mode: TimeoutMode, seconds: number): Partial<ExecLimits> {
  return mode === 'program' ? { timeoutMode: 'program', testTimeout: seconds, programTimeout: seconds } : { timeoutMode: 'test', testTimeout: seconds };
}

/** Where programs run: on this machine, sandboxed (local), or on a SandboxFusion service. */
export const EXECUTOR_KINDS = ['local', 'sandboxfusion'] as const;
export type ExecutorKind = (typeof EXECUTOR_KINDS)[number];
