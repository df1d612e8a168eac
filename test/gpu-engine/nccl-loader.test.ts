// NCCL loaded at run time: the search order (pure), the loader on fake libraries compiled
// here (a full one, one missing entry points, a too-old one, a file that is not a library),
// and `doctor` reporting what it found, run as a user runs it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CandidateInputs } from '../../lib/gpu/library-search.js';
import { findNccl, loadNccl, ncclCandidates, uniqueIdFromHex, uniqueIdHex } from '../../lib/gpu/nccl.js';
import { buildFakeNccl } from '../helpers/fake-nccl.js';
import { cli } from '../helpers/cli.js';


function inputs(o: { env?: Record<string, string>; sitePackages?: string[]; files?: string[]; dirs?: string[] }): CandidateInputs {
  const files = new Set(o.files ?? []);
  const dirs = new Set(o.dirs ?? []);
  return { env: o.env ?? {}, sitePackages: o.sitePackages ?? [], exists: (p) => files.has(p), isDirectory: (p) => dirs.has(p) };
}

describe('NCCL search order', () => {
  it('MURPHY_NCCL (a file or a folder) is the only place looked at when set', () => {
    assert.deepEqual(ncclCandidates(inputs({ env: { MURPHY_NCCL: '/x/libnccl-custom.so', CUDA_HOME: '/cuda' }, files: ['/cuda/lib64/libnccl.so.2'] })).candidates,
      [{ path: '/x/libnccl-custom.so', origin: 'MURPHY_NCCL' }]);
    assert.deepEqual(ncclCandidates(inputs({ env: { MURPHY_NCCL: '/opt/nccl' }, dirs: ['/opt/nccl'] })).candidates,
      [{ path: '/opt/nccl/libnccl.so.2', origin: 'MURPHY_NCCL' }]);
  });
  it('CUDA_HOME, CUDA_PATH, the wheels (nvidia/nccl, cu13, cu12 folders), then the dynamic loader', () => {
    const sp = ['/py/a/site-packages', '/py/b/site-packages'];
    const files = [
      '/cuda-path/lib64/libnccl.so.2', '/cuda-home/lib64/libnccl.so.2',
      '/py/a/site-packages/nvidia/cu12/lib/libnccl.so.2', '/py/a/site-packages/nvidia/nccl/lib/libnccl.so.2',
      '/py/b/site-packages/nvidia/cu13/lib/libnccl.so.2',
    ];
    const l = ncclCandidates(inputs({ env: { CUDA_HOME: '/cuda-home', CUDA_PATH: '/cuda-path' }, sitePackages: sp, files }));
    assert.deepEqual(l.candidates, [
      { path: '/cuda-home/lib64/libnccl.so.2', origin: 'CUDA_HOME' },
      { path: '/cuda-path/lib64/libnccl.so.2', origin: 'CUDA_PATH' },
      { path: '/py/a/site-packages/nvidia/nccl/lib/libnccl.so.2', origin: 'python wheel' },
      { path: '/py/a/site-packages/nvidia/cu12/lib/libnccl.so.2', origin: 'python wheel' },
      { path: '/py/b/site-packages/nvidia/cu13/lib/libnccl.so.2', origin: 'python wheel' },
      { path: 'libnccl.so.2', origin: 'dynamic loader' },
    ]);
    assert.match(l.searched.join(', '), /^\/cuda-home\/lib64 \(CUDA_HOME\), \/cuda-path\/lib64 \(CUDA_PATH\), nvidia\/\{nccl,cu13,cu12\}\/lib under .*, the dynamic loader$/);
  });
  it('the unique id travels as 256 hex digits, both ways; anything else is refused', () => {
    const id = new Uint8Array(128).map((_, i) => (i * 37 + 5) & 255);
    const hex = uniqueIdHex(id);
    assert.equal(hex.length, 256);
    assert.deepEqual(uniqueIdFromHex(hex), id);
    assert.throws(() => uniqueIdFromHex('abc'), /256 hex digits/);
    assert.throws(() => uniqueIdHex(new Uint8Array(12)), /128 bytes, got 12/);
  });
});

describe('NCCL loader (native dlopen) on files made here', () => {
  let dir = '', full = '', partial = '', old = '', notLib = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'murphy-nccl-'));
    full = buildFakeNccl(join(dir, 'libnccl.so.2'), { version: 22304 });
    partial = buildFakeNccl(join(dir, 'partial', 'libnccl.so.2'), { partial: true });
    old = buildFakeNccl(join(dir, 'old', 'libnccl.so.2'), { version: 21302 });
    notLib = join(dir, 'not-a-library.so');
    writeFileSync(notLib, 'text, not an ELF shared object\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  const one = (path: string) => loadNccl({ candidates: [{ path, origin: 'MURPHY_NCCL' }], searched: [`MURPHY_NCCL=${path}`] });

  it('a library with every entry point: found, with its version and file', () => {
    const r = one(full);
    assert.equal(r.found, true, r.reason);
    assert.deepEqual([r.path, r.version, r.versionText, r.origin], [full, 22304, '2.23.4', 'MURPHY_NCCL']);
  });
  it('the first candidate that loads wins; failures before it are recorded', () => {
    const r = loadNccl({ candidates: [{ path: join(dir, 'missing.so'), origin: 'CUDA_HOME' }, { path: notLib, origin: 'python wheel' }, { path: full, origin: 'python wheel' }], searched: [] });
    assert.equal(r.path, full);
    assert.deepEqual(r.attempts.map((a) => a.error === ''), [false, false, true]);
  });
  it('rejects a library missing entry points, one older than 2.14, and a file that is not a library, each saying why', () => {
    assert.match(one(partial).reason!, /^NCCL not found: MURPHY_NCCL is set and .*partial\/libnccl\.so\.2: not a usable NCCL: entry point ncclGetUniqueId is missing; point it at a libnccl\.so\.2 file/);
    assert.match(one(old).reason!, /reports 2\.13\.2 .*needs NCCL 2\.14 or newer/);
    assert.match(one(notLib).reason!, /not-a-library\.so: dlopen failed: .*(invalid ELF header|file too short)/);
  });
  it('nothing found: one line naming the places and the fix', () => {
    const r = loadNccl({ candidates: [{ path: 'libnccl-murphy-test-absent.so.2', origin: 'dynamic loader' }], searched: ['/nowhere/lib64 (CUDA_HOME)', 'the dynamic loader'] });
    assert.doesNotMatch(r.reason!, /\n/);
    assert.match(r.reason!, /^NCCL not found: looked in \/nowhere\/lib64 \(CUDA_HOME\), the dynamic loader \(libnccl-murphy-test-absent\.so\.2: cannot open shared object file.*\); install the nvidia-nccl Python wheel .* or set MURPHY_NCCL/);
  });
  it('doctor reports the NCCL that MURPHY_NCCL names, with its version (run as a user runs it); findNccl says why for a bad setting', () => {
    const r = spawnSync(process.execPath, cli('doctor'), { encoding: 'utf8', env: { ...process.env, MURPHY_NCCL: dir } });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(r.stdout.includes(`\nnccl           2.23.4 from ${full} (MURPHY_NCCL)\n`), r.stdout);
    const saved = process.env.MURPHY_NCCL;
    try {
      process.env.MURPHY_NCCL = notLib;
      assert.match(findNccl({ refresh: true }).reason!, /^NCCL not found: MURPHY_NCCL is set and .*not-a-library\.so: dlopen failed/);
    } finally {
      if (saved === undefined) delete process.env.MURPHY_NCCL;
      else process.env.MURPHY_NCCL = saved;
    }
  });
});
