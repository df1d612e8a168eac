// The CPU backend of the collective interface: local (or remote) processes over TCP, one
// connection between every pair of ranks (set up after the rendezvous). Loopback TCP rather
// than shared memory: it needs no native code, crosses machines unchanged, and the same
// sockets carry the rendezvous; on the CPU the sizes moved (a small model's gradients) are
// not where the time goes. Deterministic: every element is reduced by exactly one rank (its
// owner) in rank order 0, 1, ..., N-1 and sent from there, so all ranks get identical bits.
// All-reduce = reduce-scatter + all-gather (each rank sends 2 (N-1)/N of the buffer).
import net from 'node:net';
import {
  bytesOf, checkCounts, CollectiveError, equalCounts, partOffsets, sameKind, splitCounts,
  type Collective, type CollectiveJoinOptions, type DataArray, type FloatArray, type ReduceOp, type ReduceScatterOptions,
} from './collective.js';
import { FrameReader, withDeadline, writeFrame } from './frames.js';
import { bindHost, rendezvous } from './rendezvous.js';

/** The CPU backend needs only the join options. */
export type TcpCollectiveOptions = CollectiveJoinOptions;

const OPS = ['', 'allReduce', 'reduceScatter', 'allGather', 'broadcast', 'barrier'] as const;
type OpName = (typeof OPS)[number];

const HELLO = 100;

/** A typed view of a received payload (copied when unaligned). */
function viewAs<T extends DataArray>(like: T, payload: Buffer, n: number): T {
  const C = like.constructor as { new (b: ArrayBufferLike, o: number, n: number): T; new (n: number): T; BYTES_PER_ELEMENT: number };
  if (payload.length !== n * C.BYTES_PER_ELEMENT) throw new CollectiveError(`received ${payload.length} bytes, expected ${n * C.BYTES_PER_ELEMENT}`);
  if (payload.byteOffset % C.BYTES_PER_ELEMENT === 0) return new C(payload.buffer, payload.byteOffset, n);
  const out = new C(n);
  new Uint8Array(out.buffer).set(payload);
  return out;
}

function combine(out: FloatArray, x: FloatArray, op: ReduceOp): void {
  if (op === 'sum') for (let i = 0; i < out.length; i++) out[i] = out[i]! + x[i]!;
  else for (let i = 0; i < out.length; i++) out[i] = x[i]! > out[i]! || Number.isNaN(x[i]!) ? x[i]! : out[i]!;
}

