// The safetensors format (F32 tensors), used by every TypeScript reader and writer of tensor
// files in lib: master weights, optimizer moments and the KL reference of a checkpoint.
// Layout: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the tensor bytes (offsets relative to the end of the header).
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

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

/** One tensor of a checked header: where its bytes lie in the data section. */
interface TensorSpan {
  name: string;
  shape: number[];
  numel: number;
  /** Byte offsets relative to the start of the data section. */
  begin: number;
  end: number;
}

/**
 * Checks a safetensors header (the JSON text) against the size of the data section after it:
 * it is a JSON object; each tensor is F32, its shape is a list of integers >= 0, its
 * data_offsets lie inside the data section, its byte count is 4 * prod(shape), and no two
 * tensors overlap. `bad` builds the error naming the file.
 */
function checkHeader(text: string, dataLen: number, bad: (what: string) => SafetensorsError): { spans: TensorSpan[]; metadata: Record<string, string> } {
  let header: unknown;
  try {
    header = JSON.parse(text);
  } catch (e) {
    throw bad(`header is not valid JSON (${(e as Error).message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad('header is not a JSON object');
  let metadata: Record<string, string> = {};
  const spans: TensorSpan[] = [];
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
    spans.push({ name: n, shape: shape as number[], numel, begin: a, end: b });
  }
  const sorted = [...spans].sort((x, y) => x.begin - y.begin);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]!.begin < sorted[i - 1]!.end) throw bad(`tensors '${sorted[i - 1]!.name}' and '${sorted[i]!.name}' overlap`);
  }
  return { spans, metadata };
}

/** The header length from the first 8 bytes, checked against the bytes after them. */
function headerLength(first8: Buffer, total: number, bad: (what: string) => SafetensorsError): number {
  if (total < 8) throw bad(`${total} bytes, shorter than the 8-byte header length`);
  const hlen64 = first8.readBigUInt64LE(0);
  if (hlen64 > BigInt(total - 8)) throw bad(`header length ${hlen64} exceeds the ${total - 8} bytes after it (truncated?)`);
  return Number(hlen64);
}

/**
 * Decodes F32 tensors. Every structural fact is checked against the buffer before any byte is
 * read (checkHeader). `where` names the file in errors.
 */
export function decodeSafetensorsF32(buf: Buffer, where = 'safetensors buffer'): { tensors: F32Tensors; metadata: Record<string, string> } {
  const bad = (what: string): SafetensorsError => new SafetensorsError(`${where}: corrupt safetensors file: ${what}`);
  const hlen = headerLength(buf.subarray(0, 8), buf.length, bad);
  const base = 8 + hlen;
  const { spans, metadata } = checkHeader(buf.subarray(8, base).toString('utf8'), buf.length - base, bad);
  const tensors: F32Tensors = {};
  for (const t of spans) {
    const copy = new Float32Array(t.numel);
    Buffer.from(copy.buffer).set(buf.subarray(base + t.begin, base + t.end));
    tensors[t.name] = { shape: t.shape, data: copy };
  }
  return { tensors, metadata };
}

/**
 * Reads and decodes an F32 safetensors file (errors name the path), with the checks of
 * decodeSafetensorsF32. The header is read and checked first; then each tensor's bytes are
 * read straight into its Float32Array, so files larger than one Node buffer (2 GiB for
 * readFileSync; a 0.6B model's fp32 master weights are 2.4 GB, its moments 4.8 GB) load.
 */
export function readSafetensorsF32(path: string): { tensors: F32Tensors; metadata: Record<string, string> } {
  const bad = (what: string): SafetensorsError => new SafetensorsError(`${path}: corrupt safetensors file: ${what}`);
  const fd = openSync(path, 'r');
  try {
    const total = fstatSync(fd).size;
    const readAt = (dst: Uint8Array, pos: number): void => {
      for (let off = 0; off < dst.length;) {
        const n = readSync(fd, dst, off, Math.min(dst.length - off, 1 << 30), pos + off);
        if (n === 0) throw bad(`the file ended at byte ${pos + off} while reading (changed while being read?)`);
        off += n;
      }
    };
    const first8 = Buffer.alloc(Math.min(8, total));
    readAt(first8, 0);
    const hlen = headerLength(first8, total, bad);
    const head = Buffer.alloc(hlen);
    readAt(head, 8);
    const base = 8 + hlen;
    const { spans, metadata } = checkHeader(head.toString('utf8'), total - base, bad);
    const tensors: F32Tensors = {};
    for (const t of spans) {
      const data = new Float32Array(t.numel);
      readAt(new Uint8Array(data.buffer), base + t.begin);
      tensors[t.name] = { shape: t.shape, data };
    }
    return { tensors, metadata };
  } finally {
    closeSync(fd);
  }
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
