// The shard plan of ZeRO-1: the flat parameter vector cut into one contiguous range per rank,
// balanced (sizes differ by less than two alignment blocks) and aligned (every range starts at
// a multiple of `align` elements), plus what re-sharding needs: the parts of a range held by
// the shards of another plan, and the per-rank counts of a bucket for reduce-scatter/all-gather.

export interface Range {
  begin: number;
  end: number;
}

export interface ShardPlan {
  total: number;
  worldSize: number;
  align: number;
  /** ranges[r]: rank r's shard. */
  ranges: Range[];
}

/** Default alignment: 64 elements (256 bytes of fp32; what device collectives like). */
export const SHARD_ALIGN = 64;

export function planShards(total: number, worldSize: number, align = SHARD_ALIGN): ShardPlan {
  if (!Number.isSafeInteger(total) || total < 0) throw new Error(`shard plan: total ${total} is not an integer >= 0`);
  if (!Number.isSafeInteger(worldSize) || worldSize < 1) throw new Error(`shard plan: world size ${worldSize} is not an integer >= 1`);
  if (!Number.isSafeInteger(align) || align < 1) throw new Error(`shard plan: alignment ${align} is not an integer >= 1`);
  const blocks = Math.ceil(total / align);
  const ranges: Range[] = [];
  for (let r = 0; r < worldSize; r++) {
    const b0 = Math.floor((r * blocks) / worldSize);
    const b1 = Math.floor(((r + 1) * blocks) / worldSize);
    ranges.push({ begin: Math.min(total, b0 * align), end: Math.min(total, b1 * align) });
  }
  return { total, worldSize, align, ranges };
}

/** Elements of [begin, end) that fall in each rank's shard, in rank order (they sum to end - begin). */
export function rangeCounts(plan: ShardPlan, begin: number, end: number): number[] {
  return plan.ranges.map((r) => Math.max(0, Math.min(end, r.end) - Math.max(begin, r.begin)));
}

/** The intersection of two ranges (empty: end <= begin). */
export function intersect(a: Range, b: Range): Range {
  return { begin: Math.max(a.begin, b.begin), end: Math.min(a.end, b.end) };
}

/**
 * Assembles the values of `want` from pieces that each hold a contiguous range (e.g. the
 * shards of a checkpoint written by another world size). Throws naming the first element no
 * piece covers.
 */
export function assembleRange(pieces: readonly { begin: number; data: Float32Array }[], want: Range): Float32Array {
  const out = new Float32Array(want.end - want.begin);
  let covered = 0;
  for (const p of pieces) {
    const x = intersect(want, { begin: p.begin, end: p.begin + p.data.length });
    if (x.end <= x.begin) continue;
    out.set(p.data.subarray(x.begin - p.begin, x.end - p.begin), x.begin - want.begin);
    covered += x.end - x.begin;
  }
  if (covered !== out.length) {
    const sorted = [...pieces].sort((a, b) => a.begin - b.begin);
    let at = want.begin;
    for (const p of sorted) if (p.begin <= at && p.begin + p.data.length > at) at = p.begin + p.data.length;
    throw new Error(`re-sharding: element ${at} of [${want.begin}, ${want.end}) is in no shard (overlapping or missing shard files)`);
  }
  return out;
}
