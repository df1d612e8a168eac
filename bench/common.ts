// Helpers shared by the benchmarks (bench/run.ts, bench/gpu*.ts and the others).
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
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
export function machineInfo(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    load_average_1_5_15: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
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
