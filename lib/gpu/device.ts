// `--device auto|cpu|cuda`: where the policy trains, decided before anything else happens
// in a run (no rollout, no file written). cuda needs, in this order: a binary built with
// CUDA, a usable device, cuBLASLt and a memory plan that fits; then the policy is built on
// the device engine (native/gpu/engine, in the storage dtype of config key storage). `auto` picks cuda when all of that
// holds, else cpu, and says why.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { STORAGE_DTYPES, type StorageDType, type TrainConfig } from '../config/schema.js';
import { hfConfig, presets } from '../model/config.js';
import type { EngineOptions } from '../model/index.js';
import { binaryInfo, cuda, type CudaStatus } from '../native.js';
import { findCublasLt, type CublasLtReport } from './cublaslt.js';
import { formatMemoryPlan, memoryPlan, modelShapeFromHfConfig, planProblem, type MemoryPlan, type ModelShape, type PlanSettings } from './memory-plan.js';

/** Whether the CUDA policy engine exists in this version (issue 13: it does; probes in tests may say otherwise). */
export const CUDA_ENGINE_IMPLEMENTED = true;

export class DeviceError extends Error {
  override name = 'DeviceError';
}

/** What the selection looks at (injected in tests). */
export interface DeviceProbe {
  binary: { cuda: boolean; path: string };
  cuda: CudaStatus;
  /** Called only when the binary and a device pass (it may ask python3 for site-packages). */
  cublasLt: () => CublasLtReport;
  engineImplemented: boolean;
}

export interface DeviceSelection {
  /** emulate: the device engine over the CPU harness (tests, debugging; chosen only by --device emulate). */
  device: 'cpu' | 'cuda' | 'emulate';
  /** One line for the run's log. */
  line: string;
  /** The memory plan, when one was made (cuda past the library checks). */
  plan?: MemoryPlan;
  /** The plan as printed. */
  planText?: string;
}

export function machineProbe(): DeviceProbe {
  const b = binaryInfo();
  return { binary: { cuda: b.cuda, path: b.path }, cuda: cuda.status(), cublasLt: () => findCublasLt(), engineImplemented: CUDA_ENGINE_IMPLEMENTED };
}

const NOT_IMPLEMENTED = 'the CUDA policy engine is not implemented yet (docs/gpu.md lists what exists)';

/** The first reason CUDA cannot be used here, or null. */
function cudaBlocker(p: DeviceProbe): string | null {
  if (!p.binary.cuda) return `the loaded native binary is CPU-only (${p.binary.path}); build the CUDA one with \`npm run build:cuda\` (needs nvcc)`;
  if (!p.cuda.available) return p.cuda.reason || 'no CUDA device: unknown reason';
  const lt = p.cublasLt();
  if (!lt.found) return lt.reason ?? 'cuBLASLt not found';
  return null;
}

/**
 * Decides the device. `plan`: the model shape and settings; with them, cuda also checks the
 * memory plan against device 0's free memory. Throws DeviceError (one line) when cuda was
 * asked for and cannot run.
 */
