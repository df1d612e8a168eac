// A checkpoint's manifest: the size and integrity hash of every file in the checkpoint
// directory, written last (atomically) so its presence means the rest was complete, and
// checked before a resume trusts the checkpoint.
//
//   CKPT/manifest.json   {"version": 2, "hash": "xxh64", "files": {"state.json": {"bytes": N, "xxh64": "..."}, ...}}
//
// The hash is XXH64 (native/cpu/xxh64.cc): the manifest defends against truncation and
// accidental corruption (bit rot, torn writes), not against an adversary (who could rewrite an
// unsigned manifest as well), and a 64-bit hash misses a random corruption with probability
// 2^-64 per file. Files written through ManifestWriter.writeFile are hashed from memory while
// their bytes go to disk (one pass, no re-read), those of the native Hugging Face save by the
// save itself (record()); the others are read back once, in parallel.
// Version-1 manifests ({"bytes", "sha256"} per file, written before XXH64) still verify.
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { xxh64Buffers, xxh64File } from '../native.js';
import { writeFileAtomic } from './rundir.js';

export const MANIFEST_FILE = 'manifest.json';

/** One file: its size and its hash (xxh64 in version 2, sha256 in version 1). */
export interface ManifestEntry {
  bytes: number;
  xxh64?: string;
  sha256?: string;
}

export interface Manifest {
  version: 1 | 2;
  hash?: 'xxh64';
  files: Record<string, ManifestEntry>;
}

/** SHA-256 of a file, read in 4 MiB chunks (version-1 manifests). */
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

function asChunks(data: string | Uint8Array | readonly Uint8Array[]): readonly Uint8Array[] {
  if (typeof data === 'string') return [Buffer.from(data, 'utf8')];
  return data instanceof Uint8Array ? [data] : data;
}

/**
 * Writes `path` atomically (the chunks in order) while hashing the same bytes in memory on a
 * worker thread (no read-back); returns its manifest entry. For a file another process's
 * manifest lists (a data-parallel rank's optimizer shard: ManifestWriter.record on rank 0).
 */
export async function writeFileHashed(path: string, data: string | Uint8Array | readonly Uint8Array[]): Promise<{ bytes: number; xxh64: string }> {
  const chunks = asChunks(data);
  const hashing = xxh64Buffers(chunks);
  try {
    writeFileAtomic(path, chunks);
  } catch (e) {
    await hashing.catch(() => undefined);
    throw e;
  }
  return { bytes: chunks.reduce((s, c) => s + c.byteLength, 0), xxh64: await hashing };
}

/**
 * Writes the files of one checkpoint directory and then its manifest. writeFile hashes the
 * bytes in memory on a worker thread while the same bytes are written (atomically) to disk;
 * record() takes the hash of a file whose writer hashed it (the native save's weights);
 * finish() hashes whatever else is in the directory (files written by other code, e.g. a
 * model's config.json), in parallel, and writes the manifest last.
 */
export class ManifestWriter {
  private readonly known = new Map<string, ManifestEntry>();
  constructor(readonly dir: string) {}

  /** Writes dir/rel atomically (the chunks in order) and records its size and hash. */
  async writeFile(rel: string, data: string | Uint8Array | readonly Uint8Array[]): Promise<void> {
    this.known.set(rel, await writeFileHashed(join(this.dir, rel), data));
  }

  /**
   * Takes the size and hash of dir/rel from code that hashed the bytes as it wrote them (the
   * native Hugging Face save, native/model/weights.cc), so finish() need not read it back.
   */
  record(rel: string, entry: { bytes: number; xxh64: string }): void {
    this.known.set(rel, { bytes: entry.bytes, xxh64: entry.xxh64 });
  }

  /** Hashes the files not written through writeFile or record()ed (and any whose size changed since), then writes the manifest. */
  async finish(): Promise<Manifest> {
    const names = listFiles(this.dir);
    const entries = await Promise.all(
      names.map(async (f): Promise<ManifestEntry> => {
        const k = this.known.get(f);
        if (k && statSync(join(this.dir, f)).size === k.bytes) return k;
        const { bytes, xxh64 } = await xxh64File(join(this.dir, f));
        return { bytes, xxh64 };
      }),
    );
    const m: Manifest = { version: 2, hash: 'xxh64', files: Object.fromEntries(names.map((f, i) => [f, entries[i]!])) };
    writeFileAtomic(join(this.dir, MANIFEST_FILE), JSON.stringify(m, null, 1) + '\n');
    return m;
  }
}

/** Hashes every file under dir and writes dir/manifest.json (atomically, last). */
export function writeManifest(dir: string): Promise<Manifest> {
  return new ManifestWriter(dir).finish();
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
  if (m === null || typeof m !== 'object' || m.files === null || typeof m.files !== 'object' || (m.version !== 1 && m.version !== 2)) {
    throw new Error(`${p} is not a version-1 or version-2 manifest`);
  }
  const key = m.version === 1 ? 'sha256' : 'xxh64';
  for (const [f, e] of Object.entries(m.files)) {
    if (e === null || typeof e !== 'object' || !Number.isSafeInteger(e.bytes) || typeof e[key] !== 'string') {
      throw new Error(`${p}: the entry of ${f} is not {"bytes", "${key}"}; the manifest is damaged`);
    }
  }
  return m;
}

/** The manifest, or the fault that makes it unusable (missing, unreadable). */
function loadManifest(dir: string): Manifest | string {
  try {
    return readManifest(dir) ?? `${join(dir, MANIFEST_FILE)} is missing (the checkpoint was not completed)`;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Presence and sizes only (no hashing): the first file missing or of the wrong size, or null. */
export function manifestSizeFault(dir: string): string | null {
  const m = loadManifest(dir);
  if (typeof m === 'string') return m;
  for (const [f, e] of Object.entries(m.files)) {
    const p = join(dir, f);
    if (!existsSync(p)) return `${p} is missing (listed in the manifest)`;
    const size = statSync(p).size;
    if (size !== e.bytes) return `${p} has ${size} bytes, the manifest says ${e.bytes} (truncated or replaced)`;
  }
  return null;
}

/**
 * Checks dir against its manifest: every listed file exists with the listed size and (when
 * `hashes`, the default) hash; the files are hashed in parallel. Returns the first fault in
 * the manifest's order as a sentence naming the file, or null. A directory without a manifest
 * is reported as such.
 */
export async function manifestFault(dir: string, opts: { hashes?: boolean } = {}): Promise<string | null> {
  const sizes = manifestSizeFault(dir);
  if (sizes !== null || opts.hashes === false) return sizes;
  const m = loadManifest(dir) as Manifest;
  const faults = await Promise.all(
    Object.entries(m.files).map(async ([f, e]): Promise<string | null> => {
      const p = join(dir, f);
      if (m.version === 1) return sha256File(p) === e.sha256 ? null : `${p} does not match its SHA-256 in the manifest (corrupted)`;
      const got = await xxh64File(p);
      if (got.bytes !== e.bytes) return `${p} has ${got.bytes} bytes, the manifest says ${e.bytes} (truncated or replaced)`;
      return got.xxh64 === e.xxh64 ? null : `${p} does not match its XXH64 hash in the manifest (corrupted)`;
    }),
  );
  return faults.find((f) => f !== null) ?? null;
}
