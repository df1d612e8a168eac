// Helpers shared by the benchmarks (bench/run.ts, bench/gpu*.ts and the others).
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import os from 'node:os';
import type { CudaStatus } from '../lib/native.js';

/** `--flag` and `--option VALUE` from this process's command line. */
export function cliArgs(argv: string[] = process.argv.slice(2)): { flag(f: string): boolean; opt(f: string): string | undefined; argv: string[] } {
  return {
    argv,
    flag: (f) => argv.includes(f),
    opt: (f) => {
      const i = argv.indexOf(f);
      return i >= 0 ? argv[i + 1] : undefined;
    },
  };
}

/** Writes a JSON results file atomically (temporary file, then rename). */
export function writeJsonAtomic(path: string, doc: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(doc, null, 2)}\n`);
  renameSync(tmp, path);
}

/** The machine a result was measured on, for the results' JSON (load average included: a busy machine is not an idle one). */
/** /proc/cpuinfo's family / model and the SIMD flags the kernels use (the model name alone, "AMD EPYC" on a VM, does not tell Zen 4 from Zen 5). */
export function cpuIdentity(text = readCpuinfo()): { family: number | null; model: number | null; simd: string[] } {
  const field = (k: string) => { const m = new RegExp(`^${k}\\s*:\\s*(\\d+)`, 'm').exec(text); return m ? Number(m[1]) : null; };
  const flags = new Set((/^flags\s*:(.*)$/m.exec(text)?.[1] ?? '').trim().split(/\s+/));
  return { family: field('cpu family'), model: field('model'), simd: ['avx2', 'fma', 'avx512f', 'avx512_bf16'].filter((f) => flags.has(f)) };
}

function readCpuinfo(): string {
  try { return readFileSync('/proc/cpuinfo', 'utf8'); } catch { return ''; }
}

export function machineInfo(): Record<string, unknown> {
  const cpus = os.cpus();
  const id = cpuIdentity();
  return {
    cpu: cpus[0]?.model ?? 'unknown',
    cpu_family: id.family,
    cpu_model: id.model,
    cpu_simd: id.simd,
    cores: os.availableParallelism(),
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    load_average_1_5_15: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

/** The median of xs (the mean of the middle two for an even count). */
export function medianOf(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** Median wall time (ms) of fn after 3 warm-up calls: at least minRuns runs and ~minMs ms, at most 200 runs. */
export function medianMs(fn: () => void, minRuns = 10, minMs = 1000): number {
  for (let i = 0; i < 3; i++) fn();
  const t: number[] = [];
  const start = performance.now();
  while ((t.length < minRuns || performance.now() - start < minMs) && t.length < 200) {
    const a = performance.now();
    fn();
    t.push(performance.now() - a);
  }
  t.sort((x, y) => x - y);
  return t[t.length >> 1]!;
}

/** One kernel's figures in a benchmark table (bench/run.ts adds its CPU floor and peers' ratios). */
export interface KernelRow {
  name: string;
  shape: string;
  median_ms: number;
  /** The bytes the kernel must move at the least (its physical floor). */
  bytes: number;
  gbps: number;
  floor_ratio: number;
  note?: string;
}

/**
 * Why a GPU benchmark cannot measure here (`cuda.status()` says no usable device), or undefined
 * when it can or when dryRun (the CPU stands in, checking the script only).
 */
export function noDeviceReason(status: CudaStatus, dryRun: boolean): string | undefined {
  if (status.available || dryRun) return undefined;
  return status.built || /^no CUDA device/.test(status.reason) ? status.reason : `no CUDA device: this binary was built without CUDA (${status.reason})`;
}

/**
 * The start of a GPU benchmark script: its options (--dry-run, --quick, --json FILE) and, without
 * a usable device (and no --dry-run), one line `<label>: <reason> — <what> not run` and exit 0.
 */
export function gpuBenchStart(label: string, what: string, status: CudaStatus): { dryRun: boolean; quick: boolean; jsonPath: string | undefined } {
  const { flag, opt } = cliArgs();
  const dryRun = flag('--dry-run');
  const noDevice = noDeviceReason(status, dryRun);
  if (noDevice) {
    console.log(`${label}: ${noDevice} — ${what} not run`);
    process.exit(0);
  }
  return { dryRun, quick: flag('--quick'), jsonPath: opt('--json') };
}
