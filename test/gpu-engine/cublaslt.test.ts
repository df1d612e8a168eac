// cuBLASLt loaded at run time: the search order (pure), the loader on real files (a fake
// library compiled here, a file that is not a library, missing files), and `doctor`
// reporting what it found, run as a user runs it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cublasLtCandidates, findCublasLt, loadCublasLt, pythonSitePackages, type CandidateInputs } from '../../lib/gpu/cublaslt.js';
import { cli } from '../helpers/cli.js';
import { compileCached } from '../helpers/compile-cache.js';


function inputs(o: Partial<CandidateInputs> & { files?: string[]; dirs?: string[] }): CandidateInputs {
  const files = new Set(o.files ?? []);
  const dirs = new Set(o.dirs ?? []);
  return {
    env: o.env ?? {},
    sitePackages: o.sitePackages ?? [],
    exists: (p) => files.has(p),
    isDirectory: (p) => dirs.has(p),
  };
}

describe('cuBLASLt search order', () => {
  it('MURPHY_CUBLASLT (a file) is the only candidate when set', () => {
    const l = cublasLtCandidates(inputs({ env: { MURPHY_CUBLASLT: '/x/libfoo.so', CUDA_HOME: '/cuda' }, files: ['/cuda/lib64/libcublasLt.so.13'] }));
    assert.deepEqual(l.candidates, [{ path: '/x/libfoo.so', origin: 'MURPHY_CUBLASLT' }]);
  });
  it('MURPHY_CUBLASLT (a folder) means .so.13 then .so.12 in it', () => {
    const l = cublasLtCandidates(inputs({ env: { MURPHY_CUBLASLT: '/opt/lt' }, dirs: ['/opt/lt'] }));
    assert.deepEqual(l.candidates.map((c) => c.path), ['/opt/lt/libcublasLt.so.13', '/opt/lt/libcublasLt.so.12']);
  });
  it('CUDA_HOME, CUDA_PATH, the wheels (cu13, cu12, cublas folders), then the loader; .13 before .12 in each', () => {
    const sp = ['/py/a/site-packages', '/py/b/site-packages'];
    const files = [
      '/cuda-path/lib64/libcublasLt.so.12',
      '/cuda-home/lib64/libcublasLt.so.12',
      '/cuda-home/lib64/libcublasLt.so.13',
      '/py/b/site-packages/nvidia/cublas/lib/libcublasLt.so.12',
      '/py/a/site-packages/nvidia/cu12/lib/libcublasLt.so.12',
      '/py/a/site-packages/nvidia/cu13/lib/libcublasLt.so.13',
    ];
    const l = cublasLtCandidates(inputs({ env: { CUDA_HOME: '/cuda-home', CUDA_PATH: '/cuda-path' }, sitePackages: sp, files }));
    assert.deepEqual(l.candidates, [
      { path: '/cuda-home/lib64/libcublasLt.so.13', origin: 'CUDA_HOME' },
      { path: '/cuda-home/lib64/libcublasLt.so.12', origin: 'CUDA_HOME' },
      { path: '/cuda-path/lib64/libcublasLt.so.12', origin: 'CUDA_PATH' },
      { path: '/py/a/site-packages/nvidia/cu13/lib/libcublasLt.so.13', origin: 'python wheel' },
      { path: '/py/a/site-packages/nvidia/cu12/lib/libcublasLt.so.12', origin: 'python wheel' },
      { path: '/py/b/site-packages/nvidia/cublas/lib/libcublasLt.so.12', origin: 'python wheel' },
      { path: 'libcublasLt.so.13', origin: 'dynamic loader' },
      { path: 'libcublasLt.so.12', origin: 'dynamic loader' },
    ]);
  });
  it('without CUDA_HOME/CUDA_PATH it looks in /usr/local/cuda/lib64; missing files are not candidates', () => {
    const l = cublasLtCandidates(inputs({ files: ['/usr/local/cuda/lib64/libcublasLt.so.12'] }));
    assert.deepEqual(l.candidates.map((c) => `${c.origin}:${c.path}`), [
      'default CUDA:/usr/local/cuda/lib64/libcublasLt.so.12', 'dynamic loader:libcublasLt.so.13', 'dynamic loader:libcublasLt.so.12',
    ]);
    assert.match(l.searched.join(', '), /\/usr\/local\/cuda\/lib64 \(default CUDA\), no python3 on PATH .*, the dynamic loader/);
  });
  it('asks a python3 on PATH for its site-packages (a fake interpreter here)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-py-'));
    try {
      const py = join(dir, 'python3');
      // the fake interpreter counts its launches: asked once a process for a given PATH
      writeFileSync(py, `#!/bin/sh\necho x >> ${join(dir, 'launches')}\necho '["/fake/site-packages", "/fake/user-site"]'\n`);
      chmodSync(py, 0o755);
      assert.deepEqual(pythonSitePackages(`${dir}:${dir}`), ['/fake/site-packages', '/fake/user-site']);
      const again = pythonSitePackages(`${dir}:${dir}`);
      assert.deepEqual(again, ['/fake/site-packages', '/fake/user-site']);
      again.push('/changed-by-the-caller');
      assert.deepEqual(pythonSitePackages(`${dir}:${dir}`), ['/fake/site-packages', '/fake/user-site'], 'a caller changed the kept answer');
      assert.equal(readFileSync(join(dir, 'launches'), 'utf8'), 'x\n');
      assert.deepEqual(pythonSitePackages(join(dir, 'nothing-here')), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// A fake cuBLASLt: exports cublasLtGetVersion (returning VERSION) and, with FULL, every
// other entry point the loader resolves (never called).
const FAKE_SRC = `
#include <stddef.h>
size_t cublasLtGetVersion(void) { return VERSION; }
#ifdef FULL
#define STUB(n) int n(void) { return 0; }
STUB(cublasLtGetStatusName) STUB(cublasLtGetStatusString) STUB(cublasLtCreate) STUB(cublasLtDestroy)
STUB(cublasLtMatmulDescCreate) STUB(cublasLtMatmulDescDestroy) STUB(cublasLtMatmulDescSetAttribute)
STUB(cublasLtMatrixLayoutCreate) STUB(cublasLtMatrixLayoutDestroy) STUB(cublasLtMatrixLayoutSetAttribute)
STUB(cublasLtMatmulPreferenceCreate) STUB(cublasLtMatmulPreferenceDestroy) STUB(cublasLtMatmulPreferenceSetAttribute)
STUB(cublasLtMatmulAlgoGetHeuristic) STUB(cublasLtMatmul)
#endif
`;

describe('cuBLASLt loader (native dlopen) on files made here', () => {
  let dir = '';
  const lib = (name: string, version: number, full: boolean): string => {
    const out = join(dir, name);
    return compileCached({ compiler: 'cc', flags: ['-shared', '-fPIC', `-DVERSION=${version}`, ...(full ? ['-DFULL'] : [])], sources: [join(dir, 'fake.c')], out });
  };
  let full13 = '', full12 = '', onlyVersion = '', old11 = '', notLib = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'murphy-lt-'));
    writeFileSync(join(dir, 'fake.c'), FAKE_SRC);
    full13 = lib('libcublasLt.so.13', 130100, true);
    mkdirSync(join(dir, 'v12'));
    full12 = lib('v12/libcublasLt.so.12', 120902, true);
    onlyVersion = lib('only-version.so', 130000, false);
    old11 = lib('old11.so', 110805, true);
    notLib = join(dir, 'not-a-library.so');
    writeFileSync(notLib, 'this is text, not an ELF shared object\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const one = (path: string) => loadCublasLt({ candidates: [{ path, origin: 'MURPHY_CUBLASLT' }], searched: [`MURPHY_CUBLASLT=${path}`] });

  it('a library with every entry point: found, with its version and file', () => {
    const r = one(full13);
    assert.equal(r.found, true, r.reason);
    assert.equal(r.path, full13);
    assert.equal(r.version, 130100);
    assert.equal(r.versionText, '13.1.0');
    assert.equal(r.origin, 'MURPHY_CUBLASLT');
  });
  it('the first candidate that loads wins; failures before it are recorded', () => {
    const r = loadCublasLt({
      candidates: [
        { path: join(dir, 'missing.so'), origin: 'CUDA_HOME' },
        { path: notLib, origin: 'python wheel' },
        { path: full12, origin: 'python wheel' },
        { path: full13, origin: 'dynamic loader' },
      ],
      searched: [],
    });
    assert.equal(r.found, true);
    assert.equal(r.path, full12);
    assert.equal(r.versionText, '12.9.2');
    assert.deepEqual(r.attempts.map((a) => a.error === ''), [false, false, true]);
  });
  it('a library without the other entry points is rejected, naming the first one missing', () => {
    const r = one(onlyVersion);
    assert.equal(r.found, false);
    assert.match(r.reason!, /^cuBLASLt not found: MURPHY_CUBLASLT is set and .*only-version\.so: not a usable cuBLASLt: entry point cublasLtGetStatusName is missing; point it at/);
  });
  it('a file that is not a library is rejected with the loader\'s reason', () => {
    const r = one(notLib);
    assert.equal(r.found, false);
    assert.match(r.reason!, /not-a-library\.so: dlopen failed: .*(invalid ELF header|file too short)/);
  });
  it('cuBLASLt 11 is rejected: 12 or 13 is needed', () => {
    const r = one(old11);
    assert.equal(r.found, false);
    assert.match(r.reason!, /reports 11\.8\.5 .*needs cuBLASLt 12 or 13/);
  });
  it('nothing found: one line naming the places and the fix', () => {
    const r = loadCublasLt({
      candidates: [{ path: 'libcublasLt-murphy-test-absent.so.13', origin: 'dynamic loader' }],
      searched: ['/nowhere/lib64 (CUDA_HOME)', 'the dynamic loader'],
    });
    assert.equal(r.found, false);
    assert.doesNotMatch(r.reason!, /\n/);
    assert.match(r.reason!, /^cuBLASLt not found: looked in \/nowhere\/lib64 \(CUDA_HOME\), the dynamic loader \(libcublasLt-murphy-test-absent\.so\.13: cannot open shared object file.*\); install the nvidia-cublas Python wheel .* or set MURPHY_CUBLASLT/);
  });

  it('doctor reports the library MURPHY_CUBLASLT names (a folder), and its version (run as a user runs it)', () => {
    const r = spawnSync(process.execPath, cli('doctor'), { encoding: 'utf8', env: { ...process.env, MURPHY_CUBLASLT: dir } });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(r.stdout.includes(`\ncublasLt       13.1.0 from ${full13} (MURPHY_CUBLASLT)\n`), r.stdout);
  });
  it('findCublasLt (what doctor and --device use) says why when MURPHY_CUBLASLT is not a library or absent', () => {
    const saved = process.env.MURPHY_CUBLASLT;
    try {
      process.env.MURPHY_CUBLASLT = notLib;
      const a = findCublasLt({ refresh: true });
      assert.equal(a.found, false);
      assert.match(a.reason!, /^cuBLASLt not found: MURPHY_CUBLASLT is set and .*not-a-library\.so: dlopen failed/);
      process.env.MURPHY_CUBLASLT = join(dir, 'absent.so');
      assert.match(findCublasLt({ refresh: true }).reason!, /absent\.so: dlopen failed: .*No such file or directory/);
      process.env.MURPHY_CUBLASLT = join(dir, 'v12');
      const f = findCublasLt({ refresh: true });
      assert.equal(f.path, full12);
      assert.equal(f.versionText, '12.9.2');
    } finally {
      if (saved === undefined) delete process.env.MURPHY_CUBLASLT;
      else process.env.MURPHY_CUBLASLT = saved;
    }
  });
});
