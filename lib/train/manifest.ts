// A checkpoint's manifest: the size and SHA-256 of every file in the checkpoint directory,
// written last (atomically) so its presence means the rest was complete, and checked before
// a resume trusts the checkpoint.
//
//   CKPT/manifest.json   {"version": 1, "files": {"state.json": {"bytes": N, "sha256": "..."}, ...}}
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { writeFileAtomic } from './rundir.js';

export const MANIFEST_FILE = 'manifest.json';

export interface ManifestEntry {
  bytes: number;
  sha256: string;
}

export interface Manifest {
  version: 1;
  files: Record<string, ManifestEntry>;
}

/** SHA-256 of a file, read in 4 MiB chunks (checkpoint files can be several GB). */
export function sha256File(path: string): string {
  const h = createHash('sha256');
  const buf = Buffer.allocUnsafe(4 << 20);
  const fd = openSync(path, 'r');
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      h.update(buf.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return h.digest('hex');
}

/** Every regular file under dir (relative paths with '/', sorted), the manifest excluded. */
function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(relative(dir, p).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.filter((f) => f !== MANIFEST_FILE).sort();
}

/** Hashes every file under dir and writes dir/manifest.json (atomically, last). */
export function writeManifest(dir: string): Manifest {
  const files: Record<string, ManifestEntry> = {};
  for (const f of listFiles(dir)) {
    const p = join(dir, f);
    files[f] = { bytes: statSync(p).size, sha256: sha256File(p) };
  }
  const m: Manifest = { version: 1, files };
  writeFileAtomic(join(dir, MANIFEST_FILE), JSON.stringify(m, null, 1) + '\n');
  return m;
}

/** Reads dir/manifest.json; null when there is none. Throws a message naming the file when it is unreadable. */
export function readManifest(dir: string): Manifest | null {
  const p = join(dir, MANIFEST_FILE);
  if (!existsSync(p)) return null;
  let m: Manifest;
  try {
    m = JSON.parse(readFileSync(p, 'utf8')) as Manifest;
  } catch (e) {
    throw new Error(`${p} is not valid JSON (${(e as Error).message})`);
  }
  if (m === null || typeof m !== 'object' || m.version !== 1 || m.files === null || typeof m.files !== 'object') throw new Error(`${p} is not a version-1 manifest`);
  return m;
}

/**
 * Checks dir against its manifest: every listed file exists with the listed size and (when
 * `hashes`) SHA-256. Returns the first fault as a sentence naming the file, or null.
 * A directory without a manifest is reported as such.
 */
export function manifestFault(dir: string, opts: { hashes?: boolean } = {}): string | null {
  let m: Manifest | null;
  try {
    m = readManifest(dir);
  } catch (e) {
    return (e as Error).message;
  }
  if (!m) return `${join(dir, MANIFEST_FILE)} is missing (the checkpoint was not completed)`;
  for (const [f, e] of Object.entries(m.files)) {
    const p = join(dir, f);
    if (!existsSync(p)) return `${p} is missing (listed in the manifest)`;
    const size = statSync(p).size;
    if (size !== e.bytes) return `${p} has ${size} bytes, the manifest says ${e.bytes} (truncated or replaced)`;
    if ((opts.hashes ?? true) && sha256File(p) !== e.sha256) return `${p} does not match its SHA-256 in the manifest (corrupted)`;
  }
  return null;
}
