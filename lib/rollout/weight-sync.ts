// Weight sync to vLLM over NCCL (docs/distributed.md, "NCCL weight sync"). The trainer is rank 0
// of a group with every vLLM worker; the worker-extension methods in python/murphy_vllm
// (murphy_nccl_info / _init / _recv / _close, reached through /collective_rpc) are the other
// side. Sequence:
//   once:      murphy_nccl_info on every server; refuse when the trainer's GPU is one of the
//              workers' or the NCCL versions differ; world = 1 + every server's workers; each
//              server's rank offset; murphy_nccl_init(id hex, world, offset) on every server
//              while the trainer joins as rank 0 (all with a deadline).
//   each sync: (inside VllmBackend's gate: no generate call in flight) murphy_nccl_recv(meta)
//              on every server, not awaited; broadcast the bf16 buckets in the plan's order;
//              await every {loaded: true}; reset each server's prefix cache.
//   on a failure: abort the group, fall back to the disk sync for this step, set up again at the
//              next sync (a worker stuck in a receive may need its server restarted: logged).
// `--weight-sync nccl|disk|auto`: disk never tries NCCL; nccl fails the run when the checks
// refuse; auto uses NCCL where the checks pass and the disk sync (for the rest of the run)
// where they do not. Transport failures (timeouts, a dead server) fall back in both modes.
import { execFileSync } from 'node:child_process';
import { cuda, DeviceArray } from '../native.js';
import { findNccl, NcclCommunicator, ncclUniqueId, uniqueIdHex } from '../gpu/nccl.js';
import type { PolicyWeights, WeightSync, WeightSyncReport } from './types.js';
import { RolloutError } from './types.js';
import type { VllmBackend } from './vllm.js';
import { bucketPlan, DEFAULT_BUCKET_BYTES, packBucket, type SyncBucket, type SyncMeta } from './weight-sync-plan.js';
import { devicePacker } from './device-pack.js';

export const WEIGHT_SYNC_MODES = ['auto', 'nccl', 'disk'] as const;
export type WeightSyncMode = (typeof WEIGHT_SYNC_MODES)[number];

export const NCCL_METHODS = {
  info: 'murphy_nccl_info',
  init: 'murphy_nccl_init',
  recv: 'murphy_nccl_recv',
  close: 'murphy_nccl_close',
} as const;

/** Rank 0's side of the weight-sync group: NCCL on a GPU, or the loopback fake. */
export interface SyncChannel {
  readonly kind: 'nccl' | 'loopback' | (string & {});
  /** NCCL version text ("2.21.5"), compared with the workers'. */
  readonly ncclVersion: string;
  /** The trainer's GPU UUID, when known, compared with the workers'. */
  readonly gpuUuid: string | null;
  /** The 128-byte unique id as hex (murphy_nccl_init's first argument). */
  readonly idHex: string;
  /** Joins as rank 0 of `world`; rejects at the deadline. */
  join(world: number, timeoutMs: number): Promise<void>;
  /** Broadcasts one bucket from rank 0; rejects at the deadline. */
  broadcast(bytes: Uint8Array, timeoutMs: number): Promise<void>;
  /** A channel on a CUDA device: broadcasts a device bucket of `bytes` that `fill` packs (lib/rollout/device-pack.ts). */
  broadcastDevice?(bytes: number, fill: (out: DeviceArray<'u8'>) => void, timeoutMs: number): Promise<void>;
  close(timeoutMs: number): Promise<void>;
  /** Never blocks; a waiting call rejects. */
  abort(): void;
}

/** A check that refuses NCCL (not a transport failure): `nccl` mode stops, `auto` stays on disk. */
export class WeightSyncRefused extends RolloutError {
  override name = 'WeightSyncRefused';
}

/** One server's answer to murphy_nccl_info: its workers' infos (unchecked). */
export interface ServerWorkers {
  server: string;
  results: unknown;
}

/** One worker's answer to murphy_nccl_info. */
export interface WorkerInfo {
  rank: number;
  tp_size: number;
  pp_size: number;
  dp_rank: number;
  dp_size: number;
  gpu_uuid: string | null;
  nccl_version: string;
}

