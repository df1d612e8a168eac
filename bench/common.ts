// Helpers shared by the kernel benchmarks (bench/run.ts, bench/gpu.bench.ts).
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import os from 'node:os';

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
