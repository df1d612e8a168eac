// The log-prob backward's streaming-store path (native/cpu/logprob_simd.inc, stream_units)
// against its plain-store path: a call whose whole gradient output is at least
// MURPHY_STREAM_MIN_BYTES bytes writes with non-temporal stores, one below it with plain
// stores, and both must write the same bits. The caller sets MURPHY_STREAM_MIN_BYTES (read
// once per process) so that one row stays below it and the whole call does not; each case is
// computed in one call and again row by row into the same addresses (same alignment), over
// vocabularies that leave no, some and all elements to the scalar tail and output views at
// every 4-byte (f32) / 2-byte (bf16) offset within a 64-byte line. Run as a script it prints
// the result as JSON, so that a test can run it under MURPHY_SIMD=avx2|baseline.
import { cpuInfo, logprobBackward, toBf16 } from '../../lib/native.js';
import { Rng } from './random.js';

export const STREAM_MIN_BYTES = 4096;

export interface StreamCheck {
  simd: string;
  cases: number;
  /** "dtype V rows offset: first differing index" for each case whose two outputs differ */
  mismatches: string[];
}

export function checkStreaming(seed: number): StreamCheck {
  if (Number(process.env.MURPHY_STREAM_MIN_BYTES) !== STREAM_MIN_BYTES) throw new Error(`set MURPHY_STREAM_MIN_BYTES=${STREAM_MIN_BYTES} before loading the addon`);
  const rng = new Rng(seed);
  const mismatches: string[] = [];
  let cases = 0;
  for (const dtype of ['f32', 'bf16'] as const) {
    const esz = dtype === 'f32' ? 4 : 2;
    const maxV = STREAM_MIN_BYTES / esz - 1; // one row below the threshold
    for (const v of [5, 31, 64, 100, 257, 1000, maxV]) {
      const rows = Math.ceil(STREAM_MIN_BYTES / (v * esz)) + 1 + rng.int(3); // the whole call at or above it
      const z = rng.normals(rows * v, 3);
      const logits = dtype === 'f32' ? z : (toBf16(z) as Uint16Array);
      const targets = Int32Array.from({ length: rows }, () => rng.int(v));
      const lse = Float32Array.from({ length: rows }, () => rng.uniform(1, 8));
      const gradLogp = Float32Array.from({ length: rows }, () => rng.uniform(-2, 2));
      for (let offset = 0; offset < 64 / esz; offset += 1 + rng.int(3)) {
        cases++;
        const mk = () => (dtype === 'f32' ? new Float32Array(rows * v + 64) : new Uint16Array(rows * v + 64));
        const bufAll = mk(), bufRows = mk();
        const outAll = bufAll.subarray(offset, offset + rows * v), outRows = bufRows.subarray(offset, offset + rows * v);
        logprobBackward({ logits, targets, nRows: rows, vocab: v, lse, gradLogp, temperature: 0.7, out: outAll });
        for (let r = 0; r < rows; r++) {
          logprobBackward({
            logits: logits.subarray(r * v, (r + 1) * v), targets: targets.subarray(r, r + 1), nRows: 1, vocab: v,
            lse: lse.subarray(r, r + 1), gradLogp: gradLogp.subarray(r, r + 1), temperature: 0.7, out: outRows.subarray(r * v, (r + 1) * v),
          });
        }
        const a = new Uint8Array(bufAll.buffer), b = new Uint8Array(bufRows.buffer);
        const at = a.findIndex((x, i) => x !== b[i]);
        if (at >= 0) mismatches.push(`${dtype} V=${v} rows=${rows} offset=${offset}: byte ${at}`);
      }
    }
  }
  return { simd: cpuInfo().simd, cases, mismatches };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  console.log(JSON.stringify(checkStreaming(Number(process.argv[2]))));
}
