// The bucket plan of an NCCL weight sync: the policy's parameters in parameter order (the names
// and tied-embedding rule of save(): what PolicyWeights.params() lists), as bf16, packed into
// buckets of about `bucketBytes` (256 MiB - 1 GiB in a run; a tensor larger than a bucket gets
// one of its own). The trainer broadcasts bucket after bucket; every worker receives them in
// the same order and loads (name, tensor) pairs. The metadata the workers get is plan JSON.
import { fromBf16, toBf16 } from '../native.js';
import type { PolicyWeights } from './types.js';
import { RolloutError } from './types.js';

export const MiB = 1 << 20;
/** Default bucket size (config key weightSyncBucketMb). */
export const DEFAULT_BUCKET_BYTES = 512 * MiB;
/** The range a run accepts (config validation); tests use smaller buckets through the API. */
export const BUCKET_BYTES_RANGE = [256 * MiB, 1024 * MiB] as const;

export interface PlannedTensor {
  name: string;
  shape: number[];
  numel: number;
  /** Byte offset in its bucket (a multiple of 2: bf16). */
  offset: number;
}

export interface SyncBucket {
  bytes: number;
  tensors: PlannedTensor[];
}

/** What murphy_nccl_recv receives (as JSON). */
export interface SyncMeta {
  step: number;
  dtype: 'bfloat16';
  buckets: SyncBucket[];
}

/**
 * Packs params in order into buckets of at most bucketBytes (bf16: 2 bytes an element); a
 * tensor that alone exceeds bucketBytes gets a bucket of its own. Pure.
 */
export function bucketPlan(params: readonly { name: string; shape: number[]; numel: number }[], bucketBytes: number = DEFAULT_BUCKET_BYTES): SyncBucket[] {
  if (!Number.isSafeInteger(bucketBytes) || bucketBytes < 2) throw new RolloutError(`the weight-sync bucket size must be an integer >= 2 bytes, got ${bucketBytes}`);
  const seen = new Set<string>();
  const out: SyncBucket[] = [];
  let cur: SyncBucket | undefined;
  for (const p of params) {
    if (seen.has(p.name)) throw new RolloutError(`parameter '${p.name}' is listed twice`);
    seen.add(p.name);
    const bytes = 2 * p.numel;
    if (cur === undefined || (cur.bytes > 0 && cur.bytes + bytes > bucketBytes)) {
      cur = { bytes: 0, tensors: [] };
      out.push(cur);
    }
    cur.tensors.push({ name: p.name, shape: [...p.shape], numel: p.numel, offset: cur.bytes });
    cur.bytes += bytes;
  }
  return out.filter((b) => b.tensors.length > 0);
}

/** The bucket's bytes: each tensor of the policy converted to bf16 (round to nearest even) at its offset. */
export function packBucket(policy: Pick<PolicyWeights, 'getParam'>, b: SyncBucket): Uint8Array {
  const buf = new ArrayBuffer(b.bytes);
  for (const t of b.tensors) {
    const w = policy.getParam(t.name);
    if (w.length !== t.numel) throw new RolloutError(`parameter '${t.name}' has ${w.length} elements, the plan says ${t.numel}`);
    toBf16(w, new Uint16Array(buf, t.offset, t.numel));
  }
  return new Uint8Array(buf);
}

/** The tensors of a received bucket, as float32 (what the CPU engine loads). */
export function unpackBucket(bytes: Uint8Array, b: SyncBucket): { name: string; shape: number[]; data: Float32Array }[] {
  if (bytes.length !== b.bytes) throw new RolloutError(`a bucket of ${bytes.length} bytes arrived, the plan says ${b.bytes}`);
  const aligned = bytes.byteOffset % 2 === 0 ? bytes : bytes.slice();
  return b.tensors.map((t) => ({
    name: t.name, shape: t.shape,
    data: fromBf16(new Uint16Array(aligned.buffer, aligned.byteOffset + t.offset, t.numel), new Float32Array(t.numel)) as Float32Array,
  }));
}

/** Checks metadata received over /collective_rpc (the worker side). */
export function parseSyncMeta(json: string): SyncMeta {
  let m: SyncMeta;
  try {
    m = JSON.parse(json) as SyncMeta;
  } catch (e) {
    throw new RolloutError(`murphy_nccl_recv: the metadata is not JSON: ${(e as Error).message}`, { status: 400 });
  }
  if (m === null || typeof m !== 'object' || m.dtype !== 'bfloat16' || !Array.isArray(m.buckets)) {
    throw new RolloutError('murphy_nccl_recv: the metadata needs dtype "bfloat16" and a list of buckets', { status: 400 });
  }
  for (const [i, b] of m.buckets.entries()) {
    if (!Number.isSafeInteger(b.bytes) || b.bytes < 0 || !Array.isArray(b.tensors)) throw new RolloutError(`murphy_nccl_recv: bucket ${i} is malformed`, { status: 400 });
    for (const t of b.tensors) {
      if (typeof t.name !== 'string' || !Number.isSafeInteger(t.offset) || t.offset % 2 !== 0 || t.offset + 2 * t.numel > b.bytes) {
        throw new RolloutError(`murphy_nccl_recv: tensor ${JSON.stringify(t.name)} of bucket ${i} lies outside it`, { status: 400 });
      }
    }
  }
  return m;
}
