// The NCCL backend of the collective interface (lib/dist/collective.ts): one communicator per
// rank (lib/gpu/nccl.ts: non-blocking, every call off the JS thread with a deadline past which
// the communicator is aborted), on this rank's CUDA device. Rank 0 makes the NCCL unique id and
// hands it to the others over the job's TCP rendezvous (lib/dist/rendezvous.ts).
//
// The interface takes host typed arrays; each call stages them through device buffers (upload,
// the NCCL call on the communicator's stream, download). Reductions: sum and max of f32 (NCCL
// float) and f64 (NCCL double); data moves (all-gather, broadcast) carry bytes (NCCL uint8), so
// any array type travels. barrier() is an all-reduce of one float.
//
// NCCL's reduce-scatter and all-gather take equal parts; the interface's per-rank counts (ZeRO's
// shards are not equal: with contiguous shards most buckets lie inside one rank's shard) are
// handled by the bytes each choice moves (n elements, N ranks, largest part m; per rank, ring
// algorithms):
//   reduce-scatter  padded to equal parts, (N - 1) m, when N m < 2 n: N blocks of m elements
//                   (rank r's part at r * m, zeros after it), rank r keeps the first counts[r]
//                   of its block; else an all-reduce of the n elements, 2 (N - 1) / N n, and
//                   rank r keeps its part (padding a part that holds the whole bucket would
//                   move N - 1 times the bucket, W-fold a reduce-scatter's traffic)
//   all-gather      one broadcast of each non-empty part from its rank, in rank order: exactly
//                   the parts' bytes, no padding (one call per owning rank instead of one)
// Equal parts go unpadded in one call. Calls run one at a time in the order made (a chain, as
// the TCP backend's), so every rank issues them to NCCL in program order.
//
// Device -1 (no device): the communicator works on host copies, which only a fake library
// accepts (the tests' multi-rank fake, test/helpers/fake-nccl.ts).
import { DeviceArray, binaryInfo } from '../native.js';
import { NcclCommunicator, ncclUniqueId, requireNccl, type NcclDType, type NcclTensor } from '../gpu/nccl.js';
import {
  bytesOf, checkCounts, CollectiveError, equalCounts, partOffsets, sameKind,
  type Collective, type CollectiveJoinOptions, type DataArray, type FloatArray, type ReduceOp, type ReduceScatterOptions,
} from './collective.js';
import { rendezvous } from './rendezvous.js';

export interface NcclCollectiveOptions extends CollectiveJoinOptions {
  /**
   * CUDA device index of this rank in this process (0 when CUDA_VISIBLE_DEVICES names its one
   * GPU); -1: no device, host buffers (a fake library only).
   */
  device: number;
}

/** The interface's calls, and the names of exclusive() bodies (ZeRO-1 on the device engine: lib/dist/zero-device.ts). */
type OpName = 'allReduce' | 'reduceScatter' | 'allGather' | 'broadcast' | 'barrier' | 'zeroStep' | 'accumulate' | 'zeroFlush';


function floatType(a: FloatArray, what: string): NcclDType {
  if (a instanceof Float32Array) return 'f32';
  if (a instanceof Float64Array) return 'f64';
  throw new CollectiveError(`${what}: expected a Float32Array or Float64Array`);
}

/** A zero-filled array of the type of `like`. */
function alloc<T extends DataArray>(like: T, n: number): T {
  return new (like.constructor as new (n: number) => T)(n);
}

/**
 * Where a call's bytes live while NCCL works on them: slot 0 holds the send side (and in-place
 * calls), slot 1 the receive side. Host staging (device -1) copies; device staging keeps a few
 * u8 device arrays per slot by size (the buckets of a step repeat their sizes).
 */
export interface Staging {
  /** A buffer of `src.length` bytes holding src, or of `src` bytes (contents undefined). */
  stage(slot: 0 | 1, src: Uint8Array | number): NcclTensor;
  /** Copies a staged buffer back into `into` (same length). */
  unstage(t: NcclTensor, into: Uint8Array): void;
  free(): void;
}

export class HostStaging implements Staging {
  stage(_slot: 0 | 1, src: Uint8Array | number): NcclTensor {
    return typeof src === 'number' ? new Uint8Array(src) : src.slice();
  }
  unstage(t: NcclTensor, into: Uint8Array): void {
    into.set(t as Uint8Array);
  }
  free(): void {}
}

