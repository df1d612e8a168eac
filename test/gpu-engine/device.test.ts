// `--device auto|cpu|cuda`: every way `--device cuda` can fail, each at once and in one line,
// and `auto` choosing cpu with its reason. Probes are injected for the paths this machine
// cannot show (a CUDA binary with a device); the real machine is checked end to end.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { defaultConfig, resolveConfig, type TrainConfig } from '../../lib/config/index.js';
import { loadCublasLt, type CublasLtReport } from '../../lib/gpu/cublaslt.js';
import { DeviceError, machineProbe, policyEngine, selectDevice, selectTrainingDevice, type DeviceProbe } from '../../lib/gpu/device.js';
import { modelShapeFromHfConfig } from '../../lib/gpu/memory-plan.js';
import type { CudaStatus } from '../../lib/native.js';
import { runTraining } from '../../lib/commands/run-training.js';
import { cli } from '../helpers/cli.js';

const GiB = 2 ** 30;
const h100: CudaStatus = {
  built: true, available: true, reason: '', runtimeVersion: 13000, driverVersion: 13000,
  devices: [{ index: 0, name: 'NVIDIA H100 80GB HBM3', totalMemory: 80 * GiB, freeMemory: 80 * GiB, computeCapability: '9.0', multiprocessors: 132 }],
};
const noDevice: CudaStatus = {
  built: true, available: false, reason: 'no CUDA device: CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)',
  runtimeVersion: 13000, driverVersion: 0, devices: [],
};
const lt13: CublasLtReport = { found: true, path: '/w/nvidia/cu13/lib/libcublasLt.so.13', origin: 'python wheel', version: 130100, versionText: '13.1.0', searched: [], attempts: [] };

function probe(o: Partial<DeviceProbe> & { calls?: { n: number } } = {}): DeviceProbe {
  const calls = o.calls ?? { n: 0 };
  return {
    binary: o.binary ?? { cuda: true, path: '/pkg/build-cuda/Release/murphy_native.node' },
    cuda: o.cuda ?? h100,
    cublasLt: o.cublasLt ?? (() => { calls.n++; return lt13; }),
    engineImplemented: o.engineImplemented ?? false,
  };
}
const cpuOnly = { cuda: false, path: '/pkg/build/Release/murphy_native.node' };
const qwen17 = modelShapeFromHfConfig({
  model_type: 'qwen3', vocab_size: 151936, hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 28,
  num_attention_heads: 16, num_key_value_heads: 8, head_dim: 128, tie_word_embeddings: true,
});

