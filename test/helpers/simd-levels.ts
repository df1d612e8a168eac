// Runs a check script (test/helpers/exp-check.ts, stream-check.ts) once for each compiled SIMD
// copy of the addon below this CPU's own, each in a child process under MURPHY_SIMD. Takes the
// CPU's description as an argument: a test may have to set variables before lib/native loads.
// A test that calls it starts child processes: keep it out of test/groups/ (the guard in
// test/runner/test-files.test.ts reads only the test file's own text).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { CpuInfo } from '../../lib/native.js';

/** The other copies MURPHY_SIMD can pick here: on AVX-512, the AVX-512 copy without the BF16
 * extension's instructions (bf16 gradient rounding; only where the CPU has them), AVX2 and
 * baseline; on AVX2, baseline; none on baseline. */
export function lowerSimdLevels(cpu: Pick<CpuInfo, 'simd' | 'avx512bf16'>): string[] {
  if (cpu.simd === 'avx512') return [...(cpu.avx512bf16 ? ['avx512'] : []), 'avx2', 'baseline'];
  return cpu.simd === 'avx2' ? ['baseline'] : [];
}

/** `script seed` under MURPHY_SIMD=level for every lower level, all at once; each run's JSON
 * output, once checked to come from the copy asked for. */
export async function runAtLowerSimdLevels<T extends { simd: string }>(
  cpu: Pick<CpuInfo, 'simd' | 'avx512bf16'>, script: string, seed: number,
): Promise<T[]> {
  const levels = lowerSimdLevels(cpu);
  const run = promisify(execFile);
  const results = await Promise.all(levels.map((l) =>
    run(process.execPath, ['--import', 'tsx', script, String(seed)], { env: { ...process.env, MURPHY_SIMD: l } })));
  return results.map((r, i) => {
    const e = JSON.parse(r.stdout) as T;
    assert.equal(e.simd, levels[i], 'MURPHY_SIMD picked the copy');
    return e;
  });
}
