// Helpers shared by the kernel benchmarks (bench/run.ts, bench/gpu.bench.ts).
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

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
