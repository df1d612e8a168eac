// The run-time library loader that cuBLASLt and NCCL share (native/gpu/dl_library.h,
// library_binding.h; lib/gpu/library-search.ts libraryReport): the parts the fake-library tests
// (cublaslt.test.ts, nccl-loader.test.ts) do not reach: no candidates at all, arguments that are
// not a candidate list, and a native binary without the loader.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CUBLASLT_SPEC } from '../../lib/gpu/cublaslt.js';
import { libraryReport } from '../../lib/gpu/library-search.js';
import { cublasLtLoader, ncclNative } from '../../lib/native.js';

const loaders = (): [string, (c: unknown, install: unknown) => { ok: boolean; reason: string; attempts: unknown[] }][] => {
  const lt = cublasLtLoader();
  const nccl = ncclNative();
  assert.ok(lt && nccl, 'the CPU build has both loaders');
  return [['cuBLASLt', lt as never], ['NCCL', nccl.ncclLoad.bind(nccl) as never]];
};

describe('the shared run-time library loader', () => {
  it('with no candidates: not found, "no place to look", nothing attempted (both libraries)', () => {
    for (const [name, load] of loaders()) {
      const r = load([], false);
      assert.equal(r.ok, false, name);
      assert.equal(r.reason, `${name} not found: no place to look`);
      assert.deepEqual(r.attempts, []);
    }
  });
  it('arguments that are not {path, origin}[] and a boolean: one line naming the call and what it expects', () => {
    for (const [name, load] of loaders()) {
      const call = name === 'NCCL' ? 'ncclLoad' : 'cublasLtLoad';
      assert.throws(() => load('libx.so', false), { message: new RegExp(`^${call}\\(candidates, install\\): expected an array of \\{path, origin\\} and a boolean`) });
      assert.throws(() => load([{ path: 'libx.so' }], false), { message: `${call}: candidate 0 needs string fields path and origin` });
      assert.throws(() => load([7], false), { message: `${call}: candidate 0 is not an object` });
    }
  });
  it('a native binary without the loader: "not checked", and how to rebuild', () => {
    const r = libraryReport(CUBLASLT_SPEC, { name: 'cuBLASLt', fix: 'f', forcedFix: 'ff' }, { candidates: [], searched: ['x'] }, undefined);
    assert.deepEqual(r, {
      found: false, searched: ['x'], attempts: [],
      reason: 'cuBLASLt not checked: the loaded native binary has no cuBLASLt loader (it predates it); rebuild it (npm run build:native or build:cuda)',
    });
  });
});
