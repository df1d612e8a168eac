// Shared by the model tests: a minimal safetensors reader (f32 only, for the fixtures) and the
// per-tensor relative error used for PyTorch parity.
import { readFileSync } from 'node:fs';

/** Reads an F32 safetensors file into name -> Float32Array. */
export function readSafetensorsF32(path: string): Map<string, Float32Array> {
  const buf = readFileSync(path);
  const hlen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out = new Map<string, Float32Array>();
  for (const [name, e] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (e.dtype !== 'F32') throw new Error(`${path}: ${name} is ${e.dtype}, expected F32`);
    const [a, b] = e.data_offsets;
    const bytes = buf.subarray(8 + hlen + a, 8 + hlen + b);
    out.set(name, new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)));
  }
  return out;
}

/** max |a - b| / max |b| over one tensor (0 when both are all zero). */
export function relError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= num)) num = Number.isNaN(d) ? Infinity : d;
    den = Math.max(den, Math.abs(b[i]));
  }
  return den === 0 ? num : num / den;
}
