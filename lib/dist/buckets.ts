// The bucket plan: parameters, in model order, grouped into buckets of at most a byte size, so
// gradients are reduced (and weights gathered or broadcast) in a few large calls instead of one
// per tensor. A parameter larger than the size gets a bucket of its own. Buckets are ranges of
// the flat parameter vector (parameters laid end to end in order).

/**
 * ZeRO-1's gradient buckets (reduce-scatter at the step, or during the backward pass with the
 * overlap; the weight all-gather uses the same plan): the one default and range of their size,
 * config key `reduceBucketMb` (DeepSpeed's reduce_bucket_size, DDP's bucket_cap_mb), in MiB of
 * fp32 gradients. ZeroOptions.bucketBytes takes any size from 4 bytes (one fp32) to `maxMb` (tests
 * use buckets smaller than a parameter).
 */
export const REDUCE_BUCKET_MB = { default: 32, max: 4096 } as const;

/** bucketBytes checked (one line naming the fix), or the default. */
export function reduceBucketBytes(bytes: number | undefined): number {
  if (bytes === undefined) return REDUCE_BUCKET_MB.default * 2 ** 20;
  if (!Number.isSafeInteger(bytes) || bytes < 4 || bytes > REDUCE_BUCKET_MB.max * 2 ** 20) {
    throw new Error(`ZeRO-1 bucket size ${bytes} bytes: must be a whole number of bytes from 4 (one fp32 gradient) to ${REDUCE_BUCKET_MB.max} MiB; set reduceBucketMb (--reduce-bucket-mb) between 0 and ${REDUCE_BUCKET_MB.max}`);
  }
  return bytes;
}

export interface FlatParam {
  name: string;
  numel: number;
  /** Start in the flat vector. */
  offset: number;
}

export interface Bucket {
  /** Range [begin, end) of the flat vector. */
  begin: number;
  end: number;
  /** Indices of its parameters (consecutive). */
  params: number[];
}

/** Parameters laid end to end in order. */
export function flatLayout(params: readonly { name: string; numel: number }[]): { params: FlatParam[]; total: number } {
  let o = 0;
  const out = params.map((p) => {
    if (!Number.isSafeInteger(p.numel) || p.numel < 0) throw new Error(`parameter ${p.name}: numel ${p.numel} is not an integer >= 0`);
    const f = { name: p.name, numel: p.numel, offset: o };
    o += p.numel;
    return f;
  });
  return { params: out, total: o };
}

/**
 * Buckets of whole parameters in order: a parameter joins the current bucket while the bucket
 * stays within bucketBytes (bytesPerElement each), else it starts the next one.
 */
export function planBuckets(params: readonly FlatParam[], bucketBytes: number, bytesPerElement = 4): Bucket[] {
  if (!(bucketBytes >= 1) || !Number.isFinite(bucketBytes)) throw new Error(`bucket size must be a number of bytes >= 1, got ${bucketBytes}`);
  const out: Bucket[] = [];
  let cur: Bucket | null = null;
  for (let i = 0; i < params.length; i++) {
    const p = params[i]!;
    const bytes = p.numel * bytesPerElement;
    if (cur && (cur.end - cur.begin) * bytesPerElement + bytes <= bucketBytes) {
      cur.end += p.numel;
      cur.params.push(i);
    } else {
      cur = { begin: p.offset, end: p.offset + p.numel, params: [i] };
      out.push(cur);
    }
  }
  return out;
}