const normUuid = (u: string) => u.trim().toLowerCase().replace(/^gpu-/, '');

/**
 * Whether two NCCL version texts name one version: "2.21.0", "2.21." (what vLLM's
 * NCCLLibrary.ncclGetVersion prints when the patch is 0) and "2.21" are the same.
 */
export function sameNcclVersion(a: string, b: string): boolean {
  const nums = (v: string) => (/^\d+(\.\d*)*$/.test(v.trim()) ? v.trim().split('.').map((x) => Number(x || 0)) : undefined);
  const x = nums(a), y = nums(b);
  if (x === undefined || y === undefined) return a.trim() === b.trim();
  while (x.length < 3) x.push(0);
  while (y.length < 3) y.push(0);
  return x.every((v, i) => v === y[i]);
}

/**
 * The group layout from every server's murphy_nccl_info results (in server order), after the
 * checks: the trainer's GPU is none of the workers', every worker's NCCL version equals the
 * trainer's, every server's workers agree on TP x PP x DP. Returns world size and each
 * server's rank offset (rank = offset + dp_rank x TP x PP + worker rank, vLLM's formula). Pure.
 */
export function groupLayout(trainer: { gpuUuid: string | null; ncclVersion: string }, servers: ServerWorkers[]): { world: number; offsets: number[] } {
  let next = 1;
  const offsets: number[] = [];
  for (const { server, results } of servers) {
    const rs = Array.isArray(results) ? (results as WorkerInfo[]) : [];
    if (rs.length === 0) throw new WeightSyncRefused(`${server}: murphy_nccl_info returned no workers (is the worker extension loaded? docs/rollout.md)`);
    const per = rs[0].tp_size * rs[0].pp_size;
    const dp = rs[0].dp_size;
    for (const w of rs) {
      if (typeof w !== 'object' || w === null || !Number.isSafeInteger(w.tp_size) || !Number.isSafeInteger(w.pp_size) || !Number.isSafeInteger(w.dp_size)) {
        throw new WeightSyncRefused(`${server}: malformed murphy_nccl_info answer ${JSON.stringify(w)}`);
      }
      if (w.tp_size * w.pp_size !== per || w.dp_size !== dp) throw new WeightSyncRefused(`${server}: the workers disagree on the parallel layout`);
      if (trainer.gpuUuid && w.gpu_uuid && normUuid(w.gpu_uuid) === normUuid(trainer.gpuUuid)) {
        throw new WeightSyncRefused(`${server}: worker ${w.rank} runs on the trainer's GPU (${trainer.gpuUuid}); NCCL cannot put two ranks of one group on one GPU: give the trainer its own GPU (CUDA_VISIBLE_DEVICES) or use --weight-sync disk`);
      }
      if (!sameNcclVersion(String(w.nccl_version), trainer.ncclVersion)) {
        throw new WeightSyncRefused(`${server}: worker ${w.rank} has NCCL ${w.nccl_version}, the trainer ${trainer.ncclVersion}; point MURPHY_NCCL at the libnccl.so.2 that vLLM uses (its nvidia-nccl wheel) or use --weight-sync disk`);
      }
    }
    if (rs.length !== per) throw new WeightSyncRefused(`${server}: ${rs.length} worker(s) answered for tensor x pipeline parallel size ${per}`);
    offsets.push(next);
    next += per * dp;
  }
  return { world: next, offsets };
}

/** The UUID of CUDA device `device` as this process sees it (CUDA_VISIBLE_DEVICES applied), from nvidia-smi; null when unknown. */
export function trainerGpuUuid(device: number, env: Record<string, string | undefined> = process.env): string | null {
  const vis = env.CUDA_VISIBLE_DEVICES?.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const sel = vis !== undefined ? vis[device] : String(device);
  if (sel === undefined) return null;
  if (/^GPU-/i.test(sel)) return sel;
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=uuid', '--format=csv,noheader', '-i', sel], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] });
    return out.trim() || null;
  } catch {
    return null;
  }
}

