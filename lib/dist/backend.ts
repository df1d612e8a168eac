// Which collective backend a data-parallel job uses, and joining it. The one source of the
// default (config key distBackend = auto): NCCL with --device cuda (GPU memory), the CPU backend
// over TCP with --device cpu and emulate (host memory). Explicit choices are checked here with
// one line each: nccl needs cuda and an NCCL library; tcp works with every device (the device
// engine's parameters and gradients cross as host copies anyway, docs/distributed.md).
// Each rank uses one GPU: with several ranks on a node, CUDA_VISIBLE_DEVICES is narrowed to the
// local rank's entry before CUDA starts in this process, so its GPU is device 0.
import { ConfigError } from '../config/index.js';
import type { TrainConfig } from '../config/schema.js';
import { selectTrainingDevice } from '../gpu/device.js';
import { findNccl, type NcclReport } from '../gpu/nccl.js';
import { SoloCollective, type Collective } from './collective.js';
import { readDistEnv, type DistEnv } from './env.js';
import { visibleDeviceFor } from './launch.js';
import { NcclCollective } from './nccl-collective.js';
import { TcpCollective } from './tcp.js';

export type DistBackend = 'nccl' | 'tcp';
/** A device as the run will use it (auto resolved). */
export type TrainDevice = 'cpu' | 'cuda' | 'emulate';

/** distBackend = auto: NCCL for cuda, TCP for the host-memory devices. */
export function defaultDistBackend(device: TrainDevice): DistBackend {
  return device === 'cuda' ? 'nccl' : 'tcp';
}

/**
 * The backend of `worldSize` ranks on `device` for config key distBackend; throws a
 * ConfigError (one line naming the fix) for a choice that cannot run.
 */
export function distBackendFor(device: TrainDevice, requested: TrainConfig['distBackend'], worldSize: number, nccl: () => NcclReport = () => findNccl()): DistBackend {
  const b = requested === 'auto' ? defaultDistBackend(device) : requested;
  if (worldSize <= 1) return b;
  if (b === 'nccl' && device !== 'cuda') {
    throw new ConfigError(`--dist-backend nccl moves GPU memory: it needs --device cuda, not ${device}; use --dist-backend tcp (or auto)`);
  }
  if (b === 'nccl') {
    const r = nccl();
    if (!r.found) throw new ConfigError(`--device cuda with ${worldSize} ranks uses NCCL (--dist-backend ${requested}): ${r.reason ?? 'NCCL not found'}; or pass --dist-backend tcp (host copies over TCP, slow)`);
  }
  return b;
}

/**
 * With several ranks on this node, makes this process see only its local rank's GPU (its
 * entry of CUDA_VISIBLE_DEVICES, or its index when unset); a list of one is left alone (the
 * launcher set it). Must run before CUDA starts in the process. Returns the value set, or null.
 */
export function narrowVisibleDevices(env: NodeJS.ProcessEnv, d: Pick<DistEnv, 'localRank' | 'localWorldSize'>): string | null {
  if (d.localWorldSize <= 1) return null;
  const list = env.CUDA_VISIBLE_DEVICES?.split(',').map((s) => s.trim()).filter(Boolean);
  if (list && list.length === 1) return null;
  if (list && d.localRank >= list.length) {
    throw new ConfigError(`local rank ${d.localRank} has no GPU of its own: CUDA_VISIBLE_DEVICES lists ${list.length} (${env.CUDA_VISIBLE_DEVICES}); start at most one rank per GPU`);
  }
  const v = visibleDeviceFor(env.CUDA_VISIBLE_DEVICES, d.localRank);
  env.CUDA_VISIBLE_DEVICES = v;
  return v;
}

/**
 * This process's collective when it is a rank of a job (torchrun/Slurm variables, or started
 * by --nproc-per-node), else null. Every call bounded by MURPHY_DIST_TIMEOUT seconds (1800).
 */
export async function joinJob(c: Pick<TrainConfig, 'device' | 'distBackend' | 'model' | 'modelPreset' | 'microBatchTokens' | 'gradientCheckpointing' | 'beta'>, env: NodeJS.ProcessEnv = process.env): Promise<Collective | null> {
  const d = readDistEnv(env);
  if (d.source === 'single') return null;
  if (d.worldSize === 1) return new SoloCollective();
  if (c.device === 'cuda' || c.device === 'auto') narrowVisibleDevices(env, d);
  const device: TrainDevice = c.device === 'auto' ? selectTrainingDevice(c as TrainConfig).device : c.device;
  const backend = distBackendFor(device, c.distBackend, d.worldSize);
  const timeout = Number(env.MURPHY_DIST_TIMEOUT ?? 1800);
  const common = { rank: d.rank, worldSize: d.worldSize, masterAddr: d.masterAddr, masterPort: d.masterPort, timeoutMs: timeout * 1000 };
  return backend === 'nccl' ? NcclCollective.create({ ...common, device: 0 }) : TcpCollective.create(common);
}