describe('--device: choosing where the policy trains', () => {
  it('cpu is cpu, without probing anything', () => {
    const calls = { n: 0 };
    assert.deepEqual(selectDevice('cpu', probe({ binary: cpuOnly, calls })), { device: 'cpu', line: 'device: cpu (--device cpu)' });
    assert.equal(calls.n, 0);
  });
  it('emulate is the device engine on the CPU harness, without probing anything', () => {
    const calls = { n: 0 };
    const sel = selectDevice('emulate', probe({ binary: cpuOnly, calls }));
    assert.equal(sel.device, 'emulate');
    assert.match(sel.line, /^device: emulate \(--device emulate: the device engine on the CPU harness/);
    assert.deepEqual(policyEngine(sel), { device: 'emulate', storage: 'bf16', gradientCheckpointing: false });
    assert.equal(calls.n, 0);
  });
  it('auto picks cpu and says why: CPU-only binary / no device / no cuBLASLt / no engine yet', () => {
    const calls = { n: 0 };
    assert.match(selectDevice('auto', probe({ binary: cpuOnly, calls })).line, /^device: cpu \(auto: the loaded native binary is CPU-only \(\/pkg\/build\/Release\/murphy_native\.node\); build the CUDA one with `npm run build:cuda`/);
    assert.equal(calls.n, 0, 'cuBLASLt is not searched for when the binary cannot use it');
    assert.equal(selectDevice('auto', probe({ cuda: noDevice })).line, `device: cpu (auto: ${noDevice.reason})`);
    const none = loadCublasLt({ candidates: [{ path: 'libcublasLt-murphy-absent.so.13', origin: 'dynamic loader' }], searched: ['the dynamic loader'] });
    assert.match(selectDevice('auto', probe({ cublasLt: () => none })).line, /^device: cpu \(auto: cuBLASLt not found: looked in the dynamic loader/);
    const all = selectDevice('auto', probe());
    assert.equal(all.device, 'cpu');
    assert.match(all.line, /auto: a CUDA device and cuBLASLt are here, but the CUDA policy engine is not implemented yet/);
  });
  it('auto picks cuda once the engine exists', () => {
    assert.equal(selectDevice('auto', probe({ engineImplemented: true })).device, 'cuda');
  });
  it('cuda with a CPU-only binary fails naming the binary and the fix', () => {
    assert.throws(() => selectDevice('cuda', probe({ binary: cpuOnly })), (e: unknown) => {
      assert.ok(e instanceof DeviceError);
      assert.match(e.message, /^--device cuda: the loaded native binary is CPU-only \(\/pkg\/build\/Release\/murphy_native\.node\); build the CUDA one with `npm run build:cuda` \(needs nvcc\); or use --device cpu$/);
      return true;
    });
  });
  it('cuda without a device fails with the driver\'s reason', () => {
    assert.throws(() => selectDevice('cuda', probe({ cuda: noDevice })), /^DeviceError: --device cuda: no CUDA device: CUDA driver version is insufficient .*; or use --device cpu$/);
  });
  it('cuda without cuBLASLt fails naming where it looked', () => {
    const none = loadCublasLt({ candidates: [{ path: '/nowhere/libcublasLt.so.13', origin: 'MURPHY_CUBLASLT' }], searched: ['MURPHY_CUBLASLT=/nowhere/libcublasLt.so.13'] });
    assert.throws(() => selectDevice('cuda', probe({ cublasLt: () => none })), /^DeviceError: --device cuda: cuBLASLt not found: MURPHY_CUBLASLT is set and \/nowhere\/libcublasLt\.so\.13: dlopen failed: .*; or use --device cpu$/);
  });
  it('cuda on a machine that passes every check prints the plan, then says the engine is not implemented', () => {
    const logged: string[] = [];
    assert.throws(
      () => selectDevice('cuda', probe(), { shape: qwen17, settings: { microBatchTokens: 16384, gradientCheckpointing: null, beta: 0 } }, (l) => logged.push(l)),
      /^DeviceError: --device cuda: the CUDA policy engine is not implemented yet \(docs\/gpu\.md lists what exists\); use --device cpu$/,
    );
    assert.equal(logged.length, 1);
    // (1 GiB of kept logits at keepLogitsMb's default: 173360 tokens; test/gpu-engine/memory-plan.test.ts)
    assert.match(logged[0]!, /^memory plan: qwen3, 1\.721B parameters[^]*up to 173360 tokens per micro-batch fit/);
  });
  it('cuda with a plan that does not fit fails naming the knob, before the engine check', () => {
    const logged: string[] = [];
    assert.throws(
      () => selectDevice('cuda', probe(), { shape: qwen17, settings: { microBatchTokens: 32768, gradientCheckpointing: false, beta: 0 } }, (l) => logged.push(l)),
      /^DeviceError: --device cuda: --micro-batch-tokens 32768 needs .* lower --micro-batch-tokens to 23264 or less or turn on --gradient-checkpointing \(then 173360 fit\) or lower --keep-logits-mb \(its kept logits take 1\.00 GiB\)$/,
    );
    assert.equal(logged.length, 1);
  });
  it('selectTrainingDevice reads the model\'s shape (the demo preset here) and logs the choice', () => {
    const logged: string[] = [];
    const c: TrainConfig = { ...defaultConfig(), device: 'cuda' };
    assert.throws(() => selectTrainingDevice(c, (l) => logged.push(l), probe()), /not implemented yet/);
    assert.match(logged[0]!, /^memory plan: qwen3, 0\.\dM parameters \(2 layers, hidden 64/);
    const auto: string[] = [];
    assert.equal(selectTrainingDevice({ ...defaultConfig(), device: 'auto' }, (l) => auto.push(l), probe({ binary: cpuOnly })).device, 'cpu');
    assert.match(auto.join('\n'), /^device: cpu \(auto: the loaded native binary is CPU-only/);
  });
});

describe('--device on this machine', () => {
  it('auto picks cpu here (whatever this machine has, the CUDA engine does not exist yet)', () => {
    const s = selectTrainingDevice({ ...defaultConfig(), device: 'auto' }, undefined, machineProbe());
    assert.equal(s.device, 'cpu');
    assert.match(s.line, /^device: cpu \(auto: .+\)$/);
  });
  it('the config key takes auto, cpu, cuda, emulate and nothing else; emulate is the device engine on the CPU harness', () => {
    assert.equal(defaultConfig().device, 'auto');
    assert.equal(resolveConfig({ flags: { device: 'cuda' } }).device, 'cuda');
    assert.equal(resolveConfig({ flags: { device: 'emulate' } }).device, 'emulate');
    assert.throws(() => resolveConfig({ flags: { device: 'gpu' } }), /config key "device" \(--device\).*must be one of auto, cpu, cuda, emulate; got "gpu"/);
    const em = selectTrainingDevice({ ...defaultConfig(), device: 'emulate' }, undefined, machineProbe());
    assert.deepEqual([em.device, policyEngine(em)], ['emulate', { device: 'emulate', storage: 'bf16', gradientCheckpointing: false }]);
    assert.match(em.line, /^device: emulate \(--device emulate: the device engine on the CPU harness/);
    assert.equal(resolveConfig({ flags: { gradientCheckpointing: 'false' } }).gradientCheckpointing, false);
    assert.equal(defaultConfig().gradientCheckpointing, null);
  });
  it('runTraining with --device cuda fails before writing anything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-dev-'));
    try {
      const out = join(dir, 'run');
      await assert.rejects(runTraining({ ...defaultConfig(), device: 'cuda', out }, { handleSignals: false }), (e: unknown) => {
        assert.ok(e instanceof DeviceError);
        assert.match(e.message, /^--device cuda: (the loaded native binary is CPU-only|no CUDA device|cuBLASLt not found|the CUDA policy engine is not implemented yet)[^\n]*$/);
        return true;
      });
      assert.equal(existsSync(out), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('`murphy-native train --device cuda` exits 1 with one line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-dev-'));
    try {
      const r = spawnSync(process.execPath, cli('train', '--device', 'cuda', '--out', join(dir, 'run')), { encoding: 'utf8' });
      assert.equal(r.status, 1);
      assert.match(r.stderr, /^murphy-native train: --device cuda: [^\n]+\n$/);
      assert.equal(existsSync(join(dir, 'run')), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
