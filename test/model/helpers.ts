// Shared by the model tests: a minimal safetensors reader (f32 only, for the fixtures) and the
// per-tensor relative error used for PyTorch parity.
import { readFileSync } from 'node:fs';
import { decodeSafetensorsF32 } from '../../lib/safetensors.js';

/** Reads an F32 safetensors file into name -> Float32Array (lib's one safetensors codec). */
export function readSafetensorsF32(path: string): Map<string, Float32Array> {
  const { tensors } = decodeSafetensorsF32(readFileSync(path));
  return new Map(Object.entries(tensors).map(([name, t]) => [name, t.data]));
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
