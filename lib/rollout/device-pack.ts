// Weight-sync buckets packed on the trainer's GPU (docs/distributed.md, "NCCL weight sync to
// vLLM"): when the policy runs on the CUDA device engine, each bf16 bucket is packed by the
// engine from its compute weights straight into the device buffer NCCL broadcasts
// (PolicyModel.packBf16), instead of converting every parameter on the host and uploading the
// bucket. The bytes are the host packing's (lib/rollout/weight-sync-plan.ts's packBucket): the
// compute weights are the master weights rounded to nearest even, as toBf16 rounds them.
import { PolicyModel } from '../model/index.js';
import type { DeviceArray } from '../native.js';
import { findWrapped } from './engine.js';
import type { SyncBucket } from './weight-sync-plan.js';

/** Fills a device bucket of b.bytes with the bucket's tensors. */
export type DevicePacker = (b: SyncBucket, out: DeviceArray<'u8'>) => void;

/** The packer of the CUDA device engine behind `policy` (itself or wrapped), else null (pack on the host). */
export function devicePacker(policy: unknown): DevicePacker | null {
  const m = findWrapped(policy, (x): x is PolicyModel => x instanceof PolicyModel);
  if (m === undefined || m.engine.device !== 'cuda') return null;
  return (b, out) => m.packBf16(b.tensors.map((t) => ({ name: t.name, offset: t.offset })), out);
}
