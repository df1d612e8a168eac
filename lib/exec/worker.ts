// One warm harness process (python/murphy_exec/server.py), possibly inside bubblewrap.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { HarnessRequest } from './program.js';
import type { WorkerLaunch } from './sandbox.js';

/** What the server reports about itself when it starts. */
export interface ServerInfo {
  pid: number;
  root: boolean;
  python: string;
  subreaper: boolean;
  netns?: boolean;
  /** Without bubblewrap: /tmp, /var/tmp and /dev/shm are a private tmpfs. */
  privateTmp?: boolean;
  childUid: number | null;
  nprocEnforced: boolean;
}

/** One test's raw result from the harness. */
export interface RawTest {
  passed: boolean;
  name: string;
  source: string;
  status?: string;
  errorType?: string;
  message?: string;
  expected?: string | null;
  actual?: string | null;
  traceback?: string;
  output?: string;
  ms?: number;
  lineno?: number;
  text?: string;
}

export interface HarnessResponse {
  id: number;
  error?: string;
  n?: number;
  tests?: RawTest[];
  timedOut?: boolean;
  syntaxError?: { errorType: string; message: string; lineno?: number; text?: string } | null;
  setupError?: { errorType: string; message: string; traceback?: string } | null;
  stdout?: string;
  stderr?: string;
  wallMs?: number;
  notes?: string[];
}

export class HarnessWorker {
  private proc: ChildProcessWithoutNullStreams | null = null;
  private ready: Promise<ServerInfo> | null = null;
  private waiting: ((line: string | null) => void) | null = null;
  private stderrTail = '';
  info: ServerInfo | null = null;
  runs = 0;

  constructor(private readonly launch: WorkerLaunch) {}

  get alive(): boolean {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  start(): Promise<ServerInfo> {
    if (this.ready && this.alive) return this.ready;
    const proc = spawn(this.launch.command, this.launch.args, { env: this.launch.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = proc;
    this.stderrTail = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d: string) => {
      this.stderrTail = (this.stderrTail + d).slice(-4000);
    });
    proc.stdin.on('error', () => {});
    const rl = createInterface({ input: proc.stdout });
    rl.on('line', (line) => {
      const w = this.waiting;
      this.waiting = null;
      w?.(line);
    });
    proc.on('exit', () => {
      const w = this.waiting;
      this.waiting = null;
      w?.(null);
    });
    proc.on('error', () => {
      const w = this.waiting;
      this.waiting = null;
      w?.(null);
    });
    this.ready = new Promise<ServerInfo>((resolve, reject) => {
      this.waiting = (line) => {
        if (line === null) {
          reject(new Error(`executor worker failed to start (${this.launch.command}): ${this.stderrTail.trim() || 'no output'}`));
          return;
        }
        try {
          const msg = JSON.parse(line) as { ready?: boolean; info?: ServerInfo };
          if (!msg.ready || !msg.info) throw new Error('unexpected first line');
          this.info = msg.info;
          resolve(msg.info);
        } catch (e) {
          reject(new Error(`executor worker: bad start line ${JSON.stringify(line.slice(0, 200))}: ${(e as Error).message}`));
        }
      };
    });
    this.ready.then(
      () => this.setRef(false),
      () => this.kill(),
    );
    return this.ready;
  }

  /** Sends one request; resolves with the response, or with `null` when the worker died. */
  async request(req: HarnessRequest, watchdogMs: number): Promise<HarnessResponse | { died: string }> {
    await this.start();
    const proc = this.proc;
    if (!proc) return { died: 'worker not running' };
    this.runs++;
    this.setRef(true);
    return new Promise<HarnessResponse | { died: string }>((resolve) => {
      const timer = setTimeout(() => {
        this.waiting = null;
        this.kill();
        resolve({ died: `the executor worker did not answer within ${watchdogMs} ms` });
      }, watchdogMs);
      this.waiting = (line) => {
        clearTimeout(timer);
        if (line === null) {
          this.kill();
          resolve({ died: `the sandbox process died during the run${this.stderrTail.trim() ? ': ' + this.stderrTail.trim().slice(-500) : ''}` });
          return;
        }
        try {
          resolve(JSON.parse(line) as HarnessResponse);
        } catch {
          this.kill();
          resolve({ died: 'the executor worker sent an unreadable reply' });
        }
      };
      proc.stdin.write(JSON.stringify(req) + '\n');
    }).finally(() => this.setRef(false));
  }

  /** An idle worker must not keep Node alive; a busy one must. */
  private setRef(on: boolean): void {
    const p = this.proc;
    if (!p) return;
    for (const s of [p.stdout, p.stderr, p.stdin] as unknown as { ref?: () => void; unref?: () => void }[]) {
      if (on) s.ref?.();
      else s.unref?.();
    }
    if (on) p.ref();
    else p.unref();
  }

  kill(): void {
    const p = this.proc;
    this.proc = null;
    this.ready = null;
    if (p && p.pid !== undefined && p.exitCode === null) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        try {
          p.kill('SIGKILL');
        } catch {
          /* gone */
        }
      }
    }
  }

  /** Closes stdin and waits for the process to exit (killing it after `ms`). */
  async close(ms = 2000): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) {
      this.proc = null;
      return;
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.kill();
        resolve();
      }, ms);
      p.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      p.stdin.end();
    });
    this.proc = null;
    this.ready = null;
  }
}
