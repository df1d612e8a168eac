// A remote backend speaking SandboxFusion's HTTP API (POST /run_code).
//
// Each program is sent as one Python script: a driver that runs the same harness the local
// executor uses (python/murphy_exec/*.py, shipped through the request's `files`) in-process
// for one request. The harness forks per program inside the remote
// sandbox, so per-test timeouts and results are the same as locally; the remote service
// supplies the isolation. The result line is marked with a random token.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Problem } from '../data/types.js';
import { toResult } from './executor.js';
import { buildRequest } from './program.js';
import { HARNESS_MODULES, harnessDir } from './sandbox.js';
import { DEFAULT_FEEDBACK, DEFAULT_LIMITS, type ExecutionResult, type RunOptions } from './types.js';
import type { HarnessResponse } from './worker.js';

/** The request body of SandboxFusion's run_code endpoint (the fields we use). */
export interface RunCodeRequest {
  code: string;
  language: 'python';
  compile_timeout: number;
  run_timeout: number;
  stdin?: string;
  files: Record<string, string>;
  fetch_files: string[];
}

/** The response of run_code. */
export interface RunCodeResponse {
  status: 'Success' | 'Failed' | 'SandboxError' | string;
  message?: string;
  compile_result?: unknown;
  run_result?: { status: string; execution_time?: number; return_code?: number; stdout?: string; stderr?: string } | null;
  files?: Record<string, string>;
}

export interface SandboxFusionOptions extends RunOptions {
  /** Base URL, e.g. http://sandbox:8080 (the request goes to `${endpoint}/run_code`). */
  endpoint: string;
  /** Requests in flight at once. Default 16. */
  concurrency?: number;
  /** Extra HTTP headers (e.g. authorization). */
  headers?: Record<string, string>;
  /** HTTP timeout beyond the program's own. Default 30 s. */
  httpSlackMs?: number;
}

let harnessFiles: Record<string, string> | null = null;

/** The `files` of every run_code request: the harness modules, base64. */
function files(): Record<string, string> {
  harnessFiles ??= Object.fromEntries(HARNESS_MODULES.map((f) => [f, readFileSync(join(harnessDir(), f)).toString('base64')]));
  return harnessFiles;
}

/** The Python script sent to run_code for one program: a driver that runs the harness on one request. */
export function remoteScript(req: object, token: string): string {
  const b64 = Buffer.from(JSON.stringify(req), 'utf8').toString('base64');
  return (
    '# ---- murphy-native remote driver\n' +
    'import base64, json, os, shutil, sys, tempfile\n' +
    'sys.path.insert(0, os.getcwd())\n' +
    'from server import Server\n' +
    '\n' +
    'def _murphy_remote():\n' +
    `    req = json.loads(base64.b64decode("${b64}").decode("utf-8"))\n` +
    '    base = tempfile.mkdtemp(prefix="murphy-")\n' +
    '    srv = Server({"workBase": base})\n' +
    '    try:\n' +
    '        resp = srv.handle(req)\n' +
    '    finally:\n' +
    '        shutil.rmtree(base, ignore_errors=True)\n' +
    `    sys.__stdout__.write("\\n${token}" + json.dumps(resp) + "\\n")\n` +
    '    sys.__stdout__.flush()\n' +
    '\n_murphy_remote()\n'
  );
}

export class SandboxFusionExecutor {
  private readonly o: SandboxFusionOptions;
  private inFlight = 0;
  private waiters: (() => void)[] = [];
  private nextId = 1;

  constructor(opts: SandboxFusionOptions) {
    this.o = opts;
  }

  async run(problem: Problem, code: string, opts: RunOptions = {}): Promise<ExecutionResult> {
    const limits = { ...DEFAULT_LIMITS, ...this.o.limits, ...opts.limits };
    const fb = { ...DEFAULT_FEEDBACK, ...this.o.feedback, ...opts.feedback };
    const binary = opts.binaryReward ?? this.o.binaryReward ?? false;
    const req = buildRequest(this.nextId++, problem, code, limits, opts.continueAfterTimeout ?? this.o.continueAfterTimeout ?? false);
    const token = 'MURPHY-' + randomBytes(12).toString('hex') + ':';
    const body: RunCodeRequest = {
      code: remoteScript(req, token),
      language: 'python',
      compile_timeout: 10,
      run_timeout: limits.programTimeout + 5,
      files: files(),
      fetch_files: [],
    };
    const limit = this.o.concurrency ?? 16;
    while (this.inFlight >= limit) await new Promise<void>((r) => this.waiters.push(r));
    this.inFlight++;
    const t0 = performance.now();
    let resp: HarnessResponse | { died: string };
    try {
      resp = await this.post(body, token, limits.programTimeout * 1000 + (this.o.httpSlackMs ?? 30000));
    } finally {
      this.inFlight--;
      this.waiters.shift()?.();
    }
    const r = toResult(problem, resp, limits, fb, binary, performance.now() - t0);
    return { ...r, backend: 'sandboxfusion' };
  }

  execute(problem: Problem, code: string): Promise<ExecutionResult> {
    return this.run(problem, code);
  }

  /** Nothing to start: each program is one HTTP request (same shape as PythonExecutor). */
  async start(): Promise<void> {}

  /** Nothing to close. */
  async close(): Promise<void> {}

  private async post(body: RunCodeRequest, token: string, timeoutMs: number): Promise<HarnessResponse | { died: string }> {
    const url = this.o.endpoint.replace(/\/+$/, '') + '/run_code';
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...this.o.headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      return { died: `SandboxFusion request failed: ${(e as Error).message}` };
    }
    if (!res.ok) return { died: `SandboxFusion answered HTTP ${res.status}: ${(await res.text()).slice(0, 300)}` };
    let j: RunCodeResponse;
    try {
      j = (await res.json()) as RunCodeResponse;
    } catch {
      return { died: 'SandboxFusion sent a reply that is not JSON' };
    }
    const out = j.run_result?.stdout ?? '';
    const line = out.split('\n').find((l) => l.startsWith(token));
    if (!line) {
      const why = j.run_result?.status === 'TimeLimitExceeded' ? 'the remote run timed out' : `no result from the harness (status ${j.status}${j.message ? ': ' + j.message : ''}; stderr: ${(j.run_result?.stderr ?? '').slice(-300)})`;
      return { died: why };
    }
    try {
      return JSON.parse(line.slice(token.length)) as HarnessResponse;
    } catch {
      return { died: 'unreadable harness result from SandboxFusion' };
    }
  }
}
