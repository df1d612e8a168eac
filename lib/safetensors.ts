// The safetensors format (F32 tensors), used by every TypeScript reader and writer of tensor
// files in lib: master weights, optimizer moments and the KL reference of a checkpoint.
// Layout: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the tensor bytes (offsets relative to the end of the header).
import { readFileSync } from 'node:fs';

/**
 * The bytes of a safetensors file as chunks, in order: the 8-byte length and JSON header, then
 * each tensor's data as a view of its Float32Array (no copy; little-endian hosts, as every
 * platform the addon builds for).
 */
export function safetensorsF32Chunks(tensors: F32Tensors, metadata: Record<string, string> = {}): Uint8Array[] {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  const names = Object.keys(tensors).sort();
  for (const n of names) {
    const t = tensors[n]!;
    header[n] = { dtype: 'F32', shape: t.shape, data_offsets: [off, off + t.data.byteLength] };
    off += t.data.byteLength;
  }
  let hjson = JSON.stringify(header);
  while ((8 + Buffer.byteLength(hjson)) % 8 !== 0) hjson += ' ';
  const hbuf = Buffer.from(hjson, 'utf8');
  const head = Buffer.alloc(8 + hbuf.length);
  head.writeBigUInt64LE(BigInt(hbuf.length), 0);
  hbuf.copy(head, 8);
  return [head, ...names.map((n) => {
    const d = tensors[n]!.data;
    return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  })];
}

export function encodeSafetensorsF32(tensors: F32Tensors, metadata: Record<string, string> = {}): Buffer {
  return Buffer.concat(safetensorsF32Chunks(tensors, metadata));
}

export type F32Tensors = Record<string, { shape: number[]; data: Float32Array }>;

/** A file that is not a well-formed safetensors file; the message names the file and the fault. */
export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
}

/**
 * Decodes F32 tensors. Every structural fact is checked against the buffer before any byte is
 * read: the header fits the file and is a JSON object; each tensor is F32, its shape is a list
 * of integers >= 0, its data_offsets lie inside the data section, its byte count is
 * 4 * prod(shape), and no two tensors overlap. `where` names the file in errors.
 */
export function decodeSafetensorsF32(buf: Buffer, where = 'safetensors buffer'): { tensors: F32Tensors; metadata: Record<string, string> } {
  const bad = (what: string): SafetensorsError => new SafetensorsError(`${where}: corrupt safetensors file: ${what}`);
  if (buf.length < 8) throw bad(`${buf.length} bytes, shorter than the 8-byte header length`);
  const hlen64 = buf.readBigUInt64LE(0);
  if (hlen64 > BigInt(buf.length - 8)) throw bad(`header length ${hlen64} exceeds the ${buf.length - 8} bytes after it (truncated?)`);
  const hlen = Number(hlen64);
  let header: unknown;
  try {
    header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8'));
  } catch (e) {
    throw bad(`header is not valid JSON (${(e as Error).message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad('header is not a JSON object');
  const base = 8 + hlen;
  const dataLen = buf.length - base;
  const tensors: F32Tensors = {};
  let metadata: Record<string, string> = {};
  const spans: [number, number, string][] = [];
  for (const [n, h] of Object.entries(header as Record<string, unknown>)) {
    if (n === '__metadata__') {
      if (h === null || typeof h !== 'object' || Array.isArray(h)) throw bad('__metadata__ is not an object');
      metadata = h as Record<string, string>;
      continue;
    }
    const e = h as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
    if (e === null || typeof e !== 'object') throw bad(`entry of tensor '${n}' is not an object`);
    if (e.dtype !== 'F32') throw bad(`tensor '${n}' has dtype ${JSON.stringify(e.dtype)}, expected F32`);
    const shape = e.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw bad(`tensor '${n}' has shape ${JSON.stringify(shape)}, expected a list of integers >= 0`);
    const offs = e.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isSafeInteger(o) && o >= 0)) throw bad(`tensor '${n}' has data_offsets ${JSON.stringify(offs)}`);
    const [a, b] = offs as [number, number];
    if (b < a || b > dataLen) throw bad(`data of tensor '${n}' (bytes ${a}..${b}) lies outside the ${dataLen} data bytes (truncated?)`);
    const numel = (shape as number[]).reduce((x, y) => x * y, 1);
    if (b - a !== 4 * numel) throw bad(`tensor '${n}' has ${b - a} bytes for shape [${(shape as number[]).join(', ')}] (${4 * numel} expected)`);
    spans.push([a, b, n]);
    const copy = new Float32Array(numel);
    Buffer.from(copy.buffer).set(buf.subarray(base + a, base + b));
    tensors[n] = { shape: shape as number[], data: copy };
  }
  spans.sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < spans.length; i++) {
    if (spans[i]![0] < spans[i - 1]![1]) throw bad(`tensors '${spans[i - 1]![2]}' and '${spans[i]![2]}' overlap`);
  }
  return { tensors, metadata };
}

/** Reads and decodes an F32 safetensors file (errors name the path). */
export function readSafetensorsF32(path: string): { tensors: F32Tensors; metadata: Record<string, string> } {
  return decodeSafetensorsF32(readFileSync(path), path);
}

/**
 * Checks decoded tensors against what a model expects: exactly these names, each with this
 * shape. Returns the first difference as a sentence, or null.
 */
export function tensorMismatch(tensors: F32Tensors, expected: readonly { name: string; shape: readonly number[] }[]): string | null {
  const want = new Map(expected.map((p) => [p.name, p.shape]));
  for (const p of expected) {
    const t = tensors[p.name];
    if (!t) return `tensor '${p.name}' is missing`;
    if (t.shape.length !== p.shape.length || t.shape.some((d, i) => d !== p.shape[i])) return `tensor '${p.name}' has shape [${t.shape.join(', ')}], the model expects [${p.shape.join(', ')}]`;
  }
  for (const n of Object.keys(tensors)) if (!want.has(n)) return `tensor '${n}' is not a parameter of the model`;
  return null;
}
