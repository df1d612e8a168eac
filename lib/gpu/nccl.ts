// NCCL, loaded at run time (native/gpu/nccl.cc), and its communicators for TypeScript.
// The search order (docs/distributed.md, "NCCL"), shared with cuBLASLt (lib/gpu/library-search.ts):
//   1. MURPHY_NCCL: the libnccl.so.2 file, or a folder holding it (nothing else is tried then).
//   2. $CUDA_HOME/lib64, $CUDA_PATH/lib64 (/usr/local/cuda/lib64 when neither is set).
//   3. The nvidia-nccl Python wheels of every python3 on PATH: <site-packages>/nvidia/nccl/lib
//      (nvidia-nccl-cu12 / -cu13), nvidia/cu13/lib and nvidia/cu12/lib.
//   4. The dynamic loader: libnccl.so.2.
// Every call that waits on NCCL runs off the JS thread, with a deadline; past it the
// communicator is aborted, so a dead peer is an error, never a hang.
import { DeviceArray, ncclNative, type HostArray, type NcclBuffer, type NcclDType, type NcclRedOp, type RawNccl, type RawNcclComm } from '../native.js';
import { libraryCandidates, libraryReport, machineCandidates, type CandidateInputs, type CandidateList, type LibraryNaming, type LibraryReport, type LibrarySpec } from './library-search.js';

export type { NcclDType, NcclRedOp };
/** What the collectives read and write: device arrays (host typed arrays reach only a fake library). */
export type NcclTensor = DeviceArray | HostArray;
const rawOf = (t: NcclTensor): NcclBuffer => (t instanceof DeviceArray ? t.raw : t);

export const NCCL_SPEC: LibrarySpec = {
  envVar: 'MURPHY_NCCL',
  sonames: ['libnccl.so.2'],
  wheelDirs: ['nvidia/nccl/lib', 'nvidia/cu13/lib', 'nvidia/cu12/lib'],
  wheelLabel: 'nvidia/{nccl,cu13,cu12}/lib',
};

/** The ordered candidates (pure). */
export function ncclCandidates(inp: CandidateInputs): CandidateList {
  return libraryCandidates(NCCL_SPEC, inp);
}

/** What the search found (found, path, origin, version, versionText, reason, searched, attempts). */
export type NcclReport = LibraryReport;

const NAMING: LibraryNaming = {
  name: 'NCCL',
  fix: 'install the nvidia-nccl Python wheel (pip install nvidia-nccl-cu12, or the one vLLM/torch already installed) or set MURPHY_NCCL to the libnccl.so.2 file',
  forcedFix: 'point it at a libnccl.so.2 file',
};

/** Opens the candidates in order through the addon; install keeps the first that works for the communicators. */
export function loadNccl(list: CandidateList, opts: { install?: boolean; native?: RawNccl } = {}): NcclReport {
  const nat = opts.native ?? ncclNative();
  return libraryReport(NCCL_SPEC, NAMING, list, nat?.ncclLoad(list.candidates, opts.install ?? false));
}

let cached: NcclReport | undefined;
/** The report of the library installed in this process (it stays installed). */
let installed: NcclReport | undefined;

/**
 * Searches this machine (this process's environment and python3s), once per process.
 * install: the library found becomes the process's NCCL (kept open; needed by ncclUniqueId
 * and NcclCommunicator.init).
 */
export function findNccl(opts: { refresh?: boolean; install?: boolean } = {}): NcclReport {
  if (opts.install && installed) return installed;
  if (cached && !opts.refresh && !opts.install) return cached;
  cached = loadNccl(machineCandidates(NCCL_SPEC), { install: opts.install });
  if (opts.install && cached.found) installed = cached;
  return cached;
}

function native(): RawNccl {
  const n = ncclNative();
  if (n === undefined) throw new Error('NCCL: the loaded native binary predates it; rebuild it (npm run build:native or build:cuda)');
  return n;
}

/** Loads NCCL for this process (findNccl with install) or throws the one-line reason. */
export function requireNccl(): NcclReport {
  const r = findNccl({ install: true });
  if (!r.found) throw new Error(r.reason ?? 'NCCL not found');
  return r;
}

