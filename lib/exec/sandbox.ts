// Isolation: how each executor worker (a warm Python server) is started.
//
// With bubblewrap: the server runs in fresh user/pid/net/ipc/uts namespaces, with a
// read-only view of the interpreter and nothing else of the file system, a private size-capped
// /tmp and an empty environment. Without it: the server runs directly, unsharing a network
// namespace where the kernel lets it. Either way every program runs in a forked child with
// rlimits, its own session and temp dir (python/murphy_exec/server.py). docs/executor.md
// states exactly what each mode guarantees.
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

export interface PythonInfo {
  /** As configured (e.g. "python3"). */
  command: string;
  /** The real interpreter binary (pyenv shims and symlinks resolved). */
  executable: string;
  version: string;
  prefix: string;
  basePrefix: string;
  /** sys.path entries (with -I) that exist. */
  paths: string[];
  /** sys.implementation.cache_tag (e.g. "cpython-311"): the name part of its .pyc files; null where it has none. */
  cacheTag: string | null;
}

const pythonCache = new Map<string, Promise<PythonInfo>>();

/** Resolves the configured interpreter once: the real binary, its prefixes and module paths. */
export function probePython(command = 'python3'): Promise<PythonInfo> {
  let p = pythonCache.get(command);
  if (!p) {
    p = (async () => {
      const script =
        'import sys, os, json; print(json.dumps({"executable": os.path.realpath(sys.executable), "version": sys.version.split()[0], ' +
        '"prefix": sys.prefix, "basePrefix": sys.base_prefix, "paths": [p for p in sys.path if p and os.path.isdir(p)], ' +
        '"cacheTag": sys.implementation.cache_tag}))';
      let stdout: string;
      try {
        ({ stdout } = await execFileP(command, ['-I', '-c', script], { timeout: 30000 }));
      } catch (e) {
        const err = e as { stderr?: string; message: string };
        throw new Error(`cannot run the Python interpreter "${command}" (set --python or MURPHY_PYTHON): ${(err.stderr ?? '').trim() || err.message}`);
      }
      const o = JSON.parse(stdout) as Omit<PythonInfo, 'command'>;
      return { command, ...o };
    })();
    pythonCache.set(command, p);
    p.catch(() => pythonCache.delete(command));
  }
  return p;
}

/** The harness's modules (the remote executor ships them as files beside its driver; bytecode.ts compiles them). */
export const HARNESS_MODULES = ['server.py', 'child.py', 'checks.py', 'planning.py', 'compare.py', 'common.py', 'messages.py', 'pytest_shim.py'];

/** The folder holding server.py and the pytest shim. */
export function harnessDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return join(here, '..', '..', 'python', 'murphy_exec');
}

export function findOnPath(name: string): string | null {
  for (const d of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
    if (!d) continue;
    const p = join(d, name);
    try {
      if (statSync(p).isFile()) return p;
    } catch {
      /* not here */
    }
  }
  return null;
}

let bwrapCheck: Promise<{ ok: boolean; path: string | null; reason?: string }> | undefined;

/** Whether bubblewrap is installed and can create the namespaces the executor asks for. */
export function checkBubblewrap(): Promise<{ ok: boolean; path: string | null; reason?: string }> {
  bwrapCheck ??= (async () => {
    const path = findOnPath('bwrap');
    if (!path) return { ok: false, path, reason: 'bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)' };
    const args = [...nsArgs(isRoot()), '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', 'true'];
    try {
      await execFileP(path, args, { timeout: 20000 });
      return { ok: true, path };
    } catch (e) {
      const msg = (e as { stderr?: string }).stderr?.trim() || (e as Error).message;
      return { ok: false, path, reason: `bwrap cannot create namespaces here: ${msg}` };
    }
  })();
  return bwrapCheck;
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

function nsArgs(root: boolean): string[] {
  // As root: no user namespace (RLIMIT_NPROC is not enforced for uid 0 or inside a root-made
  // user namespace); the server keeps only the capabilities it needs to drop each program to
  // its own uid and to clean up after it. Unprivileged: a user namespace (implied).
  const common = ['--unshare-ipc', '--unshare-pid', '--unshare-net', '--unshare-uts', '--unshare-cgroup-try', '--die-with-parent', '--new-session'];
  if (root) {
    return [
      ...common,
      '--cap-drop', 'ALL',
      ...['CAP_SETUID', 'CAP_SETGID', 'CAP_KILL', 'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER'].flatMap((c) => ['--cap-add', c]),
    ];
  }
  return ['--unshare-user', '--disable-userns', ...common];
}

/** Directories (and symlinks) of the host the sandbox needs for the interpreter. */
function rootfsArgs(py: PythonInfo): string[] {
  const args: string[] = [];
  const bound: string[] = [];
  const under = (p: string): boolean => bound.some((b) => p === b || p.startsWith(b + sep));
  const made = new Set<string>();
  const mkParents = (p: string): void => {
    const parts = resolve(p).split(sep).filter(Boolean);
    let cur = '';
    for (let i = 0; i < parts.length - 1; i++) {
      cur += sep + parts[i];
      if (made.has(cur) || under(cur)) continue;
      made.add(cur);
      args.push('--perms', '0755', '--dir', cur);
    }
  };
  const bind = (p: string): void => {
    if (!existsSync(p) || under(p)) return;
    mkParents(p);
    args.push('--ro-bind', p, p);
    bound.push(p);
  };
  bind('/usr');
  for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    try {
      const st = lstatSync(top);
      if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
      else if (st.isDirectory()) bind(top);
    } catch {
      /* absent */
    }
  }
  for (const f of ['/etc/ld.so.cache', '/etc/localtime', '/etc/alternatives']) {
    if (existsSync(f)) args.push('--ro-bind', f, f);
  }
  const exeDir = dirname(py.executable);
  const roots = [py.basePrefix, py.prefix, exeDir, ...py.paths].map((p) => {
    try {
      return realpathSync(p);
    } catch {
      return p;
    }
  });
  // Bind the shortest distinct roots (a prefix covers its lib/ and site-packages).
  for (const r of [...new Set(roots)].sort((a, b) => a.length - b.length)) bind(r);
  // Keep the unresolved spellings valid too (symlinked prefixes).
  for (const p of [py.basePrefix, py.prefix]) if (!under(p) && existsSync(p)) bind(p);
  return args;
}

