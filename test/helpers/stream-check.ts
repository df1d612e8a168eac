// The log-prob kernels' paths for operands in cache and in memory (native/cpu/logprob.cc,
// cache_bytes): a call whose logits / gradient are at least MURPHY_LOGPROB_CACHE_BYTES bytes
// takes the memory path (backward: non-temporal stores, stream_units in logprob_simd.inc; forward
// has one path, and its rows must not depend on the call either), one below it the cache path,
// and both must give the same bits. The caller sets MURPHY_LOGPROB_CACHE_BYTES (read once per
// process) so that one row stays below it and the whole call does not; each case is computed
// in one call and again row by row into the same addresses (same alignment), over
// vocabularies that leave no, some and all elements to the scalar tail (and, forward, one or
// several blocks of 1,024) and output views at every 4-byte (f32) / 2-byte (bf16) offset within
// a 64-byte line. The backward in place (the output the logits themselves, at each of those
// offsets: plain stores whatever the size, as the CPU engine calls it) must give the same bits
// too, a row with a zero gradient among them. Run as a script it prints the result as JSON, so that a test can run it under
// MURPHY_SIMD=avx512|avx2|baseline.
import { cpuInfo, logprobBackward, logprobForward, toBf16 } from '../../lib/native.js';
import { Rng } from './random.js';

export const CACHE_BYTES = 8192;

export interface StreamCheck {
  simd: string;
  cases: number;
  /** "dtype V rows offset: first differing byte" for each case whose two outputs differ */
  mismatches: string[];
}

export function checkStreaming(seed: number): StreamCheck {
  if (Number(process.env.MURPHY_LOGPROB_CACHE_BYTES) !== CACHE_BYTES) throw new Error(`set MURPHY_LOGPROB_CACHE_BYTES=${CACHE_BYTES} before loading the addon`);
  const rng = new Rng(seed);
  const mismatches: string[] = [];
  let cases = 0;
  for (const dtype of ['f32', 'bf16'] as const) {
    const esz = dtype === 'f32' ? 4 : 2;
    const maxV = CACHE_BYTES / esz - 1; // one row below the threshold
    for (const v of [5, 31, 64, 100, 257, 1000, 1500, maxV]) {
      const rows = Math.ceil(CACHE_BYTES / (v * esz)) + 1 + rng.int(3); // the whole call at or above it
      const z = rng.normals(rows * v, 3);
      // each block of 1,024 gets its maximum near its start or its end (alternating rows), where
      // a block's max taken in the wrong range would miss it
      for (let r = 0; r < rows; r++) {
        for (let b = 0; b < v; b += 1024) {
          const len = Math.min(1024, v - b), at = Math.min(len - 1, rng.int(64));
          z[r * v + b + (r % 2 ? at : len - 1 - at)] = 12 + rng.uniform(0, 4);
        }
      }
      const logits = dtype === 'f32' ? z : (toBf16(z) as Uint16Array);
      const targets = Int32Array.from({ length: rows }, () => rng.int(v));
      const lse = Float32Array.from({ length: rows }, () => rng.uniform(1, 8));
      const gradLogp = Float32Array.from({ length: rows }, () => rng.uniform(-2, 2));
      gradLogp[rng.int(rows)] = 0;  // (a zeroed row)
      // forward, with and without entropy (two loops): one call (memory path) against row by row (cache path)
      for (const entropy of [true, false]) {
        cases++;
        const all = logprobForward({ logits, targets, nRows: rows, vocab: v, temperature: 0.7, entropy });
        const bits = (x: unknown) => Array.from(new Uint32Array((x as Float32Array).buffer.slice(0)));
        for (let r = 0; r < rows; r++) {
          const one = logprobForward({ logits: logits.subarray(r * v, (r + 1) * v), targets: targets.subarray(r, r + 1), nRows: 1, vocab: v, temperature: 0.7, entropy });
          for (const key of entropy ? (['logp', 'lse', 'entropy'] as const) : (['logp', 'lse'] as const)) {
            if (bits(one[key])[0] !== bits(all[key])[r]) mismatches.push(`forward ${dtype} V=${v} rows=${rows} row ${r}: ${key}`);
          }
        }
      }
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
        // in place, into a copy of the logits at the same offset
        const bufIn = mk(), inPlace = bufIn.subarray(offset, offset + rows * v);
        inPlace.set(logits);
        logprobBackward({ logits: inPlace, targets, nRows: rows, vocab: v, lse, gradLogp, temperature: 0.7, out: inPlace });
        const c = new Uint8Array(bufIn.buffer);
        const atIn = a.findIndex((x, i) => x !== c[i]);
        if (atIn >= 0) mismatches.push(`${dtype} V=${v} rows=${rows} offset=${offset}: in place, byte ${atIn}`);
      }
    }
  }
  return { simd: cpuInfo().simd, cases, mismatches };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  console.log(JSON.stringify(checkStreaming(Number(process.argv[2]))));
}
