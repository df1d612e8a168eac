// Config key storage (--storage bf16|f32): one source for its values and default, passed to the
// device engine (cuda, or emulate in tests), accounted in the memory plan printed at start,
// refused with --device cpu, and not changeable on resume (test/train/config.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultConfig, resolveConfig, SCHEMA, type TrainConfig } from '../../lib/config/index.js';
import { STORAGE_DTYPES } from '../../lib/config/schema.js';
import type { CublasLtReport } from '../../lib/gpu/cublaslt.js';
import { engineWithStorage, policyEngine, selectTrainingDevice, type DeviceProbe } from '../../lib/gpu/device.js';
import { PolicyModel } from '../../lib/model/index.js';
import type { CudaStatus } from '../../lib/native.js';

const GiB = 2 ** 30;
const h200: CudaStatus = {
  built: true, available: true, reason: '', runtimeVersion: 13000, driverVersion: 13000,
  devices: [{ index: 0, name: 'NVIDIA H200', totalMemory: 140 * GiB, freeMemory: 139 * GiB, computeCapability: '9.0', multiprocessors: 132 }],
};
const lt: CublasLtReport = { found: true, path: '/w/libcublasLt.so.13', origin: 'python wheel', version: 130100, versionText: '13.1.0', searched: [], attempts: [] };
const gpuProbe = (): DeviceProbe => ({ binary: { cuda: true, path: '/pkg/build-cuda/Release/murphy_native.node' }, cuda: h200, cublasLt: () => lt, engineImplemented: true });

describe('--storage', () => {
  it('is a config key with the values and default of STORAGE_DTYPES (bf16)', () => {
    assert.deepEqual(SCHEMA.storage.values, [...STORAGE_DTYPES]);
    assert.equal(defaultConfig().storage, 'bf16');
    assert.equal(resolveConfig({ flags: { storage: 'f32', device: 'cuda' } }).storage, 'f32');
    assert.throws(() => resolveConfig({ flags: { storage: 'f16' } }), /config key "storage" \(--storage\).*must be one of bf16, f32|"storage".*bf16.*f32/);
  });

  it('--storage f32 with --device cpu is refused in one line naming both flags', () => {
    assert.throws(() => resolveConfig({ flags: { storage: 'f32', device: 'cpu' } }), /^ConfigError: config key "storage" \(--storage f32\) applies to the device engine, and --device cpu was given: .*drop --storage or use --device cuda$/);
    // the default is no request: the CPU engine runs as before
    assert.equal(resolveConfig({ flags: { device: 'cpu' } }).storage, 'bf16');
  });

  it('reaches the device engine and the memory plan printed at start', () => {
    for (const storage of STORAGE_DTYPES) {
      const c: TrainConfig = { ...defaultConfig(), device: 'cuda', storage };
      const log: string[] = [];
      const sel = selectTrainingDevice(c, (l) => log.push(l), gpuProbe());
      assert.equal(sel.plan!.storage, storage);
      assert.match(log[0]!, new RegExp(`\\n  storage ${storage}: `));
      assert.deepEqual(policyEngine(sel, c.storage), { device: 'cuda', storage, gradientCheckpointing: false });
    }
    assert.deepEqual(policyEngine(selectTrainingDevice({ ...defaultConfig(), device: 'cpu' }, () => undefined, gpuProbe()), 'bf16'), { device: 'cpu' });
  });

  it('an engine given to the run (tests: emulate) takes the config\'s storage unless it names its own; the CPU engine is left alone', async () => {
    assert.deepEqual(engineWithStorage({ device: 'emulate' }, 'f32'), { device: 'emulate', storage: 'f32' });
    assert.deepEqual(engineWithStorage({ device: 'emulate', storage: 'bf16' }, 'f32'), { device: 'emulate', storage: 'bf16' });
    assert.deepEqual(engineWithStorage({ device: 'cpu' }, 'f32'), { device: 'cpu' });
    const m = await PolicyModel.random('tiny', engineWithStorage({ device: 'emulate' }, 'f32'));
    assert.deepEqual(m.engine, { device: 'emulate', storage: 'f32' });
  });
});
