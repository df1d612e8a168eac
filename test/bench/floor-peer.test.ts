// The benchmarks' honest floor (bench/stream.ts + bench/stream.cc) and the PyTorch peer's
// fairness verdict (bench/torch_peer.py, bench/peer.ts). No timings are asserted.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { describePeer, type TorchPeer } from '../../bench/peer.js';
import { measureStreamFloor } from '../../bench/stream.js';

test('bandwidth probe: every STREAM kernel, all threads and one, STREAM byte counts, best is the fastest', () => {
  const floats = 1 << 16;
  const f = measureStreamFloor(2, 2, floats);
  assert.equal(f.floats_per_array, floats);
  assert.equal(typeof f.huge_pages, 'boolean');
  const perElem: Record<string, number> = { sum: 4, copy: 8, triad: 12, copy_nt: 8, triad_nt: 12, update: 8, update_h: 4, update_q: 2, nstream: 16 };
  const access: Record<string, string> = { sum: 'read', copy: 'copy', triad: 'copy', copy_nt: 'copy', triad_nt: 'copy', update: 'inplace', update_h: 'inplace', update_q: 'inplace', nstream: 'inplace' };
  const kernels = ['sum', 'copy', 'triad', 'update', 'update_h', 'update_q', 'nstream', ...(process.arch === 'x64' ? ['copy_nt', 'triad_nt'] : [])];
  const reads = ['sum_acc4', 'sum_acc8', 'sum_acc16', 'sum_x2', 'sum_x4', 'sum_x8', 'sum_chunks', 'sum_4k_pages',
    ...(process.arch === 'x64' ? ['sum_pf_t0_1k', 'sum_pf_t0_4k', 'sum_pf_t2_4k', 'sum_pf_t2_16k', 'sum_pf_nta_4k', 'sum_x4_pf1k'] : [])];
  for (const threads of [2, 1]) {
    for (const k of [...kernels, ...reads]) {
      const p = f.parts.find((x) => x.kernel === k && x.threads === threads);
      assert.ok(p, `${k} with ${threads} threads measured`);
      assert.equal(p.bytes, (perElem[k] ?? 4) * floats, k);
      assert.equal(p.access, access[k] ?? 'read', k);
      assert.ok(p.gbps > 0 && Number.isFinite(p.gbps));
      assert.ok(Math.abs(p.gbps - p.bytes / p.best_ms / 1e6) <= 1e-3 * p.gbps + 1e-3);
    }
    // `sum` is the fastest read-only variant, named
    const sum = f.parts.find((x) => x.kernel === 'sum' && x.threads === threads)!;
    const variants = f.parts.filter((x) => reads.includes(x.kernel) && x.threads === threads);
    assert.equal(sum.best_ms, Math.min(...variants.map((p) => p.best_ms)));
    assert.equal(f.parts.find((x) => x.kernel === sum.variant && x.threads === threads)?.best_ms, sum.best_ms);
  }
  assert.equal(f.best.gbps, Math.max(...f.parts.map((p) => p.gbps)));
  for (const a of ['read', 'copy', 'inplace'] as const) {
    assert.equal(f.by_access[a].access, a);
    assert.equal(f.by_access[a].gbps, Math.max(...f.parts.filter((p) => p.access === a).map((p) => p.gbps)));
  }
});

const peerPy = fileURLToPath(new URL('../../bench/torch_peer.py', import.meta.url));

test('torch peer: the BLAS really loaded is classified, the reference BLAS included', { skip: !existsSync('/usr/bin/python3') && 'no /usr/bin/python3' }, () => {
  const cases: [string[], string][] = [
    [['/usr/lib/x86_64-linux-gnu/blas/libblas.so.3'], 'reference'],
    [['/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3', '/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so'], 'openblas'],
    [['/opt/intel/lib/libmkl_rt.so.2'], 'mkl'],
    // the reference libblas found first (LD_LIBRARY_PATH) beside OpenBLAS's LAPACK: sgemm is the reference one
    [['/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0', '/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack.so.3', '/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so'], 'reference'],
    [[], 'unknown'],
  ];
  const code = `import json, sys; sys.path.insert(0, ${JSON.stringify(fileURLToPath(new URL('../../bench', import.meta.url)))}); import torch_peer
print(json.dumps([torch_peer._kind(p) for p in json.loads(sys.argv[1])]))`;
  assert.ok(existsSync(peerPy));
  const r = spawnSync('/usr/bin/python3', ['-c', code, JSON.stringify(cases.map((c) => c[0]))], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), cases.map((c) => c[1]));
});

test('torch peer: an unfair peer is named as such with its fix, a fair one is not', () => {
  const base: TorchPeer = {
    torch_version: '1.13', threads: 2, requested_threads: 2, blas: 'openblas', blas_libraries: [], config_blas: [], fair: true, unfair_reason: null,
    openblas_core: 'Cooperlake', cpu_avx512: true, blas_env: {},
  };
  assert.match(describePeer(base, 2), /Cooperlake kernels/);
  assert.doesNotMatch(describePeer(base, 2), /not a fair/i);
  const ref = { ...base, blas: 'reference', fair: false, unfair_reason: 'PyTorch runs on the reference BLAS (x); apt-get install libopenblas0-pthread gives it OpenBLAS' };
  const line = describePeer(ref, 2);
  assert.match(line, /NOT a fair peer, no torch ratios/);
  assert.match(line, /libopenblas0-pthread/);
});

