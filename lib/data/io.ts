// Reading dataset files: plain or gzip, JSON array or JSON Lines.
import { readFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';

/**
 * Reads a text file, gunzipping it when it is gzip (by magic bytes, whatever its name). A
 * `.gz` name on a file that is not gzip, a damaged gzip stream and a missing file are errors
 * naming the file.
 */
export async function readText(path: string): Promise<string> {
  let buf: Buffer;
  try {
    buf = await readFile(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`${path}: file not found`);
    if (code === 'EISDIR') throw new Error(`${path} is a directory, not a dataset file`);
    throw new Error(`${path}: cannot read (${code ?? (e as Error).message})`);
  }
  const gzip = buf.length >= 2 && buf[0] === 0x1f && buf[1] === 0x8b;
  if (!gzip && /\.gz$/i.test(path)) throw new Error(`${path}: not gzip (the name ends in .gz but the file does not start with the gzip signature)`);
  if (!gzip) return buf.toString('utf8');
  try {
    return gunzipSync(buf).toString('utf8');
  } catch (e) {
    throw new Error(`${path}: damaged gzip data (${(e as Error).message})`);
  }
}

/** Parses JSON Lines (blank lines skipped); errors name the line. */
export function parseJsonl(text: string, path = '<input>'): unknown[] {
  const out: unknown[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    try {
      out.push(JSON.parse(line));
    } catch (e) {
      throw new Error(`${path}:${i + 1}: not valid JSON (${(e as Error).message})`);
    }
  }
  return out;
}

/** Parses either a JSON array or JSON Lines. */
export function parseRecords(text: string, path = '<input>'): Record<string, unknown>[] {
  const t = text.trimStart();
  let recs: unknown[];
  if (t.startsWith('[')) {
    const v: unknown = JSON.parse(t);
    if (!Array.isArray(v)) throw new Error(`${path}: expected a JSON array`);
    recs = v;
  } else {
    recs = parseJsonl(text, path);
  }
  return recs.map((r, i) => {
    if (r === null || typeof r !== 'object' || Array.isArray(r)) throw new Error(`${path}: record ${i + 1} is not an object`);
    return r as Record<string, unknown>;
  });
}

export function str(rec: Record<string, unknown>, key: string, where: string): string {
  const v = rec[key];
  if (typeof v !== 'string') throw new Error(`${where}: field "${key}" must be a string`);
  return v;
}

export function optStr(rec: Record<string, unknown>, key: string): string | undefined {
  const v = rec[key];
  return typeof v === 'string' ? v : undefined;
}

export function strList(rec: Record<string, unknown>, key: string, where: string): string[] {
  const v = rec[key];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Error(`${where}: field "${key}" must be a list of strings`);
  return v as string[];
}
