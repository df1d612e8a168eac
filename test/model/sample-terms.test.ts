// The sampler's fp64 softmax terms (native/model/sample_terms_simd.inc: a vectorized exp, the
// block sums the plain draw walks, the row's argmax), every compiled copy this CPU runs
// (baseline, AVX2+FMA, AVX-512) against glibc's exp (and long double sums of its terms for the
// block sums and top-p's cut masses): compiled from the sources with the system
// C++ compiler (test/native/sample_terms_check.cc) and run on fresh random arguments.
// The bounds are docs/model.md's ("Sampling"): within 2 ulp of glibc's exp over the normal
// range (measured: 1), denormal results within 2 steps, exact 1 at 0 and 0 past the underflow.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { compileCached, cxxCompiler } from '../helpers/compile-cache.js';
import { testSeed } from '../helpers/random.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { cxx, have: haveCxx } = cxxCompiler();
const seed = testSeed('model/sample-terms');

interface CopyResult {
  copy: string; maxUlp: number; maxUlpAt: number; denormalSteps: number; denormalAt: number; temperatureUlp: number;
  blockSumRel: number; argmax: boolean; edges: [number, boolean][];
}
/** The x of the program's edges, in its order. */
const EDGE_X = [0, -0, -1e-300, -745, -745.1332191019411, -745.2, -746, -1000, -1e300, -Infinity];

describe('the sampler\'s fp64 softmax terms', () => {
  it('every compiled copy: exp within 2 ulp of glibc, exact edges, block sums and argmax', { skip: haveCxx ? false : `no C++ compiler (${cxx})` }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-sample-terms-'));
    try {
      const exe = join(dir, 'sample_terms_check');
      // (-I native/model: not needed to compile, but the cache key hashes the .inc files of the -I folders)
      compileCached({ compiler: cxx, flags: ['-O2', '-std=c++17', `-I${join(root, 'native/cpu')}`, `-I${join(root, 'native/model')}`], sources: [join(root, 'test/native/sample_terms_check.cc')], out: exe });
      const r = spawnSync(exe, [String(seed)], { encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      const copies = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as CopyResult);
      assert.ok(copies.some((c) => c.copy === 'baseline'));
      for (const c of copies) {
        const at = `${c.copy} (seed ${seed})`;
        assert.ok(c.maxUlp <= 2, `${at}: ${c.maxUlp} ulp at x = ${c.maxUlpAt}`);
        assert.ok(c.temperatureUlp <= 2, `${at}: with a temperature, ${c.temperatureUlp} ulp`);
        assert.ok(c.denormalSteps <= 2, `${at}: denormal result ${c.denormalSteps} steps off at x = ${c.denormalAt}`);
        // block sums (at most 700 terms) and top-p's cut masses (at most 5,000): the terms' error plus fp64 summation
        assert.ok(c.blockSumRel <= 1e-12, `${at}: block sum / cut mass relative error ${c.blockSumRel}`);
        assert.ok(c.argmax, `${at}: argmax / NaN detection differs from the scalar loop`);
        assert.equal(c.edges.length, EDGE_X.length);
        const edge = new Map(c.edges.map(([y, same], i) => [EDGE_X[i]!, { y, same }]));
        for (const [x, e] of edge) assert.ok(e.same, `${at}: exp(${x}) differs between the vector lanes and the scalar tail`);
        for (const x of [0, -0, -1e-300]) assert.equal(edge.get(x)!.y, 1, `${at}: exp(${x})`);
        for (const x of [-745.2, -746, -1000, -1e300, -Infinity]) assert.equal(edge.get(x)!.y, 0, `${at}: exp(${x})`);
        for (const x of [-745, -745.1332191019411]) assert.equal(edge.get(x)!.y, 5e-324, `${at}: exp(${x}), the smallest denormal`);
      }
      console.log(`# ${copies.map((c) => `${c.copy}: ${c.maxUlp} ulp`).join(', ')} (seed ${seed})`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
