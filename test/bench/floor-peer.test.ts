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
  const perElem: Record<string, number> = { sum: 4, copy: 8, triad: 12, copy_nt: 8, triad_nt: 12, update: 8, nstream: 16 };
  const kernels = ['sum', 'copy', 'triad', 'update', 'nstream', ...(process.arch === 'x64' ? ['copy_nt', 'triad_nt'] : [])];
  for (const threads of [2, 1]) {
    for (const k of kernels) {
      const p = f.parts.find((x) => x.kernel === k && x.threads === threads);
      assert.ok(p, `${k} with ${threads} threads measured`);
      assert.equal(p.bytes, perElem[k] * floats);
      assert.ok(p.gbps > 0 && Number.isFinite(p.gbps));
      assert.ok(Math.abs(p.gbps - p.bytes / p.best_ms / 1e6) <= 1e-3 * p.gbps + 1e-3);
    }
  }
  assert.equal(f.best.gbps, Math.max(...f.parts.map((p) => p.gbps)));
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
  };
  assert.doesNotMatch(describePeer(base, 2), /not a fair/i);
  const ref = { ...base, blas: 'reference', fair: false, unfair_reason: 'PyTorch runs on the reference BLAS (x); apt-get install libopenblas0-pthread gives it OpenBLAS' };
  const line = describePeer(ref, 2);
  assert.match(line, /NOT a fair peer, no torch ratios/);
  assert.match(line, /libopenblas0-pthread/);
});

test('two probes merge into the best of each part', async () => {
  const { mergeFloors } = await import('../../bench/stream.js');
  const part = (kernel: string, threads: number, gbps: number) => ({ kernel, threads, bytes: 8, best_ms: 8 / gbps / 1e6, gbps });
  const a = { method: 'm', floats_per_array: 16, reps: 5, parts: [part('copy', 2, 10), part('update', 2, 30)], best: part('update', 2, 30) };
  const b = { method: 'm', floats_per_array: 16, reps: 5, parts: [part('copy', 2, 40), part('update', 2, 20)], best: part('copy', 2, 40) };
  const m = mergeFloors(a, b);
  assert.equal(m.reps, 10);
  assert.deepEqual(m.parts.map((p) => [p.kernel, p.gbps]).sort(), [['copy', 40], ['update', 30]]);
  assert.equal(m.best.kernel, 'copy');
  assert.equal(m.best.gbps, 40);
});