export class DeviceStaging implements Staging {
  private readonly cache: Map<number, DeviceArray>[] = [new Map(), new Map()];
  constructor(private readonly keep = 4) {}
  stage(slot: 0 | 1, src: Uint8Array | number): NcclTensor {
    const n = typeof src === 'number' ? src : src.length;
    const m = this.cache[slot]!;
    let d = m.get(n);
    if (d === undefined) {
      d = DeviceArray.empty('u8', n);
      if (m.size >= this.keep) {
        const [k, old] = m.entries().next().value as [number, DeviceArray];
        m.delete(k);
        old.free();
      }
    } else {
      m.delete(n); // re-inserted below: the most recently used last
    }
    m.set(n, d);
    if (typeof src !== 'number') d.raw.upload(src);
    return d;
  }
  unstage(t: NcclTensor, into: Uint8Array): void {
    (t as DeviceArray).raw.download(into);
  }
  free(): void {
    for (const m of this.cache) {
      for (const d of m.values()) d.free();
      m.clear();
    }
  }
}

export class NcclCollective implements Collective {
  private seq = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly one = new Float32Array(1);

  constructor(
    private readonly comm: NcclCommunicator,
    private readonly staging: Staging,
    private readonly timeoutMs = 1_800_000,
  ) {}

  get rank(): number { return this.comm.rank; }
  get worldSize(): number { return this.comm.worldSize; }

  /**
   * Loads NCCL (or fails at once with the one-line fix), joins the rendezvous (rank 0 hands its
   * unique id to the others), then the communicator on `device`.
   */
  static async create(o: NcclCollectiveOptions): Promise<NcclCollective> {
    requireNccl();
    if (o.device >= 0 && !binaryInfo().cuda) {
      throw new CollectiveError(`NCCL on CUDA device ${o.device}: the loaded native binary is CPU-only (${binaryInfo().path}); build the CUDA one with \`npm run build:cuda\``);
    }
    const connectMs = o.connectTimeoutMs ?? 300_000;
    const { payload } = await rendezvous({
      rank: o.rank, worldSize: o.worldSize, masterAddr: o.masterAddr, masterPort: o.masterPort, timeoutMs: connectMs,
      advertisePort: 0, payload: o.rank === 0 ? ncclUniqueId() : undefined, retryMs: o.retryMs, onRetry: o.onRetry, onListening: o.onListening,
    });
    if (payload.length !== 128) {
      throw new CollectiveError(`rank ${o.rank}: rank 0 handed over ${payload.length} bytes instead of an NCCL unique id (128); every rank must use the same distBackend (--dist-backend)`);
    }
    const comm = await NcclCommunicator.init({ id: payload, worldSize: o.worldSize, rank: o.rank, device: o.device, timeoutMs: connectMs });
    return new NcclCollective(comm, o.device >= 0 ? new DeviceStaging() : new HostStaging(), o.timeoutMs);
  }

  private run(name: OpName, body: (seq: number) => Promise<void>): Promise<void> {
    if (this.closed) return Promise.reject(new CollectiveError(`${name}: the collective is closed`));
    const p = this.chain.then(async () => {
      const seq = ++this.seq;
      try {
        await body(seq);
      } catch (e) {
        if (e instanceof CollectiveError) throw e;
        throw new CollectiveError(`${name} #${seq} on rank ${this.rank}: ${(e as Error).message}`);
      }
    });
    this.chain = p.catch(() => undefined);
    return p;
  }

  allReduce(buf: FloatArray, op: ReduceOp = 'sum'): Promise<void> {
    return this.run('allReduce', async () => {
      const dt = floatType(buf, 'allReduce');
      if (buf.length === 0) return;
      const bytes = bytesOf(buf);
      const t = this.staging.stage(0, bytes);
      await this.comm.allReduce(t, t, buf.length, dt, op, this.timeoutMs);
      this.staging.unstage(t, bytes);
    });
  }

