// PythonExecutor: a pool of warm, sandboxed harness processes (one per core by default).
import { availableParallelism } from 'node:os';
import type { Problem } from '../data/types.js';
import { formatFeedback } from './feedback.js';
import { buildRequest } from './program.js';
import { compileHarness } from './bytecode.js';
import { checkBubblewrap, probePython, sweepStaleWorkDirs, workerLaunch, type IsolationReport, type PythonInfo } from './sandbox.js';
import {
  DEFAULT_FEEDBACK,
  DEFAULT_LIMITS,
  type ExecLimits,
  type ExecutionResult,
  type FeedbackOptions,
  type RunOptions,
  type TestCaseResult,
  type TestStatus,
} from './types.js';
import { HarnessWorker, type HarnessResponse, type ServerInfo } from './worker.js';

export interface PythonExecutorOptions extends RunOptions {
  /** Interpreter command or path. Default: $MURPHY_PYTHON or "python3". */
  python?: string;
  /** Worker processes (programs run at once). Default: the number of cores. */
  workers?: number;
  /** Requests waiting beyond the running ones before run() itself waits. Default 4 x workers. */
  maxQueue?: number;
  /** true: require bubblewrap; false: never use it; undefined: use it when it works. */
  useBubblewrap?: boolean;
  /**
   * When running as root, programs of worker i run as uid uidBase + i. Default: a block of 1024
   * uids from 200000 up, different for each executor of each process (see defaultUidBase).
   */
  uidBase?: number;
  /** Called once per process when isolation is weaker than full (default: a line on stderr). */
  warn?: (message: string) => void;
  /** Without bubblewrap: give the workers a private tmpfs on /tmp, /var/tmp and /dev/shm where the kernel allows. Default true (MURPHY_EXEC_PRIVATE_TMP=0: false). */
  privateTmp?: boolean;
}

interface Task {
  problem: Problem;
  code: string;
  opts: RunOptions;
  resolve: (r: ExecutionResult) => void;
  reject: (e: Error) => void;
}

let warnedOnce = false;
let executorsMade = 0;

/**
 * Programs of different executors (two runs on one machine, or train's two executors) must
 * not share a uid: RLIMIT_NPROC counts per uid, so one run's fork bomb would starve the
 * other's programs. Each executor gets its own block of 1024 uids from 200000 up (above
 * the usual system and user ranges and nobody's 65534), derived from the pid and a counter.
 */
export function defaultUidBase(pid = process.pid, n = executorsMade++): number {
  return 200000 + 1024 * ((pid * 8 + n) % 1_000_000);
}

export class PythonExecutor {
  private readonly opts: PythonExecutorOptions;
  private readonly nWorkers: number;
  private readonly maxQueue: number;
  private workers: HarnessWorker[] = [];
  private idle: HarnessWorker[] = [];
  private queue: Task[] = [];
  private spaceWaiters: (() => void)[] = [];
  private init: Promise<void> | null = null;
  private closed = false;
  private mode: 'bubblewrap' | 'process' = 'process';
  private bwrapReason: string | undefined;
  private python: PythonInfo | null = null;
  private nextId = 1;

  private readonly uidBase: number;

  constructor(opts: PythonExecutorOptions = {}) {
    this.opts = opts;
    this.uidBase = opts.uidBase ?? defaultUidBase();
    this.nWorkers = Math.max(1, opts.workers ?? availableParallelism());
    this.maxQueue = Math.max(1, opts.maxQueue ?? 4 * this.nWorkers);
  }

  get workerCount(): number {
    return this.nWorkers;
  }

  /** Starts the workers (run() does this on first use). */
  start(): Promise<void> {
    this.init ??= this.doStart();
    return this.init;
  }

  private async doStart(): Promise<void> {
    const py = await probePython(this.opts.python ?? process.env.MURPHY_PYTHON ?? 'python3');
    this.python = py;
    await compileHarness(py);  // the harness's bytecode for this interpreter (lib/exec/bytecode.ts)
    let useBwrap = false;
    let bwrapPath: string | null = null;
    if (this.opts.useBubblewrap !== false) {
      const b = await checkBubblewrap();
      if (b.ok) {
        useBwrap = true;
        bwrapPath = b.path;
      } else {
        this.bwrapReason = b.reason;
        if (this.opts.useBubblewrap === true) throw new Error(`bubblewrap was required but is unusable: ${b.reason}`);
      }
    } else {
      this.bwrapReason = 'bubblewrap disabled by configuration';
    }
    this.mode = useBwrap ? 'bubblewrap' : 'process';
    if (!useBwrap) sweepStaleWorkDirs();
    const limits = { ...DEFAULT_LIMITS, ...this.opts.limits };
    for (let i = 0; i < this.nWorkers; i++) {
      const w = new HarnessWorker(
        workerLaunch({
          python: py, useBubblewrap: useBwrap, bwrapPath, workerIndex: i, tmpBytes: limits.tmpBytes,
          uidBase: this.uidBase, privateTmp: this.opts.privateTmp ?? process.env.MURPHY_EXEC_PRIVATE_TMP !== '0',
        }),
      );
      this.workers.push(w);
    }
    await Promise.all(this.workers.map((w) => w.start()));
    this.idle = [...this.workers];
    const rep = this.report();
    if (rep.unprotected && !warnedOnce) {
      warnedOnce = true;
      (this.opts.warn ?? ((m: string) => process.stderr.write(m + '\n')))(`murphy-native: ${rep.unprotected}`);
    }
  }

