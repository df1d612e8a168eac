// An exclusive lock on a run directory: RUN/.lock holds {pid, host, startedAt} and is created
// with O_EXCL before anything else is written, so two `train` processes never write one run.
// A lock left by a process that is gone (same host, pid not alive: kill -9, power loss) is
// stale and taken over (also one with this process's own pid that this process does not
// hold: an earlier process with the same pid); a lock from another host cannot be checked and
// is reported.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const LOCK_FILE = '.lock';

export interface LockInfo {
  pid: number;
  host: string;
  startedAt: string;
}

/** Lock files this process holds (a lock with this pid that is not listed is a stale one from an earlier process that had the same pid, as in containers). */
const heldHere = new Set<string>();

export class RunLockedError extends Error {
  override name = 'RunLockedError';
}

/** Whether process `pid` exists on this host (EPERM: it exists but belongs to someone else). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readLock(path: string): LockInfo | null {
  try {
    const v = JSON.parse(readFileSync(path, 'utf8')) as LockInfo;
    return Number.isInteger(v.pid) && typeof v.host === 'string' ? v : null;
  } catch {
    return null;
  }
}

export class RunLock {
  private released = false;
  private readonly onExit = (): void => this.release();
  private constructor(readonly path: string, readonly info: LockInfo) {
    heldHere.add(path);
    process.on('exit', this.onExit);
  }

  /**
   * Takes the lock of run directory `root` (created if missing). Throws RunLockedError naming
   * the holder when another live process has it. `log` hears about a stale lock taken over.
   */
  static acquire(root: string, log: (line: string) => void = () => undefined): RunLock {
    mkdirSync(root, { recursive: true });
    const path = join(root, LOCK_FILE);
    const info: LockInfo = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString() };
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const fd = openSync(path, 'wx');
        try {
          writeSync(fd, JSON.stringify(info) + '\n');
        } finally {
          closeSync(fd);
        }
        return new RunLock(path, info);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw new RunLockedError(`cannot create the lock file ${path}: ${(e as Error).message}`);
      }
      const held = readLock(path);
      if (held && held.host !== info.host) {
        throw new RunLockedError(`${root} is locked by pid ${held.pid} on host ${held.host} (since ${held.startedAt}); if that run is gone, delete ${path}`);
      }
      const live = held && (held.pid === process.pid ? heldHere.has(path) : processAlive(held.pid));
      if (held && live) {
        throw new RunLockedError(`${root} is in use by another train process (pid ${held.pid} on ${held.host}, since ${held.startedAt}); wait for it or use another --out`);
      }
      // Stale (its process is gone) or unreadable (a crash while writing it): move it aside
      // atomically, and check that what was moved is the stale lock and not a fresh one.
      const aside = `${path}.stale-${process.pid}`;
      try {
        renameSync(path, aside);
      } catch {
        continue; // someone else moved it first: retry
      }
      const moved = readLock(aside);
      if (moved && held && (moved.pid !== held.pid || moved.startedAt !== held.startedAt)) {
        renameSync(aside, path); // a live lock taken in between: put it back
        continue;
      }
      rmSync(aside, { force: true });
      log(`took over the stale lock of ${root} (${held ? `pid ${held.pid} is gone` : 'unreadable lock file'})`);
    }
    throw new RunLockedError(`cannot lock ${root}: the lock file ${path} keeps changing`);
  }

  /** Removes the lock (idempotent; also runs at process exit). */
  release(): void {
    if (this.released) return;
    this.released = true;
    heldHere.delete(this.path);
    process.off('exit', this.onExit);
    const held = existsSync(this.path) ? readLock(this.path) : null;
    if (held && held.pid === this.info.pid && held.startedAt === this.info.startedAt) rmSync(this.path, { force: true });
  }
}