  reduceScatter(input: FloatArray, output: FloatArray, opts: ReduceScatterOptions = {}): Promise<void> {
    return this.run('reduceScatter', async () => {
      const dt = floatType(input, 'reduceScatter');
      const W = this.worldSize;
      const counts = opts.counts ?? equalCounts(input.length, W, 'reduceScatter');
      checkCounts(counts, W, input.length, 'reduceScatter');
      if (output.length !== counts[this.rank] || !sameKind(input, output)) throw new CollectiveError(`reduceScatter: output must be a ${input.constructor.name} of ${counts[this.rank]} elements`);
      const m = Math.max(...counts);
      if (m === 0) return;
      const equal = counts.every((c) => c === m);
      if (!equal && W * m >= 2 * input.length) {
        // lopsided parts: an all-reduce moves fewer bytes than the padded reduce-scatter
        const bytes = bytesOf(input);
        const t = this.staging.stage(0, bytes);
        await this.comm.allReduce(t, t, input.length, dt, opts.op ?? 'sum', this.timeoutMs);
        const sum = alloc(input, input.length);
        this.staging.unstage(t, bytesOf(sum));
        const off = partOffsets(counts);
        output.set(sum.subarray(off[this.rank]!, off[this.rank + 1]!) as never);
        return;
      }
      let send: FloatArray = input;
      if (!equal) {
        send = alloc(input, W * m);
        const off = partOffsets(counts);
        for (let r = 0; r < W; r++) send.set(input.subarray(off[r]!, off[r + 1]!) as never, r * m);
      }
      const recv = equal ? output : alloc(output, m);
      const ts = this.staging.stage(0, bytesOf(send));
      const tr = this.staging.stage(1, recv.byteLength);
      await this.comm.reduceScatter(ts, tr, m, dt, opts.op ?? 'sum', this.timeoutMs);
      this.staging.unstage(tr, bytesOf(recv));
      if (!equal) output.set(recv.subarray(0, counts[this.rank]) as never);
    });
  }

  allGather(input: DataArray, output: DataArray, counts?: readonly number[]): Promise<void> {
    return this.run('allGather', async () => {
      const W = this.worldSize;
      const c = counts ?? new Array<number>(W).fill(input.length);
      checkCounts(c, W, output.length, 'allGather');
      if (input.length !== c[this.rank] || !sameKind(input, output)) throw new CollectiveError(`allGather: input must be a ${output.constructor.name} of ${c[this.rank]} elements`);
      const m = Math.max(...c);
      if (m === 0) return;
      const es = input.BYTES_PER_ELEMENT;
      if (c.every((x) => x === m)) {
        const ts = this.staging.stage(0, bytesOf(input));
        const tr = this.staging.stage(1, output.byteLength);
        await this.comm.allGather(ts, tr, m * es, 'u8', this.timeoutMs);
        this.staging.unstage(tr, bytesOf(output));
        return;
      }
      // unequal parts: each owning rank broadcasts its part (no padding)
      const off = partOffsets(c);
      const out = bytesOf(output);
      out.set(bytesOf(input), off[this.rank]! * es);
      for (let r = 0; r < W; r++) {
        if (c[r] === 0) continue;
        const part = out.subarray(off[r]! * es, off[r + 1]! * es);
        const t = this.staging.stage(0, r === this.rank ? part : part.length);
        await this.comm.broadcast(t, t, part.length, 'u8', r, this.timeoutMs);
        this.staging.unstage(t, part);
      }
    });
  }

  broadcast(buf: DataArray, root: number): Promise<void> {
    return this.run('broadcast', async () => {
      if (!Number.isInteger(root) || root < 0 || root >= this.worldSize) throw new CollectiveError(`broadcast: root ${root} is not a rank (0..${this.worldSize - 1})`);
      if (buf.length === 0) return;
      const bytes = bytesOf(buf);
      const t = this.staging.stage(0, this.rank === root ? bytes : bytes.length);
      await this.comm.broadcast(t, t, bytes.length, 'u8', root, this.timeoutMs);
      this.staging.unstage(t, bytes);
    });
  }

  /**
   * Runs `body` with the communicator in this collective's call order (after every call made
   * before, before any made after), with the per-call deadline: for native code that drives the
   * communicator itself (the device engine's ZeRO-1 step, lib/dist/zero-device.ts).
   */
  exclusive<T>(name: OpName, body: (comm: NcclCommunicator, timeoutMs: number) => Promise<T>): Promise<T> {
    let out!: T;
    return this.run(name, async () => { out = await body(this.comm, this.timeoutMs); }).then(() => out);
  }

  barrier(): Promise<void> {
    return this.run('barrier', async () => {
      const t = this.staging.stage(0, bytesOf(this.one));
      await this.comm.allReduce(t, t, 1, 'f32', 'sum', this.timeoutMs);
    });
  }

  /** Finalizes and destroys the communicator after the calls already made (aborted past the deadline). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.chain;
      await this.comm.close();
    } finally {
      this.staging.free();
    }
  }

  /** Aborts the communicator now (never blocks): a call waiting on it rejects. */
  abort(): void {
    this.closed = true;
    this.comm.abort();
  }
}