export type IsolationMode = 'bubblewrap' | 'process';

export interface WorkerLaunch {
  mode: IsolationMode;
  command: string;
  args: string[];
  /** Spawn as this uid/gid (unused for now: the server drops privileges itself). */
  env: Record<string, string>;
}

export interface LaunchOptions {
  python: PythonInfo;
  useBubblewrap: boolean;
  bwrapPath: string | null;
  workerIndex: number;
  tmpBytes: number;
  /** Base of the per-worker unprivileged uids used when running as root (PythonExecutor picks a block per executor). */
  uidBase: number;
  /** Without bubblewrap: mount a private tmpfs on /tmp, /var/tmp and /dev/shm where the kernel allows. Default true. */
  privateTmp?: boolean;
}

const CLEAN_ENV: Record<string, string> = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', HOME: '/tmp' };

/** Every ancestor of `p` is traversable and `p` readable by others (for a dropped uid). */
export function worldAccessible(p: string): boolean {
  try {
    let cur = resolve(p);
    if ((statSync(cur).mode & 0o004) === 0) return false;
    while (true) {
      const parent = dirname(cur);
      if (parent === cur) return true;
      if ((statSync(parent).mode & 0o001) === 0) return false;
      cur = parent;
    }
  } catch {
    return false;
  }
}

export function workerLaunch(o: LaunchOptions): WorkerLaunch {
  const root = isRoot();
  const childUid = root ? o.uidBase + o.workerIndex : undefined;
  if (o.useBubblewrap && o.bwrapPath) {
    const serverArgs = { workBase: '/tmp/murphy', childUid, privateScratch: ['/tmp'], pidNamespace: true };
    const args = [
      ...nsArgs(root),
      ...rootfsArgs(o.python),
      '--ro-bind', harnessDir(), '/murphy-harness',
      '--proc', '/proc',
      '--dev', '/dev',
      '--size', String(o.tmpBytes), '--perms', '1777', '--tmpfs', '/tmp',
      '--clearenv',
      ...Object.entries(CLEAN_ENV).flatMap(([k, v]) => ['--setenv', k, v]),
      '--chdir', '/tmp',
      o.python.executable, '-I', '-B', '/murphy-harness/server.py', JSON.stringify(serverArgs),
    ];
    return { mode: 'bubblewrap', command: o.bwrapPath, args, env: {} };
  }
  // Without bubblewrap: drop programs to an unprivileged uid only when that uid can still
  // read the interpreter (pyenv under /root cannot be).
  const canDrop = root && worldAccessible(o.python.executable) && [o.python.prefix, o.python.basePrefix].every(worldAccessible);
  const serverArgs = {
    workBase: join(tmpBase(), `${WORK_PREFIX}${process.pid}-${o.workerIndex}`),
    childUid: canDrop ? childUid : undefined,
    unshareNet: true,
    privateTmp: o.privateTmp !== false,
    tmpBytes: o.tmpBytes,
  };
  return {
    mode: 'process',
    command: o.python.executable,
    args: ['-I', '-B', join(harnessDir(), 'server.py'), JSON.stringify(serverArgs)],
    env: { ...CLEAN_ENV },
  };
}

function tmpBase(): string {
  return process.env.TMPDIR && existsSync(process.env.TMPDIR) ? process.env.TMPDIR : '/tmp';
}

/** Work directories of process-mode workers on the host: `murphy-exec-<node pid>-<worker>`. */
const WORK_PREFIX = 'murphy-exec-';

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the work directories left in the temp dir by executors whose process is gone
 * (killed with SIGKILL, so it could not clean up). Returns the directories removed.
 */
export function sweepStaleWorkDirs(base = tmpBase()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return removed;
  }
  for (const name of names) {
    const m = new RegExp(`^${WORK_PREFIX}(\\d+)-\\d+$`).exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || pidAlive(pid)) continue;
    try {
      rmSync(join(base, name), { recursive: true, force: true });
      removed.push(join(base, name));
    } catch {
      /* another user's, or already gone */
    }
  }
  return removed;
}

export interface IsolationReport {
  /** bubblewrap in use. */
  bubblewrap: boolean;
  mode: IsolationMode;
  python: string;
  /** What the network looks like to a program. */
  network: string;
  /** What of the file system a program sees and may write. */
  filesystem: string;
  /** The rlimits and other per-program limits in force. */
  limits: string[];
  /** Anything weaker than the full isolation, and why. */
  notes: string[];
  /** One line: what the weaker mode does not protect ('' with bubblewrap). */
  unprotected: string;
}

/**
 * What the executor's isolation guarantees on this machine (printed by `murphy-native
 * doctor`). It starts a worker briefly to learn what the kernel actually allowed.
 */
export async function describeIsolation(opts: { python?: string; useBubblewrap?: boolean } = {}): Promise<IsolationReport> {
  const { PythonExecutor } = await import('./executor.js');
  const ex = new PythonExecutor({ python: opts.python, useBubblewrap: opts.useBubblewrap, workers: 1, warn: () => {} });
  try {
    return await ex.isolation();
  } finally {
    await ex.close();
  }
}
