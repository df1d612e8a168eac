// The bucket plan: parameters, in model order, grouped into buckets of at most a byte size, so
// gradients are reduced (and weights gathered or broadcast) in a few large calls instead of one
// per tensor. A parameter larger than the size gets a bucket of its own. Buckets are ranges of
// the flat parameter vector (parameters laid end to end in order).

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