  /** What the isolation of this executor's workers guarantees (see docs/executor.md). */
  async isolation(): Promise<IsolationReport> {
    await this.start();
    return this.report();
  }

  private report(): IsolationReport {
    const info: ServerInfo | null = this.workers[0]?.info ?? null;
    const limits = { ...DEFAULT_LIMITS, ...this.opts.limits };
    const bw = this.mode === 'bubblewrap';
    const notes: string[] = [];
    let network: string;
    let filesystem: string;
    if (bw) {
      network = 'none (empty network namespace: loopback only, down)';
      filesystem = `read-only view of the interpreter (/usr, ${this.python?.prefix ?? 'python prefix'}), nothing else of the host; writable: a private ${Math.round(limits.tmpBytes / 2 ** 20)} MiB /tmp (tmpfs), a fresh directory per program`;
    } else {
      notes.push(`bubblewrap not used (${this.bwrapReason ?? 'unknown reason'})`);
      network = info?.netns ? 'none (network namespace unshared)' : 'HOST NETWORK REACHABLE (could not unshare a network namespace)';
      if (!info?.netns) notes.push('programs can reach the network');
      const dropped = info?.root ? info.childUid !== null : true;
      const tmp = info?.privateTmp
        ? 'private tmpfs on /tmp, /var/tmp and /dev/shm (emptied after every program)'
        : 'the host\'s /tmp is writable';
      filesystem = info?.root
        ? dropped
          ? `host file system visible; programs run as uid ${info.childUid}, so they can write only where anyone may; ${tmp}`
          : `host file system visible and WRITABLE AS ROOT (the interpreter is not readable by an unprivileged uid); ${tmp}`
        : `host file system visible with the invoking user's permissions; ${tmp}`;
      notes.push('programs can read the host file system');
      if (!info?.privateTmp) notes.push('programs can write to the host\'s /tmp (no private mount namespace)');
      if (info?.root && !dropped) {
        notes.push('programs run as root: no process-count limit, can write any file (install bubblewrap, or use a world-readable interpreter such as /usr/bin/python3)');
      }
      if (!info?.root) notes.push('programs run as the invoking user and could signal its processes');
    }
    if (info && !info.subreaper) notes.push('could not become a child subreaper: daemons may escape cleanup');
    const lim = [
      limits.timeoutMode === 'program'
        ? `wall clock ${limits.programTimeout} s for the whole program (process tree SIGKILLed)`
        : `wall clock ${limits.testTimeout} s per test, ${limits.programTimeout} s per program (process tree SIGKILLed)`,
      `RLIMIT_CPU ${limits.cpuSeconds} s`,
      `RLIMIT_AS ${Math.round(limits.memoryBytes / 2 ** 20)} MiB`,
      `RLIMIT_FSIZE ${Math.round(limits.fileBytes / 2 ** 20)} MiB`,
      `RLIMIT_NPROC ${limits.maxProcs}${info && !info.nprocEnforced ? ' (NOT enforced: uid 0)' : ''}`,
      `RLIMIT_NOFILE ${limits.maxOpenFiles}`,
      `output capped at ${limits.outBytes} bytes per stream (${limits.stdoutBytes} for stdin/stdout answers)`,
      'own session and process group; empty environment; stdin closed or the test input',
    ];
    return {
      bubblewrap: bw, mode: this.mode, python: this.python ? `${this.python.executable} (${this.python.version})` : '?', network, filesystem, limits: lim, notes,
      unprotected: unprotectedLine(bw, info),
    };
  }

  /** Runs `code` against `problem`'s tests. */
  async run(problem: Problem, code: string, opts: RunOptions = {}): Promise<ExecutionResult> {
    if (this.closed) throw new Error('executor is closed');
    await this.start();
    while (this.queue.length >= this.maxQueue) await new Promise<void>((r) => this.spaceWaiters.push(r));
    return new Promise<ExecutionResult>((resolve, reject) => {
      this.queue.push({ problem, code, opts, resolve, reject });
      this.pump();
    });
  }

  /** The lib/murphy Executor interface: reward, passed, feedback and per-test outcomes. */
  execute(problem: Problem, code: string): Promise<ExecutionResult> {
    return this.run(problem, code);
  }

  private pump(): void {
    while (this.idle.length && this.queue.length) {
      const w = this.idle.pop() as HarnessWorker;
      const task = this.queue.shift() as Task;
      this.spaceWaiters.shift()?.();
      void this.runOn(w, task).finally(() => {
        this.idle.push(w);
        this.pump();
      });
    }
  }

