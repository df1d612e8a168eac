// The run directory and crash-safe file writes.
//
//   RUN/config.json            resolved configuration (written once, atomically)
//   RUN/metrics.jsonl          one JSON line per training step
//   RUN/trees.jsonl.gz         rollout trees, one JSON line per tree (gzip members appended per step)
//   RUN/eval/*.json            Iter-k evaluation results (format of `murphy-native eval`)
//   RUN/checkpoints/step-N/    policy (Hugging Face format) + trainer state
//   RUN/checkpoints/latest     name of the newest complete checkpoint
//   RUN/report.html            `murphy-native report RUN`
//
// Whole files are written to a temporary sibling, fsynced and renamed; appends are fsynced,
// and their byte offsets are recorded in each checkpoint so a resume truncates whatever a
// crash left after the last checkpoint.
import { accessSync, closeSync, constants, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, truncateSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';

function fsyncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // some filesystems do not allow fsync on directories
  }
}

/**
 * Writes a whole file atomically: tmp sibling, fsync, rename, fsync of the directory. `data`
 * may be a list of chunks written in order (large files without one buffer of their size).
 */
export function writeFileAtomic(path: string, data: string | Uint8Array | readonly Uint8Array[]): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const fd = openSync(tmp, 'w');
  try {
    const chunks = typeof data === 'string' ? [Buffer.from(data, 'utf8')] : data instanceof Uint8Array ? [data] : data;
    for (const buf of chunks) {
      let off = 0;
      // at most 1 GiB per call: writeSync refuses lengths of 2 GiB and more (one tensor can be larger)
      while (off < buf.length) off += writeSync(fd, buf, off, Math.min(buf.length - off, 1 << 30));
    }
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, path);
  fsyncDir(dir);
}

/** Appends and fsyncs; returns the file size afterwards. */
export function appendDurable(path: string, data: string | Uint8Array): number {
  const fd = openSync(path, 'a');
  try {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return statSync(path).size;
}

/** The nearest existing ancestor of path (path itself when it exists). */
function existingAncestor(path: string): string {
  let p = resolve(path);
  while (!existsSync(p) && dirname(p) !== p) p = dirname(p);
  return p;
}

function assertWritableDir(dir: string, path: string, what: string): void {
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch {
    throw new OutputError(`${what} ${path}: cannot write to ${dir} (permission denied)`);
  }
}

/** An output that cannot be written; thrown before any work starts. */
export class OutputError extends Error {
  override name = 'OutputError';
}

/**
 * Checks, before the work starts, that a file can be written at `path`: it is not a directory,
 * and the directory it goes into exists or can be created, and is writable.
 */
export function checkOutputFile(path: string, what: string): void {
  const p = resolve(path);
  if (existsSync(p) && statSync(p).isDirectory()) throw new OutputError(`${what} ${path} is a directory; give a file name, e.g. ${join(path, 'results.json')}`);
  const anc = existingAncestor(dirname(p));
  if (!statSync(anc).isDirectory()) throw new OutputError(`${what} ${path}: ${anc} is a file, not a directory`);
  assertWritableDir(anc, path, what);
}

/** Checks, before the work starts, that directory `path` exists or can be created, and is writable. */
export function checkOutputDir(path: string, what: string): void {
  const p = resolve(path);
  const anc = existingAncestor(p);
  if (!statSync(anc).isDirectory()) throw new OutputError(`${what} ${path}: ${anc} is a file, not a directory`);
  assertWritableDir(anc, path, what);
}

export function fileSize(path: string): number {
  return existsSync(path) ? statSync(path).size : 0;
}

export class RunDir {
  readonly root: string;
  constructor(root: string) {
    this.root = resolve(root);
  }
  get configPath(): string {
    return join(this.root, 'config.json');
  }
  get metricsPath(): string {
    return join(this.root, 'metrics.jsonl');
  }
  get treesPath(): string {
    return join(this.root, 'trees.jsonl.gz');
  }
  get evalDir(): string {
    return join(this.root, 'eval');
  }
  get checkpointsDir(): string {
    return join(this.root, 'checkpoints');
  }
  get reportPath(): string {
    return join(this.root, 'report.html');
  }
  checkpointDir(step: number): string {
    return join(this.checkpointsDir, `step-${String(step).padStart(6, '0')}`);
  }

  create(): void {
    mkdirSync(this.root, { recursive: true });
  }

  /** Appends metric records (one line each). Returns the new byte size of metrics.jsonl. */
  appendMetrics(records: readonly object[]): number {
    return appendDurable(this.metricsPath, records.map((r) => JSON.stringify(r) + '\n').join(''));
  }

  /** Appends lines as one gzip member (concatenated members form one valid gzip stream). */
  appendTreeLines(lines: readonly string[]): number {
    if (lines.length === 0) return fileSize(this.treesPath);
    return appendDurable(this.treesPath, gzipSync(Buffer.from(lines.join('\n') + '\n', 'utf8')));
  }

  /** Cuts the append-only files back to the sizes a checkpoint recorded. */
  truncateTo(sizes: { metricsBytes: number; treesBytes: number }): void {
    for (const [p, n] of [[this.metricsPath, sizes.metricsBytes], [this.treesPath, sizes.treesBytes]] as const) {
      if (!existsSync(p)) {
        if (n > 0) throw new Error(`${p} is missing but the checkpoint recorded ${n} bytes`);
        continue;
      }
      const size = statSync(p).size;
      if (size < n) throw new Error(`${p} has ${size} bytes, fewer than the ${n} the checkpoint recorded`);
      if (size > n) truncateSync(p, n);
    }
  }
}

/** Reads metrics.jsonl (skipping a torn last line). */
export function readMetrics(path: string): Record<string, unknown>[] {
  if (!existsSync(path)) return [];
  const out: Record<string, unknown>[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a torn line after a crash
    }
  }
  return out;
}

/** Reads every line of trees.jsonl.gz as parsed JSON. */
export function readTreeLines(path: string): Record<string, unknown>[] {
  if (!existsSync(path)) return [];
  const text = gunzipSync(readFileSync(path)).toString('utf8');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