test('torch peer: OpenBLAS held to AVX2 kernels on an AVX-512 CPU is unfair, named with the variable that held it', { skip: !existsSync('/usr/bin/python3') && 'no /usr/bin/python3' }, () => {
  const cases: [string | null, boolean, string | null][] = [
    ['Haswell', true, 'Haswell'], ['Zen', true, null], ['SkylakeX', true, null], ['Cooperlake', true, 'Cooperlake'],
    ['Haswell', false, null], [null, true, null],
  ];
  const code = `import json, sys; sys.path.insert(0, ${JSON.stringify(fileURLToPath(new URL('../../bench', import.meta.url)))}); import torch_peer
print(json.dumps([torch_peer._core_reason(*c) for c in json.loads(sys.argv[1])]))`;
  const r = spawnSync('/usr/bin/python3', ['-c', code, JSON.stringify(cases)], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const got = JSON.parse(r.stdout) as (string | null)[];
  assert.match(got[0]!, /OpenBLAS runs its Haswell kernels, without AVX-512.*OPENBLAS_CORETYPE=Haswell in its environment.*unset OPENBLAS_CORETYPE/);
  assert.match(got[1]!, /Zen kernels.*its CPU detection/);
  assert.deepEqual(got.slice(2), [null, null, null, null]);
});

test('peer environment: the variables that hold OpenBLAS below the machine are dropped and reported, the rest kept', async () => {
  const { peerEnv, peerEnvDropped, PEER_ENV_DROPPED } = await import('../../bench/peer.js');
  const saved = Object.fromEntries(PEER_ENV_DROPPED.map((k) => [k, process.env[k]]));
  try {
    process.env.OPENBLAS_CORETYPE = 'Haswell';
    delete process.env.OPENBLAS_L2_SIZE;
    const env = peerEnv({ PYTHONPATH: '/x' });
    assert.equal(env.OPENBLAS_CORETYPE, undefined);
    assert.equal(env.PYTHONPATH, '/x');
    assert.equal(env.PATH, process.env.PATH);
    assert.deepEqual(peerEnvDropped(), { OPENBLAS_CORETYPE: 'Haswell' });
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  }
});

test('peer environment: glibc malloc on huge pages is added to GLIBC_TUNABLES, an explicit setting kept', async () => {
  const { peerEnv, PEER_MALLOC_TUNABLE, describePeer } = await import('../../bench/peer.js');
  const saved = process.env.GLIBC_TUNABLES;
  try {
    delete process.env.GLIBC_TUNABLES;
    assert.equal(peerEnv().GLIBC_TUNABLES, PEER_MALLOC_TUNABLE);
    process.env.GLIBC_TUNABLES = 'glibc.malloc.arena_max=2';
    assert.equal(peerEnv().GLIBC_TUNABLES, `glibc.malloc.arena_max=2:${PEER_MALLOC_TUNABLE}`);
    process.env.GLIBC_TUNABLES = 'glibc.malloc.hugetlb=0';
    assert.equal(peerEnv().GLIBC_TUNABLES, 'glibc.malloc.hugetlb=0');
    assert.equal(peerEnv({ GLIBC_TUNABLES: 'x=1' }).GLIBC_TUNABLES, 'x=1', 'extra wins');
    const p = { torch_version: '1.13', threads: 2, requested_threads: 2, blas: 'openblas', blas_libraries: [], config_blas: [], fair: true, unfair_reason: null,
      openblas_core: 'Cooperlake', cpu_avx512: true, blas_env: {}, glibc_tunables: PEER_MALLOC_TUNABLE };
    assert.match(describePeer(p, 2), /GLIBC_TUNABLES=glibc\.malloc\.hugetlb=1/);
  } finally {
    if (saved === undefined) delete process.env.GLIBC_TUNABLES; else process.env.GLIBC_TUNABLES = saved;
  }
});

test('two probes merge into the best of each part', async () => {
  const { mergeFloors } = await import('../../bench/stream.js');
  const part = (kernel: string, access: 'read' | 'copy' | 'inplace', threads: number, gbps: number) => ({ kernel, access, threads, bytes: 8, best_ms: 8 / gbps / 1e6, gbps });
  const parts = (...ps: ReturnType<typeof part>[]) => ({
    method: 'm', floats_per_array: 16, reps: 5, huge_pages: false, parts: ps,
    best: ps.reduce((x, y) => (y.gbps > x.gbps ? y : x)), by_access: { read: ps[0], copy: ps[1], inplace: ps[2] },
  });
  const a = parts(part('sum', 'read', 2, 25), part('copy', 'copy', 2, 10), part('update', 'inplace', 2, 30));
  const b = parts(part('sum', 'read', 2, 20), part('copy', 'copy', 2, 40), part('update', 'inplace', 2, 20));
  const m = mergeFloors(a, b);
  assert.equal(m.reps, 10);
  assert.deepEqual(m.parts.map((p) => [p.kernel, p.gbps]).sort(), [['copy', 40], ['sum', 25], ['update', 30]]);
  assert.equal(m.best.kernel, 'copy');
  assert.equal(m.best.gbps, 40);
  assert.deepEqual([m.by_access.read.gbps, m.by_access.copy.gbps, m.by_access.inplace.gbps], [25, 40, 30]);
});

test('machine info: family, model and SIMD flags from /proc/cpuinfo text, "model name" not taken for the model', async () => {
  const { cpuIdentity } = await import('../../bench/common.js');
  const text = 'processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma avx512f avx512bw avx512_bf16\n';
  assert.deepEqual(cpuIdentity(text), { family: 26, model: 2, simd: ['avx2', 'fma', 'avx512f', 'avx512_bf16'] });
  assert.deepEqual(cpuIdentity(''), { family: null, model: null, simd: [] });
});
