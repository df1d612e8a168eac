// `--device` to the policy's engine: a cuda selection builds the device engine in bf16 with
// the memory plan's checkpointing; auto plans before it picks cuda; cpu stays the CPU engine.
// And the real machine: `train --device cuda` on a CPU-only binary fails at once in one line.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultConfig, type TrainConfig } from '../../lib/config/index.js';
import type { CublasLtReport } from '../../lib/gpu/cublaslt.js';
import { CUDA_ENGINE_IMPLEMENTED, policyEngine, selectTrainingDevice, type DeviceProbe } from '../../lib/gpu/device.js';
import { PolicyModel } from '../../lib/model/index.js';
import { cuda, type CudaStatus } from '../../lib/native.js';

const GiB = 2 ** 30;
const h200: CudaStatus = {
  built: true, available: true, reason: '', runtimeVersion: 13000, driverVersion: 13000,
  devices: [{ index: 0, name: 'NVIDIA H200', totalMemory: 140 * GiB, freeMemory: 139 * GiB, computeCapability: '9.0', multiprocessors: 132 }],
};
const lt: CublasLtReport = { found: true, path: '/w/libcublasLt.so.13', origin: 'python wheel', version: 130100, versionText: '13.1.0', searched: [], attempts: [] };

function gpuProbe(calls = { n: 0 }): DeviceProbe {
  return { binary: { cuda: true, path: '/pkg/build-cuda/Release/murphy_native.node' }, cuda: h200, cublasLt: () => { calls.n++; return lt; }, engineImplemented: true };
}

describe('--device to the policy engine', () => {
  it('the CUDA engine is implemented in this version', () => assert.equal(CUDA_ENGINE_IMPLEMENTED, true));

  it('cpu builds the CPU engine; cuda the device engine in bf16 with the plan\'s checkpointing', () => {
    const log: string[] = [];
    const c: TrainConfig = { ...defaultConfig(), device: 'cpu' };
    assert.deepEqual(policyEngine(selectTrainingDevice(c, (l) => log.push(l), gpuProbe())), { device: 'cpu' });
    for (const [gradientCheckpointing, want] of [[null, false], [true, true], [false, false]] as const) {
      const sel = selectTrainingDevice({ ...defaultConfig(), device: 'cuda', gradientCheckpointing }, () => undefined, gpuProbe());
      assert.equal(sel.device, 'cuda');
      assert.deepEqual(policyEngine(sel), { device: 'cuda', storage: 'bf16', gradientCheckpointing: want }, `gradientCheckpointing ${gradientCheckpointing}`);
    }
  });

  it('auto on a machine that passes every check picks cuda with a plan, asking for cuBLASLt once', () => {
    const calls = { n: 0 };
    const log: string[] = [];
    const sel = selectTrainingDevice({ ...defaultConfig(), device: 'auto' }, (l) => log.push(l), gpuProbe(calls));
    assert.equal(sel.device, 'cuda');
    assert.ok(sel.plan, 'auto made a memory plan');
    assert.match(log[0]!, /^memory plan: qwen3/);
    assert.match(log.at(-1)!, /^device: cuda \(auto: NVIDIA H200\)$/);
    assert.equal(calls.n, 1);
  });

  it('this machine: a cuda engine without a GPU fails with one line naming the cause (CPU-only binary, or no device)', async () => {
    const st = cuda.status();
    if (st.available) return; // a GPU: test/gpu/engine.test.ts covers it
    await assert.rejects(PolicyModel.random('tiny', { device: 'cuda' }), (e: Error) => {
      if (!st.built) assert.equal(e.message, "device 'cuda': the loaded native binary is CPU-only; build the CUDA one with `npm run build:cuda` (needs nvcc), or use device 'cpu'");
      else assert.match(e.message, /^device 'cuda': no CUDA device: [^\n]*; or use device 'cpu'$/);
      return true;
    });
  });
});
