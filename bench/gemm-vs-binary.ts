// The fp32 matrix products of this build against another native binary (e.g. one built from an
// earlier commit), in one process: `node --import tsx bench/gemm-vs-binary.ts OTHER.node
// [--json FILE] [--rounds N] [--only TEXT] [--path avx512|generic|...]`.
//
// Both addons are loaded side by side; per shape (bench/model-shapes.ts's layer products, no LM
// head) the two are interleaved for --rounds rounds (default 12) of a few reps each, and each
// side keeps its best wall time and its best CPU time (process.cpuUsage: all threads; each
// binary's pool spins ~100 us after a product before it sleeps, so the first rep after the other
// side's turn may share a core with that spin: the best of the reps leaves it out). On a busy machine
// wall time swings with time slicing; CPU time shows the work each build does (packing included).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { alignedArray, cpuInfo, linearProduct, type LinearProductKind, type GemmPathName } from '../lib/native.js';
import type { RawAddon } from '../lib/native/raw.js';
import { cliArgs, machineInfo, writeJsonAtomic } from './common.js';
import { gemmShapes, modelCases } from './model-shapes.js';

const { argv, opt } = cliArgs();
const log = (s: string) => process.stderr.write(`${s}\n`);
const other = argv[0] && !argv[0].startsWith('--') ? resolve(argv[0]) : undefined;
if (!other) {
  log('usage: node --import tsx bench/gemm-vs-binary.ts OTHER.node [--json FILE] [--rounds N] [--only TEXT] [--path NAME]');
  process.exit(2);
}
const theirs = createRequire(import.meta.url)(other) as RawAddon;
if (!theirs.linearProduct) {
  log(`${other} predates linearProduct: nothing to compare`);
  process.exit(2);
}
const rounds = Number(opt('--rounds') ?? 12);
const path = (opt('--path') ?? 'auto') as GemmPathName;
// Binaries before 2026-12-07 take linearProduct's arguments as one object (their gemmInfo has no
// `call`); later ones positionally. Either way the products timed here (32 rows and more) take far
// longer than the call (~2.4 us for the object, ~0.8 us positional).
type Sizes = { m: number; n: number; k: number };
const theirLinear = theirs.linearProduct as unknown as (...args: unknown[]) => string;
const theirCall = theirs.gemmInfo?.().call === 'positional'
  ? (kind: LinearProductKind, a: Float32Array, b: Float32Array, out: Float32Array, L: Sizes, accumulate: boolean) =>
    theirLinear(kind, a, b, out, L.m, L.n, L.k, accumulate, path, 1)
  : (kind: LinearProductKind, a: Float32Array, b: Float32Array, out: Float32Array, L: Sizes, accumulate: boolean) =>
    theirLinear({ product: kind, a, b, out, ...L, accumulate, path });
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').trim();
// operands on 64-byte boundaries, as the model's weights and gemm.bench.ts's are
const fill = (n: number) => {
  const a = alignedArray(Float32Array, n);
  for (let i = 0; i < n; i++) a[i] = Math.sin(i * 12.9898);
  return a;
};

const loadStart = loadavg();
log(`gemm-vs-binary: ${other} vs this build, path ${path}, ${cpuInfo().threads} threads, ${rounds} rounds; load ${loadStart}`);
const rows: Record<string, unknown>[] = [];
for (const c of modelCases(false)) {
  for (const [name, m, k, n, product] of gemmShapes(c)) {
    if (name.includes('lm head') || m <= 32 || (opt('--only') && !name.includes(opt('--only')!))) continue;
    const kind = product as LinearProductKind;
    // The linear layer's sizes (tokens, out, in) behind the plain (m x k) (k x n) product, as in
    // gemm.bench.ts (passing m, n, k as they are ran the backward rows on other shapes: "down dx"
    // timed gate/up dx's product and the reverse, the weight gradients other products again).
    const L = kind === 'forward' ? { m, n, k } : kind === 'backwardInput' ? { m, n: k, k: n } : { m: k, n: m, k: n };
    const a = fill(kind === 'forward' ? L.m * L.k : L.m * L.n);
    const b = fill(kind === 'backwardWeight' ? L.m * L.k : L.n * L.k);
    const out = alignedArray(Float32Array, kind === 'forward' ? L.m * L.n : kind === 'backwardInput' ? L.m * L.k : L.n * L.k);
    const accumulate = kind === 'backwardWeight';
    const sides = {
      other: () => theirCall(kind, a, b, out, L, accumulate),
      this: () => linearProduct(kind, a, b, out, L, { accumulate, path }),
    };
    const best = { other: { wall: Infinity, cpu: Infinity }, this: { wall: Infinity, cpu: Infinity } };
    const flops = 2 * m * n * k, reps = Math.max(2, Math.min(20, Math.round(3e8 / flops)));
    for (let r = 0; r < rounds; r++) {
      for (const side of ['other', 'this'] as const) {
        for (let i = 0; i < reps; i++) {
          const c0 = process.cpuUsage(), t0 = performance.now();
          sides[side]();
          const wall = performance.now() - t0, cu = process.cpuUsage(c0);
          best[side].wall = Math.min(best[side].wall, wall);
          best[side].cpu = Math.min(best[side].cpu, (cu.user + cu.system) / 1e3);
        }
      }
    }
    const row = {
      name, product, m, k, n, reps,
      other_wall_ms: best.other.wall, this_wall_ms: best.this.wall, other_cpu_ms: best.other.cpu, this_cpu_ms: best.this.cpu,
      wall_speedup: best.other.wall / best.this.wall, cpu_speedup: best.other.cpu / best.this.cpu,
    };
    rows.push(row);
    log(`  ${name.padEnd(36)} ${`${m}x${k}x${n}`.padEnd(16)} wall ${row.wall_speedup.toFixed(2)}x  CPU time ${row.cpu_speedup.toFixed(2)}x (this build vs other; > 1: this is faster)`);
  }
}
const loadEnd = loadavg();
log(`load at the end ${loadEnd}`);
const jsonPath = opt('--json');
if (jsonPath) {
  writeJsonAtomic(jsonPath, {
    date: new Date().toISOString(), machine: machineInfo(), other, path, threads: cpuInfo().threads, rounds,
    loadavg_start: loadStart, loadavg_end: loadEnd,
    note: 'this build vs another binary, one process, interleaved; best wall and best CPU time (all threads) per side; speedup = other / this',
    rows,
  });
}