export class TcpCollective implements Collective {
  private seq = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    readonly rank: number,
    readonly worldSize: number,
    private readonly socks: (net.Socket | null)[],
    private readonly readers: (FrameReader | null)[],
    private readonly timeoutMs: number,
  ) {}

  /** Rendezvous, then one connection to every other rank. */
  static async create(o: TcpCollectiveOptions): Promise<TcpCollective> {
    const W = o.worldSize;
    const connectMs = o.connectTimeoutMs ?? 300_000;
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, bindHost(o.masterAddr), () => resolve());
    });
    const socks: (net.Socket | null)[] = new Array(W).fill(null);
    const readers: (FrameReader | null)[] = new Array(W).fill(null);
    let allIn!: () => void;
    const accepted = new Promise<void>((r) => (allIn = r));
    let expected = W - 1 - o.rank; // ranks above this one connect here
    if (expected === 0) allIn();
    server.on('connection', (s) => {
      s.setNoDelay(true);
      const rd = new FrameReader(s, 'a connecting rank');
      rd.next().then((f) => {
        const r = f.kind === HELLO && f.payload.length === 4 ? f.payload.readUInt32LE(0) : -1;
        if (r <= o.rank || r >= W || socks[r]) {
          s.destroy();
          return;
        }
        socks[r] = s;
        rd.describe = `rank ${r}`;
        readers[r] = rd;
        if (--expected === 0) allIn();
      }, () => undefined);
    });
    try {
      const { peers } = await rendezvous({
        rank: o.rank, worldSize: W, masterAddr: o.masterAddr, masterPort: o.masterPort, timeoutMs: connectMs,
        advertisePort: (server.address() as net.AddressInfo).port, retryMs: o.retryMs, onRetry: o.onRetry, onListening: o.onListening,
      });
      for (let r = 0; r < o.rank; r++) {
        const s = await new Promise<net.Socket>((resolve, reject) => {
          const c = net.connect({ host: peers[r]!.host, port: peers[r]!.port });
          c.once('connect', () => resolve(c));
          c.once('error', (e: NodeJS.ErrnoException) => reject(new CollectiveError(`rank ${o.rank}: cannot connect to rank ${r} at ${peers[r]!.host}:${peers[r]!.port} (${e.code ?? e.message})`)));
        });
        s.removeAllListeners('error');
        s.setNoDelay(true);
        socks[r] = s;
        readers[r] = new FrameReader(s, `rank ${r}`);
        const hello = Buffer.alloc(4);
        hello.writeUInt32LE(o.rank, 0);
        await writeFrame(s, HELLO, 0, hello);
      }
      await withDeadline(accepted, connectMs, () => `rank ${o.rank}: ranks above it did not connect within ${connectMs / 1000} s`);
    } catch (e) {
      for (const s of socks) s?.destroy();
      throw e;
    } finally {
      server.close();
    }
    return new TcpCollective(o.rank, W, socks, readers, o.timeoutMs ?? 1_800_000);
  }

  private run<T>(name: OpName, body: (seq: number) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new CollectiveError(`${name}: the collective is closed`));
    const p = this.chain.then(() => body(++this.seq));
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Sends one frame; the promise is awaited after the receives (its rejection is never left unhandled). */
  private send(peer: number, name: OpName, seq: number, data: Uint8Array): Promise<void> {
    const p = writeFrame(this.socks[peer]!, OPS.indexOf(name), seq, data).catch((e: Error) => {
      throw new CollectiveError(`${name} #${seq} on rank ${this.rank}: sending to rank ${peer} failed (${e.message})`);
    });
    p.catch(() => undefined);
    return p;
  }

  private async recv(peer: number, name: OpName, seq: number): Promise<Buffer> {
    let f;
    try {
      f = await withDeadline(this.readers[peer]!.next(), this.timeoutMs, () => `${name} #${seq} on rank ${this.rank}: no data from rank ${peer} within ${this.timeoutMs / 1000} s`);
    } catch (e) {
      throw new CollectiveError((e as Error).message.startsWith(name) ? (e as Error).message : `${name} #${seq} on rank ${this.rank}: ${(e as Error).message}`);
    }
    if (f.kind !== OPS.indexOf(name) || f.seq !== seq) {
      throw new CollectiveError(`collective calls out of order: rank ${peer} sent ${OPS[f.kind] ?? `kind ${f.kind}`} #${f.seq} while rank ${this.rank} is in ${name} #${seq}; every rank must make the same calls in the same order`);
    }
    return f.payload;
  }

  private async reduceScatterImpl(name: OpName, seq: number, input: FloatArray, output: FloatArray, counts: readonly number[], op: ReduceOp): Promise<void> {
    const off = partOffsets(counts);
    const me = this.rank;
    const sends: Promise<void>[] = [];
    for (let p = 0; p < this.worldSize; p++) if (p !== me) sends.push(this.send(p, name, seq, bytesOf(input.subarray(off[p]!, off[p + 1]!))));
    const n = counts[me]!;
    const acc = input.subarray(off[me]!, off[me + 1]!).slice() as FloatArray;
    const parts: FloatArray[] = [];
    for (let p = 0; p < this.worldSize; p++) parts.push(p === me ? acc : viewAs(input, await this.recv(p, name, seq), n));
    await Promise.all(sends);
    output.set(parts[0]! as never);
    for (let p = 1; p < this.worldSize; p++) combine(output, parts[p]!, op);
  }

  private async allGatherImpl(name: OpName, seq: number, input: DataArray, output: DataArray, counts: readonly number[]): Promise<void> {
    const off = partOffsets(counts);
    const me = this.rank;
    const mine = bytesOf(input).slice(); // output may alias input
    const sends: Promise<void>[] = [];
    for (let p = 0; p < this.worldSize; p++) if (p !== me) sends.push(this.send(p, name, seq, mine));
    const got: DataArray[] = [];
    for (let p = 0; p < this.worldSize; p++) if (p !== me) got[p] = viewAs(output, await this.recv(p, name, seq), counts[p]!);
    await Promise.all(sends);
    for (let p = 0; p < this.worldSize; p++) {
      if (p === me) bytesOf(output.subarray(off[p]!, off[p + 1]!)).set(mine);
      else (output as Uint8Array).set(got[p]! as Uint8Array, off[p]!);
    }
  }

  allReduce(buf: FloatArray, op: ReduceOp = 'sum'): Promise<void> {
    return this.run('allReduce', async (seq) => {
      if (this.worldSize === 1) return;
      const counts = splitCounts(buf.length, this.worldSize);
      const mine = buf.slice(0, counts[this.rank]) as FloatArray;
      await this.reduceScatterImpl('allReduce', seq, buf, mine, counts, op);
      await this.allGatherImpl('allReduce', seq, mine, buf, counts);
    });
  }

  reduceScatter(input: FloatArray, output: FloatArray, opts: ReduceScatterOptions = {}): Promise<void> {
    return this.run('reduceScatter', async (seq) => {
      const counts = opts.counts ?? equalCounts(input.length, this.worldSize, 'reduceScatter');
      checkCounts(counts, this.worldSize, input.length, 'reduceScatter');
      if (output.length !== counts[this.rank] || !sameKind(input, output)) throw new CollectiveError(`reduceScatter: output must be a ${input.constructor.name} of ${counts[this.rank]} elements`);
      await this.reduceScatterImpl('reduceScatter', seq, input, output, counts, opts.op ?? 'sum');
    });
  }

  allGather(input: DataArray, output: DataArray, counts?: readonly number[]): Promise<void> {
    return this.run('allGather', async (seq) => {
      const c = counts ?? new Array<number>(this.worldSize).fill(input.length);
      checkCounts(c, this.worldSize, output.length, 'allGather');
      if (input.length !== c[this.rank] || !sameKind(input, output)) throw new CollectiveError(`allGather: input must be a ${output.constructor.name} of ${c[this.rank]} elements`);
      await this.allGatherImpl('allGather', seq, input, output, c);
    });
  }

  broadcast(buf: DataArray, root: number): Promise<void> {
    return this.run('broadcast', async (seq) => {
      if (!Number.isInteger(root) || root < 0 || root >= this.worldSize) throw new CollectiveError(`broadcast: root ${root} is not a rank (0..${this.worldSize - 1})`);
      if (this.rank === root) {
        const data = bytesOf(buf);
        await Promise.all(this.socks.map((_, p) => (p === root ? undefined : this.send(p, 'broadcast', seq, data))));
      } else {
        (buf as Uint8Array).set(viewAs(buf, await this.recv(root, 'broadcast', seq), buf.length) as Uint8Array);
      }
    });
  }

  barrier(): Promise<void> {
    return this.run('barrier', async (seq) => {
      const empty = new Uint8Array(0);
      const sends = this.socks.map((_, p) => (p === this.rank ? undefined : this.send(p, 'barrier', seq, empty)));
      for (let p = 0; p < this.worldSize; p++) if (p !== this.rank) await this.recv(p, 'barrier', seq);
      await Promise.all(sends);
    });
  }

  /** Closes every connection; a call still in flight fails (it does not wait for it). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (let p = 0; p < this.worldSize; p++) {
      this.readers[p]?.fail(new CollectiveError('closed'));
      this.socks[p]?.end();
      this.socks[p]?.destroy();
    }
  }
}
