// Shared helpers of the executor tests.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkBubblewrap } from '../../lib/exec/index.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The full benchmark files the tests run on, shipped in the repository (see its README.md). */
export const DATASETS = join(REPO, 'test', 'datasets');
export const ASSETS = join(REPO, 'assets', 'data');

export async function haveBwrap(): Promise<boolean> {
  return (await checkBubblewrap()).ok;
}

export interface Proc {
  pid: number;
  ppid: number;
  uid: number;
  comm: string;
}

/** Every process on the machine (pid, ppid, uid, comm). */
export function processes(): Proc[] {
  const out: Proc[] = [];
  for (const n of readdirSync('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const st = readFileSync(`/proc/${n}/stat`, 'latin1');
      const close = st.lastIndexOf(')');
      const comm = st.slice(st.indexOf('(') + 1, close);
      const ppid = Number(st.slice(close + 2).split(' ')[1]);
      const status = readFileSync(`/proc/${n}/status`, 'latin1');
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1);
      out.push({ pid: Number(n), ppid, uid, comm });
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

/** The descendants of `root` (default: this Node process). */
export function descendants(root = process.pid): Proc[] {
  const all = processes();
  const byPid = new Map(all.map((p) => [p.pid, p]));
  return all.filter((p) => {
    let cur: Proc | undefined = p;
    for (let i = 0; cur && i < 1000; i++) {
      if (cur.ppid === root) return true;
      cur = byPid.get(cur.ppid);
    }
    return false;
  });
}

const madeDirs: string[] = [];
/** A temporary directory removed when the test process exits. */
export function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  madeDirs.push(d);
  return d;
}
process.on('exit', () => {
  for (const d of madeDirs) rmSync(d, { recursive: true, force: true });
});
