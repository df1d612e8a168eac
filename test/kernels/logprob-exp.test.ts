// The log-prob kernels' exp (native/cpu/logprob_simd.inc: lp_exp2, base 2, degree-5 polynomial)
// against the float64 exp over the whole range the kernels use and beyond: -inf and very negative
// (0, or a denormal near the underflow), 0, large, overflow to +inf, NaN. The bound is the one
// docs/kernels.md states; every compiled copy runs (AVX-512, AVX2+FMA, baseline via MURPHY_SIMD),
// each also on bf16 logits (its own load and store paths) against the float64 reference.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { cpuInfo } from '../../lib/native.js';
import { EXP_EDGES, expBound, kernelExp, measureExp, type ExpErrors } from '../helpers/exp-check.js';
import { testSeed } from '../helpers/random.js';
import { runAtLowerSimdLevels } from '../helpers/simd-levels.js';

const seed = testSeed('logprob-exp');
const script = fileURLToPath(new URL('../helpers/exp-check.ts', import.meta.url));

function checkErrors(r: ExpErrors) {
  const at = `(${r.simd}, seed ${seed})`;
  assert.ok(r.worstBoundRatio <= 1, `${at}: relative error ${r.maxRel} at x = ${r.maxRelAt}; worst against the bound ${r.worstBoundRatio} at ${r.worstBoundAt}`);
  const edge = new Map(r.edges);
  const val = (x: number) => Number(edge.get(String(x)));
  for (const x of [-Infinity, -1e30, -1000, -104, -88.5, -87.8]) assert.equal(val(x), 0, `${at}: exp(${x})`);
  // near the underflow (2^-126 = e^-87.34): 0 or the value, denormals losing bits as they do
  for (const x of [-87.6, -87.33]) assert.ok(val(x) >= 0 && val(x) <= Math.exp(Math.fround(x)) * (1 + 1e-5), `${at}: exp(${x}) = ${val(x)}`);
  for (const x of [-1e-30, 0, 1e-30]) assert.equal(val(x), 1, `${at}: exp(${x})`);
  for (const x of [-87, -20, -1, -1e-3, 1e-3, 1, 20, 80, 88, 88.3]) {
    const f = Math.fround(x);
    assert.ok(Math.abs(val(x) / Math.exp(f) - 1) <= expBound(f), `${at}: exp(${x}) = ${val(x)} vs ${Math.exp(f)}`);
  }
  for (const x of [88.5, 89, 1e30, Infinity]) assert.equal(val(x), Infinity, `${at}: exp(${x})`);
  assert.ok(Number.isNaN(val(NaN)), `${at}: exp(NaN)`);
  // bf16 logits (unpacked and packed per copy) within logprob.test.ts's tolerances
  assert.ok(r.bf16Forward <= 1, `${at}: bf16 forward error ${r.bf16Forward} of its tolerance`);
  assert.ok(r.bf16Backward <= 1, `${at}: bf16 backward error ${r.bf16Backward} of its tolerance`);
}

describe('log-prob exp vs float64 exp', () => {
  it(`this CPU's copy (${cpuInfo().simd}): every lane and the scalar tail within the stated bound`, () => {
    checkErrors(measureExp(seed, 1 << 19));
    // a value gives the same exp in every lane position and in the tail (one formula)
    const x = [-3.25, -0.5, 0, -70.1];
    for (const v of x) {
      const row = kernelExp(new Float32Array(37).fill(v));
      for (const y of row) assert.equal(y, row[0], `exp(${v}) differs between positions`);
    }
    assert.equal(EXP_EDGES.length, kernelExp(EXP_EDGES).length);
  });

  it('the AVX-512 copy without BF16 instructions, the AVX2 and baseline copies (MURPHY_SIMD lowers the level), same bound', async () => {
    for (const e of await runAtLowerSimdLevels<ExpErrors>(cpuInfo(), script, seed)) checkErrors(e);
  });

  it('a check child that does not exit is killed after the timeout, and the failure says so', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-hang-'));
    try {
      const hang = join(dir, 'hang.mjs');
      writeFileSync(hang, "process.stdout.write('{}');\nsetInterval(() => {}, 1000);\n");  // prints, then never exits
      const t0 = Date.now();
      await assert.rejects(runAtLowerSimdLevels({ simd: 'avx2', avx512bf16: false }, hang, seed, 1500),
        // (under load the child may not have started printing within 1.5 s)
        /under MURPHY_SIMD=baseline did not finish within 1.5 s and was killed \(SIGKILL\); it printed (its result, so it hung at exit|no result)/);
      assert.ok(Date.now() - t0 < 60_000, 'killed at the timeout');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
