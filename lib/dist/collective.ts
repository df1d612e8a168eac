// The collective interface of data-parallel training: what every backend (the CPU backend over
// loopback TCP here, NCCL over device buffers) provides. Promise-based; every call is bounded
// by the backend's timeout, so a dead peer is an error, not a hang. Calls are collective: every
// rank makes the same calls in the same order (a backend detects and reports a mismatch).

export type ReduceOp = 'sum' | 'max';
/** Arrays that can be reduced. */
export type FloatArray = Float32Array | Float64Array;
/** Arrays that can be moved (gathered, broadcast). */
export type DataArray = FloatArray | Uint8Array;

export interface ReduceScatterOptions {
  op?: ReduceOp;
  /**
   * Elements of `input` each rank receives, in rank order (sum = input.length); default: equal
   * parts (input.length must divide by worldSize). Rank r gets input[sum(counts[0..r)) ..][0 .. counts[r]).
   */
  counts?: readonly number[];
}

export interface Collective {
  readonly rank: number;
  readonly worldSize: number;
  /** In place: buf = op over ranks of buf; every rank gets bit-identical values. */
  allReduce(buf: FloatArray, op?: ReduceOp): Promise<void>;
  /** output (length counts[rank]) = op over ranks of this rank's part of input. */
  reduceScatter(input: FloatArray, output: FloatArray, opts?: ReduceScatterOptions): Promise<void>;
  /** output = every rank's input, in rank order; counts[r] = rank r's input length (default: all equal). */
  allGather(input: DataArray, output: DataArray, counts?: readonly number[]): Promise<void>;
  /** In place: buf = root's buf. */
  broadcast(buf: DataArray, root: number): Promise<void>;
  barrier(): Promise<void>;
  close(): Promise<void>;
}

/** How a rank of either backend joins its job (the rendezvous at masterAddr:masterPort, lib/dist/rendezvous.ts). */
export interface CollectiveJoinOptions {
  rank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number;
  /** Rendezvous and connection (TCP) or communicator (NCCL) set-up deadline, ms (default 300 s). */
  connectTimeoutMs?: number;
  /** Bound on each collective call, ms (default 1800 s: rank 0 may be evaluating while the others wait). */
  timeoutMs?: number;
  retryMs?: number;
  onRetry?: (attempt: number, reason: string) => void;
  onListening?: (port: number) => void;
}

/** The bytes of an array, in place. */
export const bytesOf = (a: DataArray): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
/** Whether two arrays have one element type. */
export const sameKind = (a: DataArray, b: DataArray): boolean => a.constructor === b.constructor;

export class CollectiveError extends Error {
  override name = 'CollectiveError';
}

/** Offsets of parts of the given lengths (length counts.length + 1). */
export function partOffsets(counts: readonly number[]): number[] {
  const o = [0];
  for (const c of counts) o.push(o[o.length - 1]! + c);
  return o;
}

/** Equal parts of n over w ranks (n must divide by w). */
export function equalCounts(n: number, w: number, what: string): number[] {
  if (n % w !== 0) throw new CollectiveError(`${what}: ${n} elements do not split equally over ${w} ranks; pass counts`);
  return new Array<number>(w).fill(n / w);
}

/** Near-equal contiguous parts of n over w (the first n % w parts one longer). */
export function splitCounts(n: number, w: number): number[] {
  return Array.from({ length: w }, (_, r) => Math.floor(((r + 1) * n) / w) - Math.floor((r * n) / w));
}

/** Checks the arguments of a collective call; throws one line naming the problem. */
export function checkCounts(counts: readonly number[], w: number, total: number, what: string): void {
  if (counts.length !== w) throw new CollectiveError(`${what}: ${counts.length} counts for ${w} ranks`);
  if (counts.some((c) => !Number.isSafeInteger(c) || c < 0)) throw new CollectiveError(`${what}: counts must be integers >= 0, got ${JSON.stringify(counts)}`);
  const s = counts.reduce((a, b) => a + b, 0);
  if (s !== total) throw new CollectiveError(`${what}: counts sum to ${s}, expected ${total}`);
}

/** A collective of one rank (no peers): every call is a local copy. */
export class SoloCollective implements Collective {
  readonly rank = 0;
  readonly worldSize = 1;
  async allReduce(_buf: FloatArray, _op?: ReduceOp): Promise<void> {}
  async reduceScatter(input: FloatArray, output: FloatArray, opts: ReduceScatterOptions = {}): Promise<void> {
    checkCounts(opts.counts ?? [input.length], 1, input.length, 'reduceScatter');
    if (output.length !== input.length) throw new CollectiveError(`reduceScatter: output has ${output.length} elements, expected ${input.length}`);
    output.set(input);
  }
  async allGather(input: DataArray, output: DataArray, counts?: readonly number[]): Promise<void> {
    checkCounts(counts ?? [input.length], 1, input.length, 'allGather');
    if (output.length !== input.length || output.constructor !== input.constructor) throw new CollectiveError('allGather: output must have the type and length of input');
    (output as Uint8Array).set(input as Uint8Array);
  }
  async broadcast(_buf: DataArray, root: number): Promise<void> {
    if (root !== 0) throw new CollectiveError(`broadcast: root ${root} is not a rank of a world of 1`);
  }
  async barrier(): Promise<void> {}
  async close(): Promise<void> {}
}

/** JSON-serialisable values from every rank, in rank order (lengths gathered first). */
export async function allGatherJson<T>(c: Collective, value: T): Promise<T[]> {
  const bytes = new Uint8Array(Buffer.from(JSON.stringify(value), 'utf8'));
  const lens = new Float64Array(c.worldSize);
  const mine = new Float64Array([bytes.length]);
  await c.allGather(mine, lens);
  const counts = Array.from(lens);
  const out = new Uint8Array(counts.reduce((a, b) => a + b, 0));
  await c.allGather(bytes, out, counts);
  const off = partOffsets(counts);
  return counts.map((_, r) => JSON.parse(Buffer.from(out.buffer, out.byteOffset + off[r]!, counts[r]!).toString('utf8')) as T);
}

/** A JSON value from `root` on every rank. */
export async function broadcastJson<T>(c: Collective, value: T | undefined, root = 0): Promise<T> {
  const bytes = c.rank === root ? new Uint8Array(Buffer.from(JSON.stringify(value ?? null), 'utf8')) : new Uint8Array(0);
  const len = new Float64Array([bytes.length]);
  await c.broadcast(len, root);
  const buf = c.rank === root ? bytes : new Uint8Array(len[0]!);
  await c.broadcast(buf, root);
  return JSON.parse(Buffer.from(buf.buffer, buf.byteOffset, buf.length).toString('utf8')) as T;
}

/** Element-wise sums of numbers over ranks (float64, deterministic). */
export async function allReduceNumbers(c: Collective, values: readonly number[], op: ReduceOp = 'sum'): Promise<number[]> {
  const b = Float64Array.from(values);
  await c.allReduce(b, op);
  return Array.from(b);
}
