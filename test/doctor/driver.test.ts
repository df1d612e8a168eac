// doctor says in one line when the NVIDIA driver is too old for the binary's CUDA runtime
// (static cudart 13 needs a driver for CUDA 13.x). No GPU needed: the versions are inputs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { driverTooOld, formatDoctor, type DoctorReport } from '../../lib/commands/doctor.js';

const cuda13 = { built: true, runtimeVersion: 13000 };

describe('doctor: NVIDIA driver too old', () => {
  it('a driver for CUDA 12.8 under a CUDA 13.0 runtime is too old, with the versions and the fix', () => {
    const line = driverTooOld({ ...cuda13, driverVersion: 12080 });
    assert.equal(
      line,
      "NVIDIA driver too old: it supports CUDA 12.8, this binary's CUDA runtime is 13.0 (needs a driver for CUDA 13.x, " +
        'Linux driver 580.65.06 or newer); update the driver, or build the CUDA addon from source with your own toolkit (README: Install)',
    );
  });

  it('a driver of the same or a newer major is fine (minor-version compatibility)', () => {
    assert.equal(driverTooOld({ ...cuda13, driverVersion: 13000 }), null);
    assert.equal(driverTooOld({ built: true, runtimeVersion: 13010, driverVersion: 13000 }), null);
    assert.equal(driverTooOld({ ...cuda13, driverVersion: 14000 }), null);
  });

  it('no driver, no CUDA build, or no runtime version: not a driver-version problem', () => {
    assert.equal(driverTooOld({ ...cuda13, driverVersion: 0 }), null);
    assert.equal(driverTooOld({ built: false, runtimeVersion: 0, driverVersion: 12080 }), null);
    assert.equal(driverTooOld({ built: true, runtimeVersion: 0, driverVersion: 12080 }), null);
  });

  const insufficient = 'no CUDA device: CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)';
  const report = (driverVersion: number): DoctorReport => {
    const cuda = { ...cuda13, available: false, driverVersion, devices: [], reason: insufficient };
    return {
      // reason and notes: the loader's account of its choice (lib/native), shown by doctor when present.
      binary: { path: '/x/prebuilds/linux-x64/murphy-native.napi.glibc.node', source: 'prebuild', reason: 'no local build', notes: [], cuda: true, napiVersion: 8 } as DoctorReport['binary'],
      cpu: { threads: 2, hardwareConcurrency: 2, simd: 'avx2', avx512bf16: false, amxBf16: false },
      cuda, driverTooOld: driverTooOld(cuda), cublasLt: { found: false, reason: 'not looked for', searched: [], attempts: [] },
      nccl: { found: false, reason: 'not looked for', searched: [], attempts: [] },
      node: 'v20.19.0', platform: 'linux-x64', sandbox: null, sandboxError: 'not checked',
    };
  };
  const cudaLines = (r: DoctorReport) => formatDoctor(r).split('\n').filter((l) => l.startsWith('cuda '));

  it('the text report shows it as the one cuda line, instead of the runtime error', () => {
    const r = report(12080);
    const lines = cudaLines(r);
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /^cuda\s+NVIDIA driver too old: it supports CUDA 12\.8, this binary's CUDA runtime is 13\.0/);
    assert.match(formatDoctor(r), /native addon\s+CUDA-enabled, prebuilt binary/);
  });

  it('the cpu line names the extensions the kernels use beyond the SIMD level (AVX512_BF16, AMX)', () => {
    const cpuLine = (cpu: Partial<DoctorReport['cpu']>) => formatDoctor({ ...report(0), cpu: { ...report(0).cpu, ...cpu } }).split('\n').find((l) => l.startsWith('cpu '));
    assert.match(cpuLine({})!, /SIMD: avx2$/);
    assert.match(cpuLine({ simd: 'avx512', avx512bf16: true })!, /SIMD: avx512 \(\+avx512_bf16\)$/);
    assert.match(cpuLine({ simd: 'avx512', avx512bf16: true, amxBf16: true })!, /SIMD: avx512 \(\+avx512_bf16, \+amx_bf16\)$/);
    // the matrix products' path, under the cpu line, where the report has it
    const text = (gemm?: DoctorReport['gemm']) => formatDoctor({ ...report(0), ...(gemm ? { gemm } : {}) });
    assert.match(text({ best: 'amx-bf16', paths: ['amx-bf16', 'avx512-bf16', 'avx512', 'avx2', 'baseline'] }),
      /\ncpu .*\n {15}matrix products: amx-bf16 \(of amx-bf16, avx512-bf16, avx512, avx2, baseline; MURPHY_GEMM_PATH sets it\)\n/);
    assert.doesNotMatch(text(), /matrix products/);
  });

  it('no driver at all (version 0) is said plainly, not as an insufficient driver', () => {
    assert.deepEqual(cudaLines(report(0)), [
      "cuda           no CUDA device: no NVIDIA driver is installed (the binary's CUDA runtime is 13.0; a GPU needs a driver for CUDA 13.x)",
    ]);
  });
});