/** The trainer's NCCL channel: rank 0 on `device`, each bucket uploaded to a device staging buffer and broadcast as bytes. */
export class NcclChannel implements SyncChannel {
  readonly kind = 'nccl';
  private comm: NcclCommunicator | undefined;
  private constructor(readonly ncclVersion: string, readonly gpuUuid: string | null, readonly idHex: string, private readonly id: Uint8Array, private readonly device: number) {}

  static async open(device = 0): Promise<NcclChannel> {
    const st = cuda.status();
    if (!st.available) throw new WeightSyncRefused(`NCCL weight sync needs a CUDA device in the trainer process: ${st.reason}`);
    const r = findNccl({ install: true });
    if (!r.found) throw new WeightSyncRefused(r.reason ?? 'NCCL not found');
    const id = ncclUniqueId();
    return new NcclChannel(r.versionText ?? '', trainerGpuUuid(device), uniqueIdHex(id), id, device);
  }

  async join(world: number, timeoutMs: number): Promise<void> {
    this.comm = await NcclCommunicator.init({ id: this.id, worldSize: world, rank: 0, device: this.device, timeoutMs });
  }

  async broadcast(bytes: Uint8Array, timeoutMs: number): Promise<void> {
    if (this.comm === undefined) throw new Error('the NCCL weight-sync group is not formed');
    const staging = DeviceArray.from(bytes);
    try {
      await this.comm.broadcast(staging, staging, bytes.length, 'u8', 0, timeoutMs);
    } finally {
      staging.free();
    }
  }

  async broadcastDevice(bytes: number, fill: (out: DeviceArray<'u8'>) => void, timeoutMs: number): Promise<void> {
    if (this.comm === undefined) throw new Error('the NCCL weight-sync group is not formed');
    const staging = DeviceArray.empty('u8', bytes);
    try {
      fill(staging);
      await this.comm.broadcast(staging, staging, bytes, 'u8', 0, timeoutMs);
    } finally {
      staging.free();
    }
  }

  async close(timeoutMs: number): Promise<void> {
    await this.comm?.close(timeoutMs);
  }

  abort(): void {
    this.comm?.abort();
  }
}

export interface NcclWeightSyncOptions {
  mode: Exclude<WeightSyncMode, 'disk'>;
  /**
   * Opens rank 0's channel once every server answered murphy_nccl_info (`workers`, in server
   * order): NcclChannel.open on a GPU, LoopbackChannel.open against serve (weight-sync-channel.ts
   * chooses). May refuse (WeightSyncRefused).
   */
  channel: (workers: ServerWorkers[]) => Promise<SyncChannel>;
  /** The disk sync used as the fallback. */
  fallback: WeightSync;
  /** Bytes per bucket. Default 512 MiB. */
  bucketBytes?: number;
  /** Deadline of the group's set-up and of each sync, ms. Default 300 000. */
  timeoutMs?: number;
  /** Log lines (fallbacks, set-up). */
  log?: (line: string) => void;
}

interface Group {
  channel: SyncChannel;
  servers: string[];
}

type Json = Record<string, unknown>;

/** Weight sync over NCCL with the disk sync as fallback (see the top of this file). */
export class NcclWeightSync implements WeightSync {
  private group: Group | undefined;
  /** Set when auto mode gave up on NCCL for the run (a check refused it). */
  private refused: string | undefined;

  constructor(private readonly client: VllmBackend, private readonly o: NcclWeightSyncOptions) {}

  private get timeoutMs(): number { return this.o.timeoutMs ?? 300_000; }

  private async rpc(server: string, method: string, args: unknown[], timeoutMs: number): Promise<unknown[]> {
    const r = await this.client.request(server, 'POST', '/collective_rpc', { method, args, kwargs: {}, timeout: Math.ceil(timeoutMs / 1000) }, timeoutMs) as Json | null;
    if (r === null || !Array.isArray(r.results)) throw new Error(`${server}: ${method} returned no results`);
    return r.results as unknown[];
  }