export function selectDevice(
  requested: TrainConfig['device'],
  probe: DeviceProbe,
  plan?: { shape: ModelShape; settings: Omit<PlanSettings, 'deviceFreeBytes' | 'deviceTotalBytes'> },
  log: (line: string) => void = () => undefined,
): DeviceSelection {
  if (requested === 'cpu') return { device: 'cpu', line: 'device: cpu (--device cpu)' };
  if (requested === 'emulate') return { device: 'emulate', line: 'device: emulate (--device emulate: the device engine on the CPU harness; tests and debugging, slow)' };
  const blocker = cudaBlocker(probe);
  if (requested === 'auto') {
    if (blocker) return { device: 'cpu', line: `device: cpu (auto: ${blocker})` };
    if (!probe.engineImplemented) return { device: 'cpu', line: `device: cpu (auto: a CUDA device and cuBLASLt are here, but ${NOT_IMPLEMENTED})` };
  }
  if (blocker) throw new DeviceError(`--device cuda: ${blocker}; or use --device cpu`);
  let sel: DeviceSelection = { device: 'cuda', line: `device: cuda (${requested === 'auto' ? 'auto' : '--device cuda'}: ${probe.cuda.devices[0]?.name ?? 'device 0'})` };
  if (plan) {
    const d = probe.cuda.devices[0]!;
    const p = memoryPlan(plan.shape, { ...plan.settings, deviceFreeBytes: d.freeMemory, deviceTotalBytes: d.totalMemory });
    sel = { ...sel, plan: p, planText: formatMemoryPlan(p) };
    log(sel.planText!); // printed before any verdict, so a failing run still shows its plan
    const problem = planProblem(p);
    if (problem) throw new DeviceError(`--device cuda: ${problem}`);
  }
  if (!probe.engineImplemented) throw new DeviceError(`--device cuda: ${NOT_IMPLEMENTED}; use --device cpu`);
  return sel;
}

/** The model shape a run will train: its config.json, or the random preset's. */
export function runModelShape(c: Pick<TrainConfig, 'model' | 'modelPreset'>): ModelShape {
  if (c.model) {
    const path = join(c.model, 'config.json');
    let cfg: Record<string, unknown>;
    try {
      cfg = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new DeviceError(`cannot read ${path}: ${(e as Error).message}`);
    }
    return modelShapeFromHfConfig(cfg, path);
  }
  return modelShapeFromHfConfig(hfConfig(presets[c.modelPreset]), `preset ${c.modelPreset}`);
}

/**
 * The engine a run's policy is built on for a selection: the CPU engine, or the device engine
 * in the storage dtype (config storage) with the plan's checkpointing (config
 * gradientCheckpointing, unset = on from 1e9 parameters).
 */
export function policyEngine(sel: DeviceSelection, storage: StorageDType = STORAGE_DTYPES[0]): EngineOptions {
  if (sel.device === 'cpu') return { device: 'cpu' };
  if (sel.device === 'emulate') return { device: 'emulate', storage, gradientCheckpointing: false };
  return { device: 'cuda', storage, gradientCheckpointing: sel.plan?.gradientCheckpointing ?? false };
}

/** A given engine (tests: the emulated device engine) with the config's storage dtype, unless it names its own; the CPU engine as it is. */
export function engineWithStorage(e: EngineOptions, storage: StorageDType): EngineOptions {
  return (e.device ?? 'cpu') === 'cpu' || e.storage !== undefined ? e : { ...e, storage };
}

/** selectDevice for a run's configuration on this machine; logs the plan (cuda) and the choice. */
export function selectTrainingDevice(c: TrainConfig, log: (line: string) => void = () => undefined, probe: DeviceProbe = machineProbe()): DeviceSelection {
  const sel = selectFor(c, log, probe);
  log(sel.line);
  return sel;
}

function selectFor(c: TrainConfig, log: (line: string) => void, probe: DeviceProbe): DeviceSelection {
  if (c.device === 'cpu' || c.device === 'emulate') return selectDevice(c.device, probe);
  // auto plans too when it will pick cuda: the plan decides checkpointing and must fit
  let lt: CublasLtReport | undefined;
  const once: DeviceProbe = { ...probe, cublasLt: () => (lt ??= probe.cublasLt()) };
  const wantsPlan = c.device === 'cuda' || (cudaBlocker(once) === null && once.engineImplemented);
  const plan = wantsPlan
    ? { shape: runModelShape(c), settings: { microBatchTokens: c.microBatchTokens, gradientCheckpointing: c.gradientCheckpointing, beta: c.beta, storage: c.storage, keepLogitsMb: c.keepLogitsMb } }
    : undefined;
  return selectDevice(c.device, once, plan, log);
}