  private async runOn(w: HarnessWorker, task: Task): Promise<void> {
    try {
      const limits: ExecLimits = { ...DEFAULT_LIMITS, ...this.opts.limits, ...task.opts.limits };
      const fb: FeedbackOptions = { ...DEFAULT_FEEDBACK, ...this.opts.feedback, ...task.opts.feedback };
      const cat = task.opts.continueAfterTimeout ?? this.opts.continueAfterTimeout ?? false;
      const binary = task.opts.binaryReward ?? this.opts.binaryReward ?? false;
      const req = buildRequest(this.nextId++, task.problem, task.code, limits, cat);
      const t0 = performance.now();
      let resp: HarnessResponse | { died: string };
      try {
        resp = await w.request(req, limits.programTimeout * 1000 + 20000);
      } catch (e) {
        resp = { died: (e as Error).message };
      }
      task.resolve(toResult(task.problem, resp, limits, fb, binary, performance.now() - t0));
    } catch (e) {
      task.reject(e as Error);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.close()));
    for (const t of this.queue) t.reject(new Error('executor closed'));
    this.queue = [];
  }
}

/** One line saying what the weaker (no bubblewrap) mode does not protect; '' with bubblewrap. */
export function unprotectedLine(bubblewrap: boolean, info: ServerInfo | null): string {
  if (bubblewrap) return '';
  const gaps = ["read the host's files"];
  if (info?.root && info.childUid === null) gaps.push('write any file as root');
  else if (!info?.root) gaps.push("write the invoking user's files and signal its processes");
  if (!info?.privateTmp) gaps.push("write to the host's /tmp");
  if (!info?.netns) gaps.push('reach the network');
  const list = gaps.length > 1 ? `${gaps.slice(0, -1).join(', ')} and ${gaps[gaps.length - 1]}` : gaps[0];
  return `weaker sandbox (no bubblewrap): programs can ${list}; install bubblewrap for full isolation (murphy-native doctor)`;
}

function status(raw: { passed: boolean; status?: string; errorType?: string }): TestStatus {
  if (raw.passed) return 'passed';
  if (raw.status === 'timeout' || raw.errorType === 'Timeout') return 'timeout';
  if (raw.status === 'skipped') return 'skipped';
  if (!raw.errorType || raw.errorType === 'AssertionError' || raw.errorType === 'WrongAnswer') return 'failed';
  return 'error';
}

/** Turns the harness's response into an ExecutionResult with reward and feedback. */
export function toResult(
  problem: Problem,
  resp: HarnessResponse | { died: string },
  limits: ExecLimits,
  fb: FeedbackOptions,
  binary: boolean,
  wallMs: number,
): ExecutionResult {
  const visible = new Set(problem.visibleTests);
  if ('died' in resp || resp.error || !resp.tests) {
    const why = 'died' in resp ? resp.died : resp.error ?? 'no results';
    const t: TestCaseResult = { index: 0, name: 'program', source: '(whole program)', passed: false, status: 'error', errorType: 'SandboxError', message: why, visible: true };
    return {
      reward: 0,
      passed: false,
      feedback: `0 tests passed: the program could not be judged (${why.slice(0, 300)}).`,
      tests: [t],
      numPassed: 0,
      numTests: 1,
      timedOut: false,
      stdout: '',
      stderr: '',
      wallMs,
      errors: [why],
      backend: 'local',
    };
  }
  const tests: TestCaseResult[] = resp.tests.map((r, i) => {
    const t: TestCaseResult = { index: i, name: r.name, source: r.source, passed: r.passed === true, status: status(r), visible: visible.has(i) };
    if (r.errorType) t.errorType = r.errorType;
    if (r.message !== undefined && r.message !== '') t.message = r.message;
    if (r.expected !== undefined && r.expected !== null) t.expected = r.expected;
    if (r.actual !== undefined && r.actual !== null) t.actual = r.actual;
    if (r.traceback) t.traceback = r.traceback;
    if (r.output) t.output = r.output;
    if (typeof r.ms === 'number') t.durationMs = r.ms;
    return t;
  });
  const numPassed = tests.filter((t) => t.passed).length;
  const n = tests.length;
  const all = n > 0 && numPassed === n;
  const se = resp.syntaxError ? { message: resp.syntaxError.message, line: resp.syntaxError.lineno ?? undefined, text: resp.syntaxError.text } : undefined;
  const setupError = resp.setupError ?? undefined;
  const feedback = formatFeedback({ tests, syntaxError: se, setupError, testTimeout: limits.testTimeout }, fb);
  return {
    reward: n === 0 ? 0 : binary ? (all ? 1 : 0) : numPassed / n,
    passed: all,
    feedback,
    tests,
    numPassed,
    numTests: n,
    timedOut: resp.timedOut === true,
    ...(se ? { syntaxError: se } : {}),
    ...(setupError ? { setupError } : {}),
    stdout: resp.stdout ?? '',
    stderr: resp.stderr ?? '',
    wallMs,
    errors: resp.notes ?? [],
    backend: 'local',
  };
}
