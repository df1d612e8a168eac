// Runs a check script (test/helpers/exp-check.ts, stream-check.ts) once for each compiled SIMD
// copy of the addon below this CPU's own, each in a child process under MURPHY_SIMD. Takes the
// CPU's description as an argument: a test may have to set variables before lib/native loads.
// A test that calls it starts child processes: keep it out of test/groups/ (the guard in
// test/runner/test-files.test.ts reads only the test file's own text).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { CpuInfo } from '../../lib/native.js';
import { TS_LOADER } from './cli.js';

/** The other copies MURPHY_SIMD can pick here: on AVX-512, the AVX-512 copy without the BF16
 * extension's instructions (bf16 gradient rounding; only where the CPU has them), AVX2 and
 * baseline; on AVX2, baseline; none on baseline. */
export function lowerSimdLevels(cpu: Pick<CpuInfo, 'simd' | 'avx512bf16'>): string[] {
  if (cpu.simd === 'avx512') return [...(cpu.avx512bf16 ? ['avx512'] : []), 'avx2', 'baseline'];
  return cpu.simd === 'avx2' ? ['baseline'] : [];
}

/** How long one check child may run: each takes 1-2 s on the 2-core VM; one once hung at
 * exit for 11 minutes with no timeout, holding the whole test run. */
export const CHILD_TIMEOUT_MS = 120_000;

/** `script seed` under MURPHY_SIMD=level for every lower level, all at once; each run's JSON
 * output, once checked to come from the copy asked for. A child that has not exited after
 * `timeoutMs` is killed (SIGKILL: a process stuck at exit may ignore SIGTERM) and the call
 * fails naming the script, the level and what the child had printed. */
export async function runAtLowerSimdLevels<T extends { simd: string }>(
  cpu: Pick<CpuInfo, 'simd' | 'avx512bf16'>, script: string, seed: number, timeoutMs = CHILD_TIMEOUT_MS,
): Promise<T[]> {
  const levels = lowerSimdLevels(cpu);
  const run = promisify(execFile);
  const results = await Promise.all(levels.map((l) =>
    run(process.execPath, [...TS_LOADER, script, String(seed)], { env: { ...process.env, MURPHY_SIMD: l }, timeout: timeoutMs, killSignal: 'SIGKILL' })
      .catch((e: { killed?: boolean; signal?: string | null; code?: number | string | null; stdout?: string; stderr?: string; message?: string }) => {
        const tail = (s?: string) => (s ?? '').trim().slice(-400) || '(nothing)';
        const what = e.killed
          ? `did not finish within ${timeoutMs / 1000} s and was killed (${e.signal}); it printed ${(e.stdout ?? '').length > 0 ? 'its result, so it hung at exit' : 'no result'}`
          : `failed (exit ${e.code ?? e.signal})`;
        throw new Error(`check child ${script} ${seed} under MURPHY_SIMD=${l} ${what}; stdout: ${tail(e.stdout)}; stderr: ${tail(e.stderr)}`);
      })));
  return results.map((r, i) => {
    const e = JSON.parse(r.stdout) as T;
    assert.equal(e.simd, levels[i], 'MURPHY_SIMD picked the copy');
    return e;
  });
}
