// The log-prob backward takes another path for gradients larger than the cache (native/cpu/
// logprob.cc, cache_bytes: non-temporal stores); both paths must give the same bits, in every
// compiled copy (AVX-512 with and without BF16, AVX2, baseline via MURPHY_SIMD). Forward has one
// path (it had a separate max pass for fp32 rows from memory until 2026-12-01); its results
// must not depend on the call's size either, which the same cases check. The cache paths are checked
// against the float64 reference in logprob.test.ts. (Which path ran is not visible from here;
// the threshold decides, and this test sets it.)
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { CACHE_BYTES, type StreamCheck } from '../helpers/stream-check.js';
import { testSeed } from '../helpers/random.js';
import { runAtLowerSimdLevels } from '../helpers/simd-levels.js';

// read once by the addon, at its first backward call: set before anything loads it
process.env.MURPHY_LOGPROB_CACHE_BYTES = String(CACHE_BYTES);
const { cpuInfo } = await import('../../lib/native.js');
const { checkStreaming } = await import('../helpers/stream-check.js');

const seed = testSeed('logprob-stream');
const script = fileURLToPath(new URL('../helpers/stream-check.ts', import.meta.url));

function verify(r: StreamCheck) {
  assert.ok(r.cases >= 50, `${r.cases} cases`);
  assert.deepEqual(r.mismatches, [], `(${r.simd}, seed ${seed}): the memory and cache paths differ`);
}

describe('log-prob kernels: the memory paths give the cache paths\' bits', () => {
  it(`this CPU's copy (${cpuInfo().simd}), f32 and bf16, every vocabulary tail and output alignment`, () => {
    verify(checkStreaming(seed));
  });

  it('the AVX-512 copy without BF16 instructions, the AVX2 and baseline copies (MURPHY_SIMD lowers the level)', async () => {
    for (const e of await runAtLowerSimdLevels<StreamCheck>(cpuInfo(), script, seed)) verify(e);
  });
});