  /** Forms the group: info, rank 0's channel, checks, init on every server while rank 0 joins. */
  private async setUp(): Promise<Group> {
    const servers = this.client.liveServers();
    if (servers.length === 0) throw new Error('no live vLLM server');
    const infos: ServerWorkers[] = await Promise.all(servers.map(async (server) => {
      try {
        return { server, results: await this.rpc(server, NCCL_METHODS.info, [], 60_000) };
      } catch (e) {
        throw new WeightSyncRefused(`${server}: ${NCCL_METHODS.info} failed (${(e as Error).message}); start vLLM with the murphy worker extension (docs/rollout.md)`);
      }
    }));
    const channel = await this.o.channel(infos);
    try {
      const { world, offsets } = groupLayout(channel, infos);
      const t = this.timeoutMs;
      const inits = servers.map((server, i) => this.rpc(server, NCCL_METHODS.init, [channel.idHex, world, offsets[i]], t));
      await Promise.all([channel.join(world, t), ...inits]);
      this.o.log?.(`weight sync: ${channel.kind} group of ${world} ranks formed (trainer + ${world - 1} vLLM worker(s) on ${servers.length} server(s))`);
      return { channel, servers };
    } catch (e) {
      channel.abort();
      throw e;
    }
  }

  async sync(policy: PolicyWeights, step: number): Promise<WeightSyncReport> {
    if (this.refused !== undefined) return this.o.fallback.sync(policy, step);
    const t0 = performance.now();
    try {
      this.group ??= await this.setUp();
      const { channel, servers } = this.group;
      const plan = bucketPlan(policy.params(), this.o.bucketBytes ?? DEFAULT_BUCKET_BYTES);
      const meta: SyncMeta = { step, dtype: 'bfloat16', buckets: plan };
      const t = this.timeoutMs;
      // every worker waits in its receive while rank 0 broadcasts; a failed receive aborts the broadcast
      let failed: ((e: unknown) => void) | undefined;
      const anyFailure = new Promise<never>((_, reject) => { failed = reject; });
      anyFailure.catch(() => undefined);
      const recvs = servers.map((server) => this.rpc(server, NCCL_METHODS.recv, [JSON.stringify(meta)], t).then((results) => {
        for (const x of results) {
          if (x === null || typeof x !== 'object' || (x as Json).loaded !== true) throw new Error(`${server}: a worker did not confirm the load: ${JSON.stringify(x)}`);
        }
        return results;
      }).catch((e: unknown) => { failed?.(e); throw e; }));
      recvs.forEach((p) => p.catch(() => undefined));
      // a CUDA engine packs each bucket on the device, straight into what NCCL broadcasts
      const pack = channel.broadcastDevice ? devicePacker(policy) : null;
      const send = (b: SyncBucket) => pack ? channel.broadcastDevice!(b.bytes, (out) => pack(b, out), t) : channel.broadcast(packBucket(policy, b), t);
      for (const b of plan) await Promise.race([send(b), anyFailure]);
      await Promise.all(recvs);
      await Promise.all(servers.map((s) => this.client.request(s, 'POST', '/reset_prefix_cache?reset_running_requests=true', undefined, 60_000)));
      const seconds = (performance.now() - t0) / 1000;
      for (const s of servers) this.client.loaded(s, `nccl:step-${step}`, seconds);
      return { step, method: channel.kind === 'nccl' ? 'nccl' : channel.kind, servers: [...servers].sort(), failed: [], seconds };
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      this.group?.channel.abort();
      this.group = undefined;
      if (e instanceof WeightSyncRefused) {
        if (this.o.mode === 'nccl') throw e;
        this.refused = why;
        this.o.log?.(`weight sync: NCCL not used (${why}); syncing through the disk for the rest of the run`);
      } else {
        this.o.log?.(`weight sync: the NCCL sync of step ${step} failed (${why}); the group was aborted, this step syncs through the disk and the next one sets NCCL up again (a vLLM worker stuck in a receive may need its server restarted)`);
      }
      const r = await this.o.fallback.sync(policy, step);
      return { ...r, fallback: why };
    }
  }

  /** murphy_nccl_close on every server, then rank 0's close (aborted past the deadline). */
  async close(): Promise<void> {
    const g = this.group;
    this.group = undefined;
    if (g === undefined) return;
    await Promise.allSettled(g.servers.map((s) => this.rpc(s, NCCL_METHODS.close, [], 60_000)));
    await g.channel.close(60_000).catch(() => g.channel.abort());
  }
}