/** A fresh NCCL unique id (ncclGetUniqueId) for rank 0 to hand to the others. */
export function ncclUniqueId(): Uint8Array {
  requireNccl();
  return native().ncclUniqueId();
}

/** The 128-byte id as hex (how it travels in JSON: murphy_nccl_init's first argument). */
export function uniqueIdHex(id: Uint8Array): string {
  if (id.length !== 128) throw new Error(`an NCCL unique id has 128 bytes, got ${id.length}`);
  return Buffer.from(id).toString('hex');
}

export function uniqueIdFromHex(hex: string): Uint8Array {
  if (!/^[0-9a-f]{256}$/i.test(hex)) throw new Error('an NCCL unique id in hex has 256 hex digits');
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

export interface NcclInitOptions {
  id: Uint8Array;
  worldSize: number;
  rank: number;
  /** CUDA device index of this rank (ignored by CPU-only binaries); -1: no device (host arrays, for a fake library). Default 0. */
  device?: number;
  /** Deadline of the init, ms; past it the communicator is aborted. Default 120 000. */
  timeoutMs?: number;
}

/**
 * One rank of an NCCL communicator. Calls are serialised (one at a time per communicator);
 * each has a deadline (the call's, else `defaultTimeoutMs`) past which the communicator is
 * aborted and the call rejects with one line. After an abort or close every call rejects.
 */
export class NcclCommunicator {
  private closed = false;
  private constructor(private readonly raw: RawNcclComm, readonly defaultTimeoutMs: number) {}

  /** Joins the communicator (ncclCommInitRankConfig, non-blocking, polled against the deadline). */
  static async init(o: NcclInitOptions): Promise<NcclCommunicator> {
    requireNccl();
    const timeoutMs = o.timeoutMs ?? 120_000;
    const raw = await native().ncclInit(o.id, o.worldSize, o.rank, o.device ?? 0, timeoutMs);
    return new NcclCommunicator(raw, timeoutMs);
  }

  get rank(): number { return this.raw.rank; }
  get worldSize(): number { return this.raw.nranks; }
  /** The native communicator, for bindings that drive it themselves (the device engine's ZeRO-1 step). */
  get handle(): RawNcclComm { return this.raw; }

  async allReduce(send: NcclTensor, recv: NcclTensor, count: number, dtype: NcclDType, op: NcclRedOp = 'sum', timeoutMs?: number): Promise<void> {
    return this.raw.allReduce(rawOf(send), rawOf(recv), count, dtype, op, timeoutMs ?? this.defaultTimeoutMs);
  }
  async reduceScatter(send: NcclTensor, recv: NcclTensor, recvCount: number, dtype: NcclDType, op: NcclRedOp = 'sum', timeoutMs?: number): Promise<void> {
    return this.raw.reduceScatter(rawOf(send), rawOf(recv), recvCount, dtype, op, timeoutMs ?? this.defaultTimeoutMs);
  }
  async allGather(send: NcclTensor, recv: NcclTensor, sendCount: number, dtype: NcclDType, timeoutMs?: number): Promise<void> {
    return this.raw.allGather(rawOf(send), rawOf(recv), sendCount, dtype, timeoutMs ?? this.defaultTimeoutMs);
  }
  /** send is read on the root only (null elsewhere); recv receives on every rank. */
  async broadcast(send: NcclTensor | null, recv: NcclTensor, count: number, dtype: NcclDType, root = 0, timeoutMs?: number): Promise<void> {
    return this.raw.broadcast(send === null ? null : rawOf(send), rawOf(recv), count, dtype, root, timeoutMs ?? this.defaultTimeoutMs);
  }
  /** ncclCommFinalize + ncclCommDestroy (aborted past the deadline). Idempotent. */
  async close(timeoutMs?: number): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.raw.close(timeoutMs ?? this.defaultTimeoutMs);
  }
  /** ncclCommAbort: never blocks; a call waiting on this communicator rejects. */
  abort(): void {
    this.closed = true;
    this.raw.abort();
  }
}
