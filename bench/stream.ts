// The benchmarks' bandwidth floor: this machine's memory bandwidth measured the way STREAM
// does (bench/stream.cc: all threads and one, pages first-touched by their thread, best of N,
// read-only sum (the best of several variants), copy and triad, with and without non-temporal
// stores, and the in-place update and nstream that optimizer-style kernels resemble; STREAM's
// byte counts). Each probe has an access pattern (read-only, copy: read one array and write
// another, in place); `by_access` is the best probe of each, which bench/run.ts sets beside
// each kernel of the same pattern.
// The helper is compiled here with the system C++ compiler (CXX, default c++) into
// build/bench-stream, and rebuilt when bench/stream.cc is newer.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type Access = 'read' | 'copy' | 'inplace';
export interface StreamPart {
  kernel: string;
  /** read: only reads; copy: reads arrays and writes another; inplace: writes back what it read */
  access: Access;
  threads: number;
  bytes: number;
  best_ms: number;
  gbps: number;
  /** for `sum`: the read-only variant that was fastest */
  variant?: string;
}
export interface StreamFloor {
  method: string;
  floats_per_array: number;
  reps: number;
  /** whether the arrays were on 2 MiB pages (MADV_HUGEPAGE taken; sum_4k_pages is not) */
  huge_pages: boolean;
  /** the fastest of the parts: the floor of a kernel moving B bytes is B / best.gbps */
  best: StreamPart;
  /** the fastest part of each access pattern */
  by_access: Record<Access, StreamPart>;
  parts: StreamPart[];
}

const fastest = (parts: StreamPart[]) => parts.reduce((a, b) => (b.gbps > a.gbps ? b : a));

function byAccess(parts: StreamPart[]): Record<Access, StreamPart> {
  const of = (a: Access) => {
    const ps = parts.filter((p) => p.access === a);
    if (ps.length === 0) throw new Error(`bandwidth probe: no ${a} probe measured`);
    return fastest(ps);
  };
  return { read: of('read'), copy: of('copy'), inplace: of('inplace') };
}

const here = dirname(fileURLToPath(import.meta.url));
const source = join(here, 'stream.cc');
const binary = join(here, '..', 'build', 'bench-stream');

const UNIT: Record<string, number> = { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 };

/** CPU 0's caches from sysfs: level and size in bytes of each (empty when unknown). */
function caches(): { level: number; bytes: number }[] {
  const out: { level: number; bytes: number }[] = [];
  for (let i = 0; i < 8; i++) {
    const dir = `/sys/devices/system/cpu/cpu0/cache/index${i}`;
    if (!existsSync(`${dir}/size`)) break;
    const m = /^(\d+)([KMG]?)/.exec(readFileSync(`${dir}/size`, 'utf8').trim());
    const level = existsSync(`${dir}/level`) ? Number(readFileSync(`${dir}/level`, 'utf8').trim()) : 0;
    if (m) out.push({ level, bytes: Number(m[1]) * UNIT[m[2]] });
  }
  return out;
}

/** Last-level cache size in bytes from sysfs (0 when unknown). */
export function lastLevelCacheBytes(): number {
  return Math.max(0, ...caches().map((c) => c.bytes));
}

/** The level-2 cache's size in bytes from sysfs (one core's on most CPUs; 0 when unknown). */
export function l2CacheBytes(): number {
  return Math.max(0, ...caches().filter((c) => c.level === 2).map((c) => c.bytes));
}

function build(): void {
  if (existsSync(binary) && statSync(binary).mtimeMs >= statSync(source).mtimeMs) return;
  mkdirSync(dirname(binary), { recursive: true });
  const cxx = process.env.CXX ?? 'c++';
  const r = spawnSync(cxx, ['-O3', '-march=native', '-fopenmp-simd', '-pthread', '-std=c++17', source, '-o', binary], { encoding: 'utf8' });
  if (r.status !== 0) {
    throw new Error(`cannot compile the bandwidth probe bench/stream.cc with ${cxx} (${(r.stderr || r.error?.message || '').trim().split('\n')[0]}); install a C++ compiler (apt-get install g++) or set CXX`);
  }
}

/** 512 MiB per array, or 4x the last-level cache when that is more (a VM may report less cache than the host has). */
function defaultFloats(): number {
  return Math.max(1 << 27, Math.ceil(lastLevelCacheBytes() / 16) * 16);
}

/**
 * Measures the floor: `threads` threads (and one), best of `reps`, arrays of `floats` floats
 * (default: >= 4x the last-level cache, as STREAM requires; tests pass a small size).
 */
export function measureStreamFloor(threads: number, reps: number, floats = defaultFloats()): StreamFloor {
  build();
  const r = spawnSync(binary, [String(threads), String(floats), String(reps)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`bandwidth probe failed: ${(r.stderr || r.error?.message || '').trim()}`);
  const out = JSON.parse(r.stdout) as { floats_per_array: number; reps: number; huge_pages: boolean; results: StreamPart[] };
  return {
    method: 'STREAM-style (bench/stream.cc): sum (best of 14 read-only variants: accumulators, software prefetch, 2-8 interleaved streams per thread with and without prefetch, chunks, 4 KiB pages), copy, triad, copy_nt, triad_nt, update (at 1, 1/2 and 1/4 of the array), nstream; all threads and 1; first touch by the owning thread; threads started once per thread count, not per run; best of reps; STREAM byte counts (no write-allocate)',
    floats_per_array: out.floats_per_array, reps: out.reps, huge_pages: out.huge_pages,
    best: fastest(out.results), by_access: byAccess(out.results), parts: out.results,
  };
}

/** Two probes of the same machine as one: the best of each part, the best part overall. */
export function mergeFloors(a: StreamFloor, b: StreamFloor): StreamFloor {
  const key = (p: StreamPart) => `${p.kernel}/${p.threads}`;
  const best = new Map<string, StreamPart>();
  for (const p of [...a.parts, ...b.parts]) {
    const q = best.get(key(p));
    if (!q || p.gbps > q.gbps) best.set(key(p), p);
  }
  const parts = [...best.values()];
  return { ...a, method: `${a.method}; best of two probes`, reps: a.reps + b.reps, parts, best: fastest(parts), by_access: byAccess(parts) };
}
